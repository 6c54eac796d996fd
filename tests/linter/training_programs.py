"""Hypothesis strategies for training-loop-shaped programs: the code the real rules look at.

hypothesmith's programs never mention a scaler or a bf16 checkpoint, so they stop at every rule's
pre-filter. These are assembled from the pieces real training scripts are made of — imports,
model loads and casts, scalers (bound, aliased, owned by a wrapper), fp16 switches, loops, hooks,
helpers called from a loop, periodic and accumulation guards, early exits — nested at random, so
the rules' analyses (per-step context, guards, pairing of fp16 sites with bf16 origins) run on
shapes no hand-written fixture has.

Each program also holds checkpoints (saves and resumes, with and without the GradScaler's state,
exports, framework-owned saves) and LR schedulers (stepped per step, per epoch, held back by a
skip check, wrapped so they skip themselves), and says from its own construction which findings
of AMP011 and AMP015 it must get (`TrainingProgram.expected`): the property tests compare.
"""

from __future__ import annotations

from checkpoints_and_schedulers import TrainingProgram, checkpoints_and_schedulers
from hypothesis import strategies as st

IMPORTS = (
    "import torch",
    "import torch.nn as nn",
    "from torch.amp import GradScaler",
    "from torch.cuda.amp import GradScaler as CudaScaler, autocast",
    "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments",
    "from accelerate import Accelerator",
    "import lightning as L",
)
#: Imports of the deprecated AMP namespaces (one is always drawn, so AMP004 parses the program).
DEPRECATED_AMP_IMPORTS = (
    "from torch.cuda.amp import GradScaler as CudaScaler, autocast",
    "import torch.cuda.amp as cuda_amp",
    "from torch.cuda import amp",
    "from torch.cpu.amp import autocast as cpu_autocast",
    "from torch.cuda.amp import custom_fwd, custom_bwd",
)
MODELS = (
    'model = AutoModelForCausalLM.from_pretrained("google/gemma-2-2b", torch_dtype=torch.bfloat16)',
    'model = AutoModelForCausalLM.from_pretrained("t5-base", dtype="bfloat16")',
    'model = AutoModelForCausalLM.from_pretrained("gpt2")',
    "model = Net().to(torch.bfloat16)",
    "model = Net().bfloat16()",
    "model = Net().cuda()",
    "dtype = torch.bfloat16 if args.bf16 else torch.float16",
    "model = Net().to(dtype)",
    "model.half()",
)
#: Models whose own parameters are fp16, and the optimizers that train them (AMP008).
FP16_MODELS = (
    "model = Net().cuda().half()",
    "model = model.half()",
    "model.to(torch.float16)",
    'model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.float16)',
    "model = Net().to(dtype=torch.half)",
    "model.requires_grad_(False)",
    "model.float()",
)
#: Engines that manage precision themselves (AMP014; one is always drawn). Accelerate's and
#: Lightning's fp16 engines are among `SCALERS`; these spell no fp16, so AMP010 stays reachable.
ENGINES = (
    "engine, optimizer, _, _ = deepspeed.initialize(model=model, config="
    '{"train_batch_size": 8, "bf16": {"enabled": True}})',
    "engine = deepspeed.initialize(model=model, config=ds_config)[0]",
    'engine, *_ = deepspeed.initialize(model=model, config="ds_config.json")',
    'fabric = L.Fabric(precision="bf16-mixed")',
)
OPTIMIZERS = (
    "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)",
    "optimizer = torch.optim.SGD([{'params': model.parameters()}], lr=0.1)",
    "optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()))",
    "optimizer = torch.optim.SGD([p.float() for p in model.parameters()], lr=0.1)",
)
SCALERS = (
    'scaler = torch.amp.GradScaler("cuda")',
    "scaler = GradScaler()",
    "scaler = CudaScaler(enabled=args.fp16)",
    'accelerator = Accelerator(mixed_precision="fp16")',
    "scaler = accelerator.scaler",
    'scaler = torch.amp.GradScaler("cuda", enabled=args.amp)',
    "self.grad_scaler = torch.cuda.amp.GradScaler()",
    'args = TrainingArguments("out", fp16=True)',
    "trainer = Trainer(model=model, args=args)",
    "trainer.train()",
    'trainer = L.Trainer(precision="16-mixed")',
)
#: Autocast contexts (one is always drawn, so AMP010 parses the program): bf16, the CPU's bf16
#: default, fp16, and a dtype chosen at run time.
AUTOCASTS = (
    'ctx = torch.autocast("cuda", dtype=torch.bfloat16)',
    'ctx = torch.autocast("cpu")',
    "ctx = torch.amp.autocast(device_type, dtype=AMP_DTYPE)",
    'ctx = torch.autocast("cuda", dtype=torch.float16)',
    'ctx = torch.autocast("cuda", dtype=amp_dtype)',
)
#: One-line statements of a training step (the ``scaler`` may be any receiver above).
STEP = (
    "loss = model(batch).loss",
    "loss = criterion(model(x), y)",
    "scaler.scale(loss).backward()",
    "loss.backward()",
    "(loss / accum_steps).backward(retain_graph=True)",
    "torch.autograd.backward(loss)",
    "scaler.scale(loss)",
    "scaler.unscale_(optimizer)",
    "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
    "norm = torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)",
    "accelerator.clip_grad_norm_(model.parameters(), 1.0)",
    "scaler.step(optimizer)",
    "scaler.update()",
    "optimizer.step()",
    "optimizer.zero_grad()",
    "log(model.fc.weight.grad.norm())",
    "print(scaler.get_scale())",
    "scale = scaler.get_scale()",
    "log({'scale': self.grad_scaler.get_scale()})",
    "value = scaler._scale.item()",
    "value = float(scaler._scale)",
    'value = scaler.state_dict()["scale"]',
    "value = accelerator.scaler.get_scale()",
    "model = model.half()",
    "step += 1",
    'scaler = torch.amp.GradScaler("cuda")',
    "scaler = GradScaler(enabled=False)",
    "ctx = torch.cuda.amp.autocast(enabled=args.fp16)",
    "ctx = cuda_amp.autocast(False, torch.bfloat16)",
    "ctx = cpu_autocast()",
    "step_fn = custom_fwd(step_fn, cast_inputs=torch.float32)",
    "pass",
)
#: Statements that end a block early (only valid in some places; see `block`).
EXITS = ("continue", "break", "return", "raise StopIteration")
#: Headers of nested blocks; ``{}`` is replaced by the loop variable.
GUARDS = (
    "if step % log_every == 0:",
    "if (i + 1) % accum_steps == 0:",
    "if args.verbose:",
    "if not is_logging_step:",
    "if scaler.is_enabled():",
    "if scaler is not None:",
    "with torch.autocast('cuda', dtype=torch.float16):",
    "with torch.autocast('cuda', dtype=torch.bfloat16):",
    "with autocast():",
    "try:",
)
LOOPS = (
    "for step, batch in enumerate(loader):",
    "for i in range(num_steps):",
    "for s in scalers:",
    "while True:",
    "for epoch in range(epochs):",
)
HOOKS = (
    "def training_step(self, batch, batch_idx):",
    "def on_train_batch_end(self, outputs, batch, batch_idx):",
    "def on_step_end(self, args, state, control, **kwargs):",
    "def on_before_optimizer_step(self, optimizer):",
    "def step(self, closure=None):",
    "def log_scale(self):",
)


