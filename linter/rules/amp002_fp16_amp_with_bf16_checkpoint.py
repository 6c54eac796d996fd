"""AMP002 fp16-amp-with-bf16-checkpoint."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from linter._rule import Example, Finding, ModuleContext, Rule, RuleOption
from linter.model.settings import ON_GPUS_WITHOUT_BF16
from linter.model.values import (
    BF16_FAMILIES,
    Bf16Origin,
    Fp16Site,
    Fp16Sites,
    may_hold_a_finding,
    may_train,
    user_families,
)


class Fp16AmpWithBf16Checkpoint(Rule):
    """fp16 mixed precision applied to a model that is bf16.

    ## What it does
    Flags an fp16 mixed-precision switch — autocast with `dtype=torch.float16` (or an autocast
    with no dtype on a device other than the CPU: `torch.autocast("cuda")`,
    `torch.autocast(device_type=device.type)`, `torch.cuda.amp.autocast()`, all fp16 on CUDA),
    a `GradScaler`, `.half()`, `.to(torch.float16)`, `TrainingArguments(fp16=True)` (and TRL's
    configs), `Accelerator(mixed_precision="fp16")`, Lightning `precision="16-mixed"`, and the
    config files the project ships for them: a DeepSpeed JSON with `fp16.enabled: true` given
    to `deepspeed.initialize(model=model, config="ds_config.json")`, a `TrainingArguments` JSON
    with `"fp16": true` read by `HfArgumentParser(...).parse_json_file("args.json")` and handed
    to the Trainer (a path the linter cannot resolve, or a file it cannot read, is unknown:
    not reported) — when it
    applies to a model that is bf16: loaded as bf16
    (`from_pretrained(..., torch_dtype=torch.bfloat16)`, `dtype="bfloat16"`, or a
    `**model_kwargs` dict that says so), cast to bf16
    (`.to(torch.bfloat16)`, `.bfloat16()`), or a checkpoint of a family pretrained in bf16 and
    documented as unsafe in fp16 (the table below). Since transformers 5 loads with
    `dtype="auto"`, such a checkpoint loaded with no dtype is bf16. The checkpoint name may be
    a literal, a module constant, a function parameter's default, an argparse `default=`, a
    dataclass field default (`model_name_or_path: str = field(default=...)`) or the default of
    `os.environ.get("MODEL", ...)`.

    The model is tracked through the file: the model called under the autocast (a pipeline
    too), the model whose optimizer the GradScaler steps, `Trainer(model=...)` with those
    `args`, `accelerator.prepare(model, ...)`, the LightningModule given to `trainer.fit`, a
    function's parameter when this file (or a function of another module of the project) calls
    the function with a bf16 model, and a model a helper returns
    (`model, tok = load_model_and_tokenizer(...)`). An autocast may be bound before it is
    entered: `ctx = torch.autocast("cuda", dtype=torch.float16) if args.fp16 else
    nullcontext()` then `with ctx:` (each arm pairs only with what its condition allows), an
    `if`/`else` that binds it, `self.autocast = ...` in `__init__`,
    `amp = functools.partial(torch.autocast, ...)` entered as `with amp():`, or a context built
    in another module of the project (`from amp_utils import autocast_ctx`).

    ### One path, in order
    A bf16 origin and an fp16 site pair only when one run can reach both, the origin first:

    - different arms of one `if`/`elif`/`else` never pair
      (`if cfg.bf16: model = model.bfloat16()` / `elif cfg.fp16: model = model.half()`);
    - nor do separate `if`s whose conditions cannot hold together: one variable compared with
      two different constants (`precision == "bf16"` / `precision == "fp16"`), the `bf16` and
      `fp16` flags of one configuration object (`args.bf16` / `args.fp16` — transformers'
      `TrainingArguments` raises when both are set), flags an `assert` makes exclusive
      (`assert not (a and b)`, `assert a + b <= 1`) or an argparse mutually exclusive group
      declares, and an fp16 switch whose own value contradicts the branch of the bf16 load
      (`fp16=not torch.cuda.is_bf16_supported()` beside a load under
      `if torch.cuda.is_bf16_supported():`);
    - a cast or assignment after the fp16 site is never its origin (a bf16 copy saved after
      training is not what was trained).

    ### Certain or reachable
    An fp16 switch counts when it is on wherever the script trains on a GPU: `True`, a name
    bound once to `True`, `not bf16` where `bf16` is `False`, `torch.cuda.is_available()`, a
    command-line flag whose default turns it on. The finding is *reachable* when the script
    declares a run that turns fp16 on — a `--mixed_precision` flag whose `choices` include
    `"fp16"` feeding `Accelerator(mixed_precision=args.mixed_precision)`, or
    `fp16=not torch.cuda.is_bf16_supported()` — and its message then starts with the
    condition: "when run with --mixed_precision fp16, ...", "on a GPU without bf16 support,
    ...". An autocast whose dtype a flag picks (`dtype=ptdtype` from a `--precision` table or
    conditional, `getattr(torch, args.dtype)`) is fp16 on every run when the flag's `default`
    is fp16, and on the runs that ask for it when fp16 is one of its `choices` ("when run with
    --precision fp16, ..."). Any other runtime switch (`fp16=args.fp16` behind a `store_true` flag,
    `enabled=use_amp`) is not reported: the script may only ever run with it off.

    ### The finding
    One finding per bf16 model, at its first fp16 site, naming where the model became bf16
    (loaded as bf16, cast to bf16, or which family); the bf16 origin and any other fp16 site
    that applies to the same model are related locations (in `--format json` and SARIF).

    Not reported: a dtype chosen at runtime (`dtype = torch.bfloat16 if bf16 else torch.float16`
    used on both sides is one switch, not a mismatch), `fp16=False`, `revision="fp16"`,
    `variant="fp16"`, names in comments or docstrings, a GradScaler next to bf16 autocast
    (merely redundant), and inference-only files (no `backward()`, `fit`, `train()` or
    Trainer): there is no loss scale to collapse there.

    ### Families pretrained in bf16
    A row is in the table only with a public source; extend it for your own checkpoints with
    the `extend-bf16-families` option.

    {families}

    ## Why is this bad?
    A model pretrained in bf16 has learned weights and activations with bf16's fp32-sized range;
    many exceed fp16's largest value, 65504. Under fp16 they overflow to inf: every step finds
    inf gradients, the GradScaler halves the scale each time — below 1 and on towards 0 — and
    the loss turns to NaN. Loss scaling cannot help with values that overflow in the forward pass.

    ## Example
    ```python
    model = AutoModelForSeq2SeqLM.from_pretrained(name, torch_dtype=torch.bfloat16)
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(**batch).loss
    ```

    ## Use instead
    Train in bf16, which has fp32's exponent range and needs no loss scaling:
    ```python
    model = AutoModelForSeq2SeqLM.from_pretrained(name, torch_dtype=torch.bfloat16)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(**batch).loss
    loss.backward()
    ```

    ## Suppression
    Add `# noqa: AMP002` to the reported line if the model really is fp16-safe (e.g. you verified
    it with `scaler.check_fp16_compat`).

    ## References
    - T5's authors: all experiments used bf16 activations
      ([google-research/text-to-text-transfer-transformer#539](https://github.com/google-research/text-to-text-transfer-transformer/issues/539))
    - NaN losses of bf16-pretrained T5/mT5 under fp16 AMP, traced to activations beyond 65504
      ([Hugging Face forum](https://discuss.huggingface.co/t/mixed-precision-for-bfloat16-pretrained-models/5315/3))
    - fp16 training of FLAN-T5-XL gives NaN
      ([huggingface/transformers#23918](https://github.com/huggingface/transformers/issues/23918))
    - every family in the table above links its own sources
    """

    code = "AMP002"
    name = "fp16-amp-with-bf16-checkpoint"
    summary = "fp16 mixed precision applied to a model loaded, cast or pretrained as bf16"
    # Every bf16 origin is a `from_pretrained(...)`, spells `bfloat16`, or is a checkpoint name
    # handed to a `...Trainer(model="...")`.
    triggers = ("bfloat16", "from_pretrained", "Trainer")
    options = (
        RuleOption(
            "extend-bf16-families",
            list,
            [],
            "Checkpoint name patterns (shell-style, e.g. `my-org/llm-*`) that are bf16 like "
            "the built-in families: a load of one with no dtype, or trained in fp16, is reported.",
        ),
    )
    valid = (
        Example(
            """\
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(cfg.model)
if cfg.bf16:
    model = model.to(torch.bfloat16)
elif cfg.fp16:
    model = model.half()  # the other arm: never the same run as the bf16 cast
model(**batch).loss.backward()
"""
        ),
        Example(
            """\
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.bfloat16)
model.train()
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = model(**batch).loss
loss.backward()
"""
        ),
        Example(
            """\
import torch
from transformers import AutoModelForCausalLM

dtype = torch.bfloat16 if args.bf16 else torch.float16
model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype)
with torch.autocast("cuda", dtype=dtype):
    loss = model(**batch).loss
loss.backward()
"""
        ),
        Example(
            """\
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("google/gemma-3-1b-it", revision="main")
args = TrainingArguments("out", bf16=True, fp16=False)
Trainer(model=model, args=args, train_dataset=train_set).train()
"""
        ),
    )
    invalid = (
        Example(
            """\
import argparse
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", default="no", choices=["no", "fp16", "bf16"])
args = parser.parse_args()
accelerator = Accelerator(mixed_precision=args.mixed_precision)  # reachable: --mixed_precision fp16
model = AutoModelForCausalLM.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
model, optimizer = accelerator.prepare(model, optimizer)
accelerator.backward(model(**batch).loss)
""",
            (9,),
        ),
        Example(
            """\
import torch
from transformers import AutoModelForSeq2SeqLM

model = AutoModelForSeq2SeqLM.from_pretrained("t5-base", torch_dtype=torch.bfloat16)
scaler = torch.cuda.amp.GradScaler()
optimizer = torch.optim.AdamW(model.parameters())
for batch in loader:
    with torch.cuda.amp.autocast():
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
            (5,),
        ),
        Example(
            """\
from transformers import AutoModelForSeq2SeqLM, Seq2SeqTrainer, Seq2SeqTrainingArguments

model = AutoModelForSeq2SeqLM.from_pretrained("google/flan-t5-large")
args = Seq2SeqTrainingArguments(
    output_dir="out",
    fp16=True,
)
trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=train_set)
trainer.train()
""",
            (6,),
        ),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        # A finding needs an fp16 switch, a sign of training and a bf16 origin together: far
        # fewer files than those that merely spell `bfloat16`, and only those get parsed.
        return super().wants(text) and may_hold_a_finding(text)

    @classmethod
    def wants_with(cls, own: str, imported: str) -> bool:
        # The fp16 switches are the module's own nodes and so is the sign of training that
        # `Fp16Sites.sites` asks for first (`trains`: a `.backward(`/`.fit(`/`.train(` call or
        # a `*Trainer`); an imported function may bring the bf16 origin (a loader of another
        # module), so the rest of the test reads both texts.
        return may_train(own) and cls.wants(f"{own}\n{imported}")

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        if not may_hold_a_finding(context.filter_text):  # for callers that skip the engine
            return
        families = user_families(self.settings.get("extend-bf16-families", ()))
        analysis = Fp16Sites(context, families)
        # One finding per bf16 model: reported at its first fp16 site, the others related.
        by_origin: dict[cst.CSTNode, list[Fp16Site]] = {}
        for site in analysis.sites():
            group = by_origin.setdefault(site.origin.node, [])
            if all(site.node is not other.node for other in group):
                group.append(site)
        reported: set[cst.CSTNode] = set()
        for group in by_origin.values():
            group.sort(key=lambda site: _start(context, site.node))
            site = next((s for s in group if s.when is None), group[0])
            if site.node in reported:
                continue
            reported.add(site.node)
            origin = site.origin
            related = [(origin.node, _origin_note(origin))]
            related += [
                (other.node, f"{other.what} also applies fp16")
                for other in group
                if other is not site
            ]
            yield Finding(site.node, _message(context, site), related=tuple(related))


def _family_rows() -> str:
    """The family table for the docstring (indented like it, so ``cleandoc`` keeps it)."""
    rows = ["| family | checkpoint names matching | evidence |", "|---|---|---|"]
    for family in BF16_FAMILIES:
        links = ", ".join(f"<{url}>" for url in family.evidence)
        pattern = family.pattern.pattern.replace("|", "\\|")
        rows.append(f"| {family.name} | `{pattern}` | {links} |")
    return "\n    ".join(rows)


Fp16AmpWithBf16Checkpoint.__doc__ = (Fp16AmpWithBf16Checkpoint.__doc__ or "").replace(
    "{families}", _family_rows()
)


def _start(context: ModuleContext, node: cst.CSTNode) -> tuple[int, int]:
    start = context.position(node).start
    return start.line, start.column


def _origin_note(origin: Bf16Origin) -> str:
    return origin.description if origin.family is None else origin.description.split(",")[0]


#: Why each kind of bf16 origin breaks under fp16, for the message.
_WHY = {
    "family": "bf16-pretrained weights and activations exceed fp16's max 65504",
    "loaded": "bf16 weights and activations can exceed fp16's max 65504",
    "cast": "bf16 weights and activations can exceed fp16's max 65504",
}


def _message(context: ModuleContext, site: Fp16Site) -> str:
    origin = site.origin
    foreign = context.foreign_position(origin.node)
    line: int | str = context.position(origin.node).start.line
    if foreign is not None:
        line = f"{foreign[1]} of {foreign[0]}"
    model = f"`{site.model}`" if not site.model.startswith("the ") else site.model
    if origin.family is not None and site.checkpoint is not None:
        became = f"is a {origin.family.name} checkpoint pretrained in bfloat16 (line {line})"
    elif origin.family is not None:
        became = f"{origin.description} (line {line})"
    else:
        became = f"was {origin.description} at line {line}"
    when = f"{site.when}, " if site.when is not None else ""
    fix = _FIX_WHEN.get(site.when or "", site.fix)
    return (
        f"{when}{site.what} applies fp16 to {model}, which {became}: {_WHY[origin.kind]}, "
        f"the loss scale backs off below 1 and NaNs follow; {fix}"
    )


#: Advice that fits the runs a reachable site is on (bf16 is no option where it is missing).
_FIX_WHEN = {
    ON_GPUS_WITHOUT_BF16: "train in fp32 where bf16 is missing, not in fp16",
}
