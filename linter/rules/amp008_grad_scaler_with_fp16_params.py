"""AMP008 grad-scaler-with-fp16-params."""

from __future__ import annotations

import re
from collections.abc import Iterable

import libcst as cst

from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.syntax import (
    FP16,
    Fact,
    ModuleIndex,
    descendants,
    dotted_name,
    keyword,
    last_part,
)
from linter.model.values import TRAINING_ARGUMENTS, Fp16Site, Fp16Sites, Fp32Trainables

#: Text of an fp16 model: a ``.half()`` cast, or ``float16``/``torch.half`` in a cast or a load.
_FP16_MODEL_TEXT = re.compile(r"\.half\s*\(|float16|torch\.half\b")
#: Text of a switch that brings a GradScaler.
_LOSS_SCALING_TEXT = re.compile(
    r"GradScaler|fp16\s*=|mixed_precision|precision\s*=\s*[\"']?16(?!-true)|Accelerator\s*\("
)
#: ...or of training arguments a parser fills (a parsed ``--fp16``), handed to a Trainer of
#: any name (``TevatronTrainer``, ``DistilTrainer``).
_PARSED_ARGUMENTS_TEXT = "HfArgumentParser"
_TRAINER_TEXT = re.compile(r"Trainer\b")

#: Functions that run before training and hand on what they build, where a cast of a model
#: that another function trains is part of the setup (not an export or an eval step).
_SETUP_FUNCTIONS = frozenset({"__init__", "setup", "configure_model", "configure_optimizers"})


def may_hold_a_finding(source: str) -> bool:
    """Cheap text test: an fp16 model and a loss-scaling switch (or an ``HfArgumentParser``
    beside a Trainer: the parsed ``--fp16``)."""
    return _FP16_MODEL_TEXT.search(source) is not None and (
        _LOSS_SCALING_TEXT.search(source) is not None
        or (_PARSED_ARGUMENTS_TEXT in source and _TRAINER_TEXT.search(source) is not None)
    )