#: Suppressions the scale read carries (used, stale or unknown codes, with other tools' codes
#: and text), so AMP100 has noqa comments to judge. Picked by the read drawn, not drawn
#: themselves: an extra draw would change every program the other rules' searches find.
AMP_NOQA_COMMENTS = (
    "  # noqa: AMP001",
    "  # noqa: AMP099, F401",
    "  # type: ignore  # noqa: AMP009 -- known",
    "  # noqa: AMP001, AMP099",
    "  # noqa: F841, AMP004",
)


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


@st.composite
def block(draw: st.DrawFn, depth: int, in_loop: bool, in_function: bool) -> list[str]:
    """A non-empty list of statement lines, nesting guards and loops up to ``depth``."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("step", "step", "guard", "loop", "exit")))
        if kind == "guard" and depth > 0:
            header = draw(st.sampled_from(GUARDS))
            lines += [header, *_indent(draw(block(depth - 1, in_loop, in_function)))]
            if header == "try:":
                lines += ["except RuntimeError:", "    pass"]
            elif header.startswith("if") and draw(st.booleans()):
                lines += ["else:", *_indent(draw(block(depth - 1, in_loop, in_function)))]
        elif kind == "loop" and depth > 0:
            lines += [
                draw(st.sampled_from(LOOPS)),
                *_indent(draw(block(depth - 1, True, in_function))),
            ]
        elif kind == "exit":
            allowed = [
                e
                for e in EXITS
                if (e in ("continue", "break") and in_loop)
                or (e == "return" and in_function)
                or e.startswith("raise")
            ]
            lines.append(draw(st.sampled_from(allowed)))
        else:
            lines.append(draw(st.sampled_from(STEP)))
    return lines


#: Each program has one of each, so that every rule's pre-filter lets it through.
BF16_ORIGINS = tuple(line for line in MODELS if "bfloat16" in line and "dtype =" not in line)
FP16_SWITCHES = tuple(line for line in SCALERS if "Scaler" in line or "fp16" in line)
#: Switches whose text AMP008's pre-filter looks for (a GradScaler, fp16=, mixed_precision).
LOSS_SCALERS = tuple(
    line for line in SCALERS if any(word in line for word in ("GradScaler", "fp16=", "precision"))
)
#: Constructors of a GradScaler (one is always drawn, so AMP009/AMP010 parse the program).
SCALER_CONSTRUCTIONS = tuple(line for line in SCALERS if "GradScaler(" in line)
SCALE_READS = tuple(
    line for line in STEP if any(read in line for read in ("get_scale", "._scale", '"scale"'))
)
#: Gradient clips (one is always drawn, with a ``scaler.step``, so AMP003 parses the program).
CLIPS = tuple(line for line in STEP if "clip_grad" in line)
#: A function no loop calls, so AMP012's and AMP013's pre-filters pass on every program without
#: changing what the loops do (their findings come from the steps drawn from `STEP`).
GRADIENT_REPORT = (
    "def report_gradients(other_scaler, opt):",
    "    other_scaler.unscale_(opt)",
    "    writer.add_histogram('grad', model.fc.weight.grad, step)",
)


def _with_noqa(read: str) -> str:
    return read + AMP_NOQA_COMMENTS[SCALE_READS.index(read) % len(AMP_NOQA_COMMENTS)]


@st.composite
def training_program(draw: st.DrawFn) -> TrainingProgram:
    """A module: imports, setup, then loops, helpers called from loops, and framework hooks.

    It always holds a bf16 origin, an fp16 model and an optimizer, an engine that manages
    precision, an fp16 switch that brings a GradScaler, an autocast, a GradScaler constructor, a
    backward, a read of the scale, a gradient clip, a ``scaler.step``, an import of a deprecated
    AMP namespace (somewhere among the rest), a noqa comment naming an amp-lint code, and a
    gradient report no loop calls, so that the real rules parse and analyse it; then
    checkpoints and LR schedulers, whose AMP011 and AMP015 findings it predicts.
    """
    lines = list(draw(st.lists(st.sampled_from(IMPORTS), min_size=1, max_size=4, unique=True)))
    lines.append(draw(st.sampled_from(DEPRECATED_AMP_IMPORTS)))
    first_setup = len(lines)
    lines += draw(
        st.permutations(
            [
                draw(st.sampled_from(BF16_ORIGINS)),
                draw(st.sampled_from(FP16_MODELS)),
                draw(st.sampled_from(OPTIMIZERS)),
                *draw(st.lists(st.sampled_from(MODELS), max_size=2)),
            ]
        )
    )
    if draw(st.booleans()):
        lines.append("AMP_DTYPE = torch.bfloat16")
    lines += [
        draw(st.sampled_from(AUTOCASTS)),
        draw(st.sampled_from(SCALER_CONSTRUCTIONS)),
        draw(st.sampled_from(FP16_SWITCHES)),
        draw(st.sampled_from(LOSS_SCALERS)),
        *draw(st.lists(st.sampled_from(SCALERS), max_size=2)),
    ]
    first_loop = draw(block(2, True, False))
    # Between the loop body's own statements, never inside a nested block or before an else.
    boundaries = [
        i for i, line in enumerate(first_loop) if not line.startswith((" ", "else", "except"))
    ]
    inserts = [
        ["scaler.scale(loss).backward()", _with_noqa(draw(st.sampled_from(SCALE_READS)))],
        [draw(st.sampled_from(CLIPS))],
        ["scaler.step(optimizer)"],
    ]
    spots = [draw(st.sampled_from([*boundaries, len(first_loop)])) for _ in inserts]
    # From the last spot back, so earlier spots stay valid; at one spot, in the order above.
    for at, _order, statements in sorted(zip(spots, range(3), inserts, strict=True), reverse=True):
        first_loop[at:at] = statements
    lines += [draw(st.sampled_from(LOOPS)), *_indent(first_loop)]
    for _ in range(draw(st.integers(1, 3))):
        shape = draw(st.sampled_from(("loop", "helper", "hook")))
        if shape == "loop":
            lines += [draw(st.sampled_from(LOOPS)), *_indent(draw(block(2, True, False)))]
        elif shape == "helper":
            lines += ["def train_step(batch):", *_indent(draw(block(2, False, True)))]
            lines += [draw(st.sampled_from(LOOPS)), "    train_step(batch)"]
        else:
            hook = draw(st.sampled_from(HOOKS))
            base = draw(st.sampled_from(("L.LightningModule", "TrainerCallback", "Optimizer")))
            body = _indent(draw(block(2, False, True)))
            lines += [f"class Hooked({base}):", *_indent([hook, *body])]
    # Drawn last, so that the rest of the program is what the same draws gave without it.
    lines.insert(first_setup, draw(st.sampled_from(ENGINES)))
    # After the rest, for the same reason.
    lines += draw(checkpoints_and_schedulers())
    lines += GRADIENT_REPORT
    return TrainingProgram.from_lines(lines)
