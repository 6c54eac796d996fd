"""AMP014 precision-managed-twice."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.syntax import (
    ModuleIndex,
    PathFacts,
    dotted_name,
    import_aliases,
    module_index,
    path_facts,
    walk,
)
from linter.model.values import (
    AUTOCAST_SIGNATURES,
    DEEPSPEED_ENGINE,
    ModuleAutocasts,
    PrecisionEngine,
    beside,
    precision_engines,
    scaler_receivers,
    switched,
)

_WHAT_EACH_DOES = {
    "DeepSpeed": "casts the model, {scales}steps in its own optimizer (`engine.backward`, "
    "`engine.step`): a second scaler multiplies gradients the engine never divides back, or "
    "only adds a sync",
    "Accelerate": "builds its own GradScaler, scales the loss in `accelerator.backward()` and "
    "unscales in the prepared optimizer's `step()`, so a second scaler scales twice",
    "Lightning": "keeps its own GradScaler in the precision plugin and scales every "
    "`backward`, so a second scaler scales twice",
}


class PrecisionManagedTwice(Rule):
    """torch AMP on top of an engine that already runs mixed precision itself.

    ## What it does
    Flags torch's own AMP where a training engine in the same module manages precision:

    - a `GradScaler(...)` beside a DeepSpeed engine whose config turns on `fp16` or `bf16`
      (a dict literal passed to `deepspeed.initialize(config=...)`, or a JSON file it names,
      directly or as a `--deepspeed_config` default);
    - a `torch.autocast(...)` entered around such an engine's forward when the config does not
      turn on DeepSpeed's `torch_autocast` mode;
    - a `GradScaler(...)` beside `Accelerator(mixed_precision="fp16")` (an argument, a flag's
      default, or the shipped accelerate config files), or beside a Lightning `Trainer` /
      `Fabric` / `MixedPrecision` plugin running `"16-mixed"` (also from Lightning CLI YAML).

    The engine (and the config setting) is the related location.

    Not reported: a scaler built with `enabled=False` or switched by a setting
    (`enabled=args.fp16`, `enabled=not args.deepspeed`), torch AMP created under a branch that
    picks a precision or an engine (`if not args.deepspeed:`), in an arm exclusive with the
    engine's, or handed to the engine (`MixedPrecision("16-mixed", "cuda", scaler=...)`);
    DeepSpeed with fp16 and bf16 off or `"auto"`; an engine whose precision the module does not
    show (a config computed at run time, a path that does not resolve).

    ## Why is this bad?
    Each of these engines casts, scales and unscales by itself. A second GradScaler multiplies
    the loss again while the engine's optimizer unscales only its own factor, so the update is
    off by the second scale, or the extra scaler's `step()` never sees the engine's optimizer
    and only adds a host-device sync. With DeepSpeed's fp16/bf16 modes the parameters are
    already half precision, and since DeepSpeed 0.17.2 an autocast entered outside the engine
    without `torch_autocast` in the config stops training with `AssertionError: torch.autocast
    is enabled outside DeepSpeed, but not in the DeepSpeed config`.

    ## Example
    ```python
    ds_config = {"train_micro_batch_size_per_gpu": 8, "bf16": {"enabled": True}}
    engine, optimizer, _, _ = deepspeed.initialize(model=model, config=ds_config)
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = engine(batch)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Use instead
    Let the engine do it:
    ```python
    engine, optimizer, _, _ = deepspeed.initialize(model=model, config=ds_config)
    for batch in loader:
        loss = engine(batch)
        engine.backward(loss)
        engine.step()
    ```
    or, to keep torch's autocast with DeepSpeed, replace `bf16` in the config by
    `"torch_autocast": {"enabled": true, "dtype": "bfloat16"}`. With Accelerate or Lightning,
    drop the scaler (read `accelerator.scaler` or the plugin's `scaler` if you need the scale),
    or pass your own to `MixedPrecision(..., scaler=...)`.

    ## References
    - DeepSpeed #7529: with DeepSpeed 0.17.2 and later, a `torch.autocast` outside the engine
      stops a DPO run with the AssertionError above until `torch_autocast` is set in the config
      ([deepspeedai/DeepSpeed#7529](https://github.com/deepspeedai/DeepSpeed/issues/7529))
    - DeepSpeed PR #6993 adds the `torch_autocast` config section: parameters stay fp32, the
      engine enters autocast and applies the grad scaler itself, and `fp16`/`bf16` cannot be on
      with it ([deepspeedai/DeepSpeed#6993](https://github.com/deepspeedai/DeepSpeed/pull/6993))
    - DeepSpeed PR #7543 proposes ignoring an outer autocast instead of raising, falling back to
      the config's own precision: the outer autocast still does nothing useful
      ([deepspeedai/DeepSpeed#7543](https://github.com/deepspeedai/DeepSpeed/pull/7543))
    - Accelerate creates its GradScaler for `mixed_precision="fp16"`
      ([accelerate/accelerator.py](https://github.com/huggingface/accelerate/blob/main/src/accelerate/accelerator.py));
      Lightning's `MixedPrecision` plugin keeps one for `"16-mixed"`
      ([lightning/pytorch/plugins/precision/amp.py](https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/pytorch/plugins/precision/amp.py))
    """

    code = "AMP014"
    name = "precision-managed-twice"
    summary = "torch AMP (a GradScaler, an autocast) on top of an engine that manages precision"
    triggers = ("deepspeed", "Accelerator", "Trainer", "Fabric", "MixedPrecision", "LightningCLI")
    valid = (
        Example(
            """\
import deepspeed
import torch

ds_config = {"train_batch_size": 32, "fp16": {"enabled": False}}
engine, optimizer, _, _ = deepspeed.initialize(model=model, config=ds_config)
scaler = torch.amp.GradScaler("cuda")
"""
        ),
        Example(
            """\
import deepspeed
import torch

ds_config = {"train_batch_size": 32, "bf16": {"enabled": True}}
engine, optimizer, _, _ = deepspeed.initialize(model=model, config=ds_config)
scaler = torch.amp.GradScaler("cuda", enabled=args.fp16)
"""
        ),
        Example(
            """\
import deepspeed
import torch

if args.deepspeed:
    engine, optimizer, _, _ = deepspeed.initialize(
        model=model, config={"train_batch_size": 32, "bf16": {"enabled": True}}
    )
else:
    scaler = torch.amp.GradScaler("cuda")
"""
        ),
        Example(
            """\
import deepspeed
import torch

ds_config = {
    "train_batch_size": 32,
    "torch_autocast": {"enabled": True, "dtype": "bfloat16"},
}
engine, _, _, _ = deepspeed.initialize(model=model, config=ds_config)
for batch in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = engine(batch)
    engine.backward(loss)
    engine.step()
"""
        ),
        Example(
            """\
import torch
from lightning.pytorch import Trainer
from lightning.pytorch.plugins import MixedPrecision

plugin = MixedPrecision("16-mixed", "cuda", scaler=torch.amp.GradScaler("cuda", init_scale=1024))
trainer = Trainer(plugins=[plugin])
"""
        ),
        Example(
            """\
import deepspeed
import torch

ds_config = {"train_batch_size": 32, "bf16": {"enabled": args.bf16}}
engine, optimizer, _, _ = deepspeed.initialize(model=model, config=ds_config)
scaler = torch.amp.GradScaler("cuda")
"""
        ),
        Example(
            """\
from accelerate import Accelerator

accelerator = Accelerator(mixed_precision="fp16")
model, optimizer = accelerator.prepare(model, optimizer)
if accelerator.scaler is not None:
    print(accelerator.scaler.get_scale())
"""
        ),
    )
    invalid = (
        Example(
            """\
import deepspeed
import torch

ds_config = {"train_micro_batch_size_per_gpu": 8, "bf16": {"enabled": True}}
engine, optimizer, _, _ = deepspeed.initialize(model=model, config=ds_config)
scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    loss = engine(batch)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
            (6,),
        ),
        Example(
            """\
import deepspeed
import torch

engine, _, _, _ = deepspeed.initialize(
    model=model, config={"train_batch_size": 32, "fp16": {"enabled": True}}
)
for batch in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = engine(batch)
    engine.backward(loss)
    engine.step()
""",
            (8,),
        ),
        Example(
            """\
import torch
from accelerate import Accelerator

accelerator = Accelerator(mixed_precision="fp16")
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    loss = model(batch).loss
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
            (6,),
        ),
        Example(
            """\
import argparse

import torch
from accelerate import Accelerator

parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", default="fp16", choices=["no", "fp16", "bf16"])
args = parser.parse_args()
accelerator = Accelerator(mixed_precision=args.mixed_precision)
scaler = torch.amp.GradScaler("cuda")
""",
            (10,),
        ),
        Example(
            """\
import lightning as L
import torch


class LitModel(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.scaler = torch.amp.GradScaler("cuda")

    def training_step(self, batch, batch_idx):
        loss = self.net(batch).loss
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizers())
        self.scaler.update()


trainer = L.Trainer(precision="16-mixed", max_epochs=3)
trainer.fit(LitModel())
""",
            (9,),
        ),
        Example(
            """\
import deepspeed
import torch


class Runner:
    def __init__(self, model):
        config = dict(train_batch_size=16, bf16=dict(enabled=True))
        self.engine, self.optimizer, _, _ = deepspeed.initialize(model=model, config=config)

    def train_step(self, batch):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = self.engine(batch)
        self.engine.backward(loss)
        self.engine.step()
""",
            (11,),
        ),
        Example(
            """\
import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", precision="16-mixed")
model, optimizer = fabric.setup(model, optimizer)
scaler = torch.amp.GradScaler("cuda")
""",
            (6,),
        ),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        return ("GradScaler" in text or "autocast" in text) and super().wants(text)

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        engines = precision_engines(context)
        if not engines:
            return
        index = module_index(context)
        aliases = import_aliases(index)
        paths = path_facts(index)
        receivers = scaler_receivers(index)
        handed = {node for engine in engines for node in walk(engine.node)}
        handed_names = {dotted_name(n) for n in handed if isinstance(n, cst.Name | cst.Attribute)}
        for call in index.nodes(cst.Call):
            if not receivers.is_constructor_call(call) or call in handed:
                continue
            if _bound_name(index, call) in handed_names or switched(index, paths, call):
                continue
            for engine in engines:
                if (engine.scales or engine.framework == DEEPSPEED_ENGINE) and _together(
                    index, paths, call, engine
                ):
                    yield Finding(
                        call, _scaler_message(context, call, engine), related=_related(engine)
                    )
                    break
        deepspeed = [e for e in engines if e.framework == DEEPSPEED_ENGINE and not e.torch_autocast]
        for autocast in ModuleAutocasts(index, aliases).sites if deepspeed else ():
            entered = autocast.node
            if autocast.disabled or not isinstance(entered, cst.Call):
                continue
            if aliases.qualify(dotted_name(entered.func) or "") not in AUTOCAST_SIGNATURES:
                continue
            around = _entered_around(index, paths, entered, deepspeed)
            if around is not None and not switched(index, paths, entered):
                yield Finding(
                    entered, _autocast_message(context, entered, around), related=_related(around)
                )


def _entered_around(
    index: ModuleIndex, paths: PathFacts, call: cst.Call, engines: list[PrecisionEngine]
) -> PrecisionEngine | None:
    """The engine whose forward runs inside ``with <call>:``."""
    item = index.parent.get(call)
    statement = index.parent.get(item) if isinstance(item, cst.WithItem) else None
    if not isinstance(statement, cst.With):
        return None
    called = {
        dotted_name(node.func)
        for node in walk(statement.body)
        if isinstance(node, cst.Call) and dotted_name(node.func)
    }
    for engine in engines:
        names = set(engine.names) | {f"{name}.forward" for name in engine.names}
        if called & names and _together(index, paths, call, engine):
            return engine
    return None


def _together(
    index: ModuleIndex, paths: PathFacts, node: cst.CSTNode, engine: PrecisionEngine
) -> bool:
    """Some run builds the engine and reaches ``node`` (neither is in an arm that excludes or
    leaves before the other), and ``node`` belongs to that engine's training (`beside`)."""
    if not beside(index, node, engine):
        return False
    return paths.may_precede(engine.node, node) or paths.may_precede(node, engine.node)


def _bound_name(index: ModuleIndex, call: cst.Call) -> str | None:
    parent = index.parent.get(call)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        return dotted_name(parent.targets[0].target)
    return None


def _related(engine: PrecisionEngine) -> tuple[tuple[cst.CSTNode, str], ...]:
    return ((engine.node, f"{engine.framework} runs {engine.precision}: {engine.source}"),)


def _short(context: ModuleContext, node: cst.CSTNode) -> str:
    code = context.module.code_for_node(node)
    return code if len(code) <= 60 else code[:57] + "..."


def _scaler_message(context: ModuleContext, call: cst.Call, engine: PrecisionEngine) -> str:
    line = context.position(engine.node).start.line
    does = _WHAT_EACH_DOES[engine.framework].format(
        scales="scales the loss and " if engine.scales else "and "
    )
    return (
        f"`{_short(context, call)}` adds torch loss scaling on top of the {engine.framework} "
        f"engine of line {line}, which already runs {engine.precision} ({engine.source}) and "
        f"{does}; drop this scaler and let the engine manage precision"
    )


def _autocast_message(context: ModuleContext, call: cst.Call, engine: PrecisionEngine) -> str:
    line = context.position(engine.node).start.line
    return (
        f"`{_short(context, call)}` enters torch.autocast around the DeepSpeed engine of line "
        f"{line}, which already runs {engine.precision} ({engine.source}) without "
        "`torch_autocast` in its config: since DeepSpeed 0.17.2 the engine stops with "
        "`AssertionError: torch.autocast is enabled outside DeepSpeed, but not in the DeepSpeed "
        "config`; drop the autocast, or turn on `torch_autocast` in the config instead of "
        f"`{engine.precision}`"
    )