class GradScalerWithFp16Params(Rule):
    """A GradScaler over parameters that are fp16 themselves.

    ## What it does
    Flags a model cast or loaded in fp16 — `model.half()`, `model = model.half()`,
    `.to(torch.float16)`, `.to(dtype=torch.half)`,
    `from_pretrained(..., torch_dtype=torch.float16)` (or `dtype="float16"`, or a
    `**model_kwargs` dict that says so) — whose parameters are trained through a GradScaler:
    an optimizer over `model.parameters()` (directly, in a parameter-group list, through
    `filter(lambda p: p.requires_grad, ...)`) that `scaler.step(optimizer)` or
    `scaler.unscale_(optimizer)` steps, `Trainer(model=model, args=TrainingArguments(fp16=True))`
    (or handed the training arguments an `HfArgumentParser` fills, on the runs given `--fp16`;
    the Trainer's class may be a name bound to one, or to a choice between two),
    `accelerator.prepare(model, ...)` with `Accelerator(mixed_precision="fp16")`, or a Lightning
    `precision="16-mixed"` fit. The finding is at the cast or load; the scaler, the optimizer and
    the step are related locations.

    The model is tracked through the file as AMP002 tracks bf16 models: rebindings, in-place
    casts, `.to(device)`, DDP/`torch.compile` wrappers, a function's parameter when this file
    passes it the fp16 model (a `main()` that loads it and calls the function that builds the
    Trainer or the optimizer), a model a same-module helper returns, and an optimizer over it
    handed to a training function of another module that builds a GradScaler and steps it
    (`train(model, loader, optimizer)` with `scaler.step(optimizer)` in `train_utils.py`).
    A builder of another module that loads with the `**kwargs` it is given
    (`DenseModel.build(model_args, training_args, torch_dtype=dtype)`, a classmethod whose
    `from_pretrained(name, **hf_kwargs)` loads the backbone and whose `cls(encoder=backbone)`
    wraps it) loads in the dtype its caller passes: the finding is at the call, and where the
    builder wraps the backbone in adapters on some runs only (`if model_args.lora:`), the
    message names the others ("and `model_args.lora` is false in `build`").
    Under an Accelerator, a model cast after `accelerator.prepare(model, ...)` and trained
    after the cast counts (diffusers' scripts cast to `weight_dtype` after `prepare`).

    Not reported — the optimizer steps fp32 parameters, or no GradScaler touches fp16 ones:

    - adapter training: peft/LoRA applied to that model (`get_peft_model(model, ...)`,
      `PeftModel.from_pretrained(model, ...)`, `prepare_model_for_kbit_training(model)`,
      `unet.add_adapter(...)`; peft upcasts adapters to fp32), a 4/8-bit load. An
      `import peft` or a `LoraConfig` that is never applied to the model, or is applied to
      another one, does not count, nor does `quantization_config=None`. Adapters applied only
      under a switch of their own (`if train_config.use_peft:`, off by default in
      llama-recipes) or a quantization config set only under one (`bnb_config = None`, then
      `if train_config.quantization: bnb_config = ...`) leave the other runs reported, the
      switch named: "when ... and `train_config.use_peft` is false, ...";
    - trainable parameters cast back: `cast_training_params(model, dtype=torch.float32)`,
      `p.data = p.data.float()`, `model.head.float()`, `model.to(torch.float32)` — before
      training (a cast after every training step of its function, to save, restores nothing);
    - fp32 master weights: an optimizer over `[p.detach().clone().float() for p in ...]`;
    - a frozen fp16 model (`requires_grad_(False)`, a teacher, a VAE, a text encoder) or one
      no optimizer trains; a frozen part is all that is frozen (`vae.encoder` leaves the
      decoder trained), and a model some part of which is switched back on
      (`requires_grad_(True)`) on a run that also casts it is trained;
    - a `ShardedGradScaler` (FSDP's, fairscale's): its `unscale_` accepts fp16 gradients;
    - `TrainingArguments(fp16=True, deepspeed=...)` with a config set on every run (a path, a
      dict, a flag whose default names one) or by something this file does not declare: the
      Trainer then builds no GradScaler, and DeepSpeed's fp16 engine keeps fp32 master
      weights. A flag declared here with no value by default (CodeT5+'s `--deepspeed`,
      `default=None`) leaves the runs without it to the GradScaler: reported "when ... and
      `--deepspeed` is not given";
    - a GradScaler created with `enabled=False` (or a value the source fixes to false), one
      enabled by a runtime flag while the cast hangs on another (`if args.half: model.half()`
      beside `enabled=args.amp`), Lightning `precision="16-true"` (no scaler). A cast on
      every run beside a scaler a runtime flag enables is reported under that flag ("when
      `args.amp` is true, ..."): every run that turns the scaler on raises;
    - a cast in a branch exclusive with the scaler (`if args.fp16: ... else: ...`), a cast after
      training (`model.half()` to export or evaluate), a cast in another method that is not the
      setup (`__init__`, `setup`, `configure_optimizers`, a builder that returns the model);
    - `.half()` on tensors and inputs, a dtype chosen at runtime that no declared flag
      decides.

    A switch that only some runs turn on is reported with the condition first: a
    `--mixed_precision` flag with `"fp16"` among its `choices` ("when run with
    --mixed_precision fp16, ..."), and a scaler enabled by the very flag the cast hangs on —
    `if args.fp16: model.half()` beside `GradScaler(enabled=args.fp16)` or
    `TrainingArguments(fp16=args.fp16)`, the shape left behind when apex's `FP16_Optimizer` is
    swapped for a GradScaler ("when `args.fp16` is true, ..."). A dtype a conditional picks,
    fp16 in one arm only (`from_pretrained(..., torch_dtype=torch.float16 if cfg.use_fp16 else
    "auto")`, `.to(torch.float16 if args.fp16 else torch.float32)`, a name bound to such a
    conditional, or bound to fp16 in one branch of an `if`/`elif` chain — `if args.bf16:
    torch_dtype = torch.bfloat16 elif args.fp16: torch_dtype = torch.float16 else: ...`), is a
    cast under that condition, as `if cfg.use_fp16: model.half()` is: reported beside a scaler
    on for those runs, quiet beside one only the other runs build.
    A cast to a dtype a flag picks — `model.to(dtype=ptdtype)` with nanoGPT's
    `ptdtype = {...}[args.dtype]`, a conditional on the flag, the flag itself, diffusers'
    `weight_dtype = torch.float32` then `if accelerator.mixed_precision == "fp16":
    weight_dtype = torch.float16` — is an fp16 cast
    on every run when the flag's `default` is fp16, and on the runs that ask for it when fp16 is
    only among its `choices` ("when run with --dtype float16, ..."); a scaler enabled by the
    same flag (`enabled=(args.dtype == "float16")`) is on exactly on those runs.

    A GradScaler next to a bf16 autocast is still reported here when it steps an fp16 model:
    this rule owns that combination, because `unscale_` raises on the fp16 gradients whatever
    the autocast computes in. AMP010 (a scaler where every autocast is bf16) leaves a file that
    casts to fp16 to this rule, so the two rules' exclusions never combine into silence.

    ## Why is this bad?
    Loss scaling exists to keep fp16 *gradients of fp32 parameters* from underflowing, and the
    GradScaler refuses anything else: the first `scaler.unscale_(optimizer)` (called by
    `scaler.step`, by `accelerator.clip_grad_norm_`, by Trainer and Lightning) raises
    `ValueError: Attempting to unscale FP16 gradients.` Even without the scaler, an optimizer
    stepping fp16 weights loses small updates to rounding (fp16 has 11 bits of mantissa).
    Reports of this error over fp16 parameters:
    [pytorch#74739](https://github.com/pytorch/pytorch/issues/74739),
    [Lightning#5140](https://github.com/Lightning-AI/pytorch-lightning/issues/5140),
    [Lightning#7078](https://github.com/Lightning-AI/pytorch-lightning/issues/7078),
    [bitsandbytes#945](https://github.com/bitsandbytes-foundation/bitsandbytes/issues/945),
    [CogVideo#775](https://github.com/THUDM/CogVideo/issues/775),
    [fast-stable-diffusion#1975](https://github.com/TheLastBen/fast-stable-diffusion/issues/1975),
    [d3po#6](https://github.com/yk7333/d3po/issues/6).

    ## Example
    ```python
    model = Net().cuda().half()
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # ValueError: Attempting to unscale FP16 gradients.
        scaler.update()
    ```

    ## Use instead
    Keep the parameters in fp32 and let autocast run the forward pass in fp16:
    ```python
    model = Net().cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```
    For a large pretrained model, train fp32 adapters over the frozen fp16 base (peft's
    LoRA), or load it in fp32.

    ## Suppression
    Add `# noqa: AMP008` to the reported line if the optimizer really steps fp32 copies of the
    parameters in a way the linter cannot see.
    """

    code = "AMP008"
    name = "grad-scaler-with-fp16-params"
    summary = "a GradScaler unscales gradients of parameters cast or loaded in fp16 (it raises)"
    # Every fp16 model spells `.half(` or `float16`/`torch.half` (`"fp16"` as a load dtype is
    # rare enough not to pay for parsing every file that says fp16).
    triggers = ("half", "float16")
    valid = (
        Example(
            """\
import torch

model = Net().cuda()
optimizer = torch.optim.AdamW(model.parameters())
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
model.half()  # after training: a smaller copy to export
torch.save(model.state_dict(), "model_fp16.pt")
"""
        ),
        Example(
            """\
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.float16)
model = get_peft_model(model, LoraConfig(r=8, target_modules=["c_attn"]))
optimizer = torch.optim.AdamW(filter(lambda p: p.requires_grad, model.parameters()))
scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch

teacher = Teacher().cuda().half().eval()  # frozen, inference only
teacher.requires_grad_(False)
student = Student().cuda()
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
for x, _ in loader:
    with torch.no_grad():
        target = teacher(x.half())
    with torch.autocast("cuda", dtype=torch.float16):
        loss = distill(student(x), target)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch

model = Net().cuda()
if args.pure_fp16:
    model.half()
    scaler = None
else:
    scaler = torch.amp.GradScaler("cuda")
optimizer = torch.optim.AdamW(model.parameters())
for x, y in loader:
    loss = loss_fn(model(x), y)
    if scaler is None:
        loss.backward()
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
"""
        ),
        Example(
            """\
import torch

model = Net().cuda().half()
master = [p.detach().clone().float().requires_grad_() for p in model.parameters()]
optimizer = torch.optim.SGD(master, lr=0.1)
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    for m, p in zip(master, model.parameters()):
        m.grad = p.grad.float()
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch

model = Net().cuda().half()
optimizer = torch.optim.AdamW(model.parameters())
scaler = torch.amp.GradScaler("cuda", enabled=False)
for x, y in loader:
    loss = loss_fn(model(x.half()), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch
from diffusers.training_utils import cast_training_params

unet = UNet2DConditionModel.from_pretrained(name, subfolder="unet")
unet.to(device, dtype=torch.float16)
unet.add_adapter(unet_lora_config)
cast_training_params(unet, dtype=torch.float32)
optimizer = torch.optim.AdamW(filter(lambda p: p.requires_grad, unet.parameters()))
scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = training_loss(unet, batch)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch

model = Net().cuda().to(torch.float16 if cfg.pure_fp16 else torch.float32)
optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
if not cfg.pure_fp16:  # the fp16 run keeps no GradScaler: never the half model's run
    scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    loss = loss_fn(model(x), y)
    if cfg.pure_fp16:
        loss.backward()
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
"""
        ),
    )
    invalid = (
        Example(
            """\
import torch

model = Net().cuda().half()
optimizer = torch.optim.AdamW(model.parameters())
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
            (3,),
        ),
        Example(
            """\
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.float16)
model.train()
optimizer = torch.optim.AdamW(
    [{"params": model.parameters(), "lr": 1e-5}], weight_decay=0.01
)
scaler = torch.cuda.amp.GradScaler()
for batch in loader:
    with torch.cuda.amp.autocast():
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
            (4,),
        ),
        Example(
            """\
import torch
from transformers import AutoModelForSeq2SeqLM, Trainer, TrainingArguments

model = AutoModelForSeq2SeqLM.from_pretrained("t5-small", torch_dtype=torch.float16)
args = TrainingArguments("out", fp16=True, per_device_train_batch_size=8)
Trainer(model=model, args=args, train_dataset=train_set).train()
""",
            (4,),
        ),
        Example(
            """\
import torch
from accelerate import Accelerator

accelerator = Accelerator(mixed_precision="fp16")
model = Net().to(dtype=torch.half)
optimizer = torch.optim.AdamW(model.parameters())
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for x, y in loader:
    accelerator.backward(loss_fn(model(x), y))
    optimizer.step()
    optimizer.zero_grad()
""",
            (5,),
        ),
        Example(
            """\
from torch.cuda.amp import GradScaler


class Trainer:
    def __init__(self, cfg):
        self.model = build_model(cfg).cuda()
        self.model.half()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=cfg.lr)
        self.scaler = GradScaler()

    def train_step(self, batch):
        loss = self.model(batch).mean()
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
            (7,),
        ),
        Example(
            """\
import torch


def build(cfg):
    model = Net(cfg).to("cuda", torch.float16)
    return model


def main(cfg):
    model = build(cfg)
    params = filter(lambda p: p.requires_grad, model.parameters())
    optimizer = torch.optim.Adam(params, lr=cfg.lr)
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.step(optimizer)
        scaler.update()
""",
            (5,),
        ),
        Example(
            """\
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(
    cfg.model_name, torch_dtype=torch.float16 if cfg.use_fp16 else "auto"
)
optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
scaler = torch.amp.GradScaler("cuda", enabled=cfg.use_fp16)
for batch in loader:
    with torch.autocast("cuda", dtype=torch.float16, enabled=cfg.use_fp16):
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
            (5,),
        ),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        return super().wants(text) and may_hold_a_finding(text)

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        if not may_hold_a_finding(context.filter_text):  # for callers that skip the engine
            return
        analysis = Fp16Sites(context, target=FP16, runtime_flags=True)
        trainables = Fp32Trainables(
            context.source, analysis.index, analysis.origins, analysis.paths
        )
        reported: set[cst.CSTNode] = set()
        for site in analysis.sites(loss_scaling_only=True):
            origin = site.origin.node
            if origin in reported or not self._trains_fp16(analysis, trainables, site):
                continue
            deepspeed = _deepspeed_argument(analysis.index, site.node)
            unset = analysis.unset_flag(deepspeed) if deepspeed is not None else None
            if deepspeed is not None and unset is None:
                continue  # DeepSpeed's engine scales the loss over fp32 master weights
            reported.add(origin)
            related = ((site.node, f"{site.what} is created here"), *site.through)
            off = (
                ()
                if site.model is None
                else trainables.switched_off(site.model, origin, site.origin.facts)
            )
            yield Finding(origin, _message(context, site, off, unset), related=related)

    @staticmethod
    def _trains_fp16(analysis: Fp16Sites, trainables: Fp32Trainables, site: Fp16Site) -> bool:
        """The optimizer behind ``site`` steps the fp16 parameters of ``site.model``."""
        origin = site.origin.node
        hangs_on = analysis.paths.conditions(origin) | site.origin.facts
        if hangs_on and not site.requires <= hangs_on:
            # A runtime flag enables the scaler, and the cast hangs on another one. (A cast on
            # every run meets the scaler on the runs that enable it: reported under the flag.)
            return False
        # Only a bf16 checkpoint name gives a None model, and this rule tracks fp16 origins.
        facts = site.origin.facts
        if site.model is not None and trainables.why_fp32(site.model, origin, facts) is not None:
            return False
        index = analysis.index
        for node, _ in site.through:
            if isinstance(node, cst.Assign) and trainables.copies_parameters(node.value):
                return False  # fp32 master copies
        if not _set_up_where_trained(index, origin, [site.node, *(n for n, _ in site.through)]):
            return False
        # A cast after the loop that steps (an export, an eval) is not what was trained; the
        # last site that ties the switch to the model is where the gradients are unscaled.
        used = site.through[-1][0] if site.through else site.node
        return index.enclosing_function(used) is not index.enclosing_function(
            origin
        ) or analysis.paths.may_precede(origin, used)


def _deepspeed_argument(index: ModuleIndex, node: cst.CSTNode) -> cst.BaseExpression | None:
    """What ``TrainingArguments(..., deepspeed=...)`` is given, where ``node`` is an argument of
    that call and the value may name a DeepSpeed config: the Trainer then builds no GradScaler.
    A flag with no default (CodeT5+'s ``deepspeed=args.deepspeed``) leaves the runs without it
    to the GradScaler (`Fp16SiteSearch.unset_flag`)."""
    call = index.parent.get(node)
    if not isinstance(call, cst.Call) or dotted_name(call.func) is None:
        return None
    if last_part(dotted_name(call.func) or "") not in TRAINING_ARGUMENTS:
        return None
    deepspeed = keyword(call, "deepspeed")
    if deepspeed is None or (
        isinstance(deepspeed.value, cst.Name) and deepspeed.value.value == "None"
    ):
        return None
    return deepspeed.value


def _set_up_where_trained(
    index: ModuleIndex, origin: cst.CSTNode, sites: list[cst.CSTNode]
) -> bool:
    """The cast runs as part of the training's setup: at module level, in a function that also
    holds the scaler, optimizer or step, in ``__init__``-like setup, or in a builder that
    returns what it made (an eval or export method that casts in place is none of these)."""
    function = index.enclosing_function(origin)
    if function is None or function.name.value in _SETUP_FUNCTIONS:
        return True
    if any(index.enclosing_function(site) is function for site in sites):
        return True
    # A `main()` that loads the model and hands it to the function that trains it.
    trainers = {f.name.value for site in sites if (f := index.enclosing_function(site))}
    if any(
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name | cst.Attribute)
        and last_part(dotted_name(node.func) or "") in trainers
        for node in descendants(function)
    ):
        return True
    return any(
        isinstance(node, cst.Return)
        and node.value is not None
        and index.enclosing_function(node) is function
        for node in descendants(function)
    )


#: How to keep the trained parameters fp32, by how the model became fp16.
_FIX = {
    "cast": "drop the cast and let autocast run the forward in fp16",
    "loaded": "load it in fp32 and let autocast run the forward in fp16 (or train fp32 "
    "LoRA adapters over the fp16 base)",
}


def _message(
    context: ModuleContext, site: Fp16Site, off: tuple[Fact, ...], unset: str | None
) -> str:
    origin = site.origin
    line = context.position(site.node).start.line
    model = f"`{site.model}`" if site.model != "the model" else "the model"
    # A flag that picks the cast dtype says which runs more plainly than the scaler's switch.
    condition = origin.when or site.when
    # The runs without adapters or quantization (`Fp32Trainables.switched_off`).
    for fact in off:
        without = f"`{fact.subject}` is false"
        condition = f"{condition} and {without}" if condition else f"when {without}"
    if unset is not None:  # the runs without a DeepSpeed config
        without = f"`{unset}` is not given"
        condition = f"{condition} and {without}" if condition else f"when {without}"
    when = f"{condition}, " if condition is not None else ""
    scaler = (
        "a GradScaler" if site.what.startswith("GradScaler") else f"the GradScaler of {site.what}"
    )
    # A GradScaler of a function of another module is placed at the call here.
    at = f"called at line {line}" if site.node in context.foreign else f"line {line}"
    return (
        f"{when}{model} is {origin.description} here and {scaler} ({at}) unscales its "
        "gradients: they are fp16, so the first `unscale_` raises `ValueError: Attempting to "
        f"unscale FP16 gradients`; {_FIX[origin.kind]}"
    )
