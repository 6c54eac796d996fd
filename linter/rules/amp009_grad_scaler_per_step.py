"""AMP009 grad-scaler-per-step."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.steps import PerStepAnalysis, PerStepScaler, ScalerLifetimes
from linter.model.syntax import module_index
from linter.model.values import scaler_receivers


class GradScalerPerStep(Rule):
    """A GradScaler created anew on every training step.

    ## What it does
    Flags a `GradScaler(...)` constructor — `torch.amp.GradScaler`, `torch.GradScaler`,
    `torch.cuda.amp.GradScaler`, `ShardedGradScaler` or ampscale's `GradScaler`, under any import
    alias — that runs on every training step and whose scaler serves that one step: it is created
    in the body of the batch loop, in a function this file calls from that loop
    (`train_step(batch)`), in a framework hook that runs every step (Lightning `training_step`,
    Hugging Face `on_step_end`, detectron2 `run_step`...), in an optimizer wrapper's `step()`
    or in a function that steps it once per call itself (a `backward_clip_step()` that builds a
    scaler and steps it: one training step, whoever calls it), and it is used (`scale`,
    `unscale_`, `step`, `update`) in the same iteration. A factory
    (`def make_scaler(): return GradScaler()`) counts where it is called.

    Not reported:

    - a scaler created once: in `__init__`, `setup`/`configure_optimizers`, at module level, in
      a `train()` function that holds the loop itself;
    - created lazily (`if self.scaler is None: self.scaler = GradScaler()`,
      `self.scaler = self.scaler or GradScaler()`, an early `return self._scaler`);
    - created with `enabled=False`;
    - created once per fold, run, trial or epoch: in a loop whose nested loop `update()`s it
      (the steps happen in that inner loop), in a loop over configurations
      (`for fold in range(k)`, `for dtype in (torch.float16, torch.bfloat16)`), or in a
      per-epoch function such as `train_one_epoch()`;
    - a scaler whose use the file does not show (handed to another module's trainer).

    A scaler re-created **once per epoch** is deliberately out of scope: it throws away the
    learned scale once per epoch, and the new one re-learns it within a handful of skipped
    steps (one halving per overflow) — a small, bounded cost, unlike a per-step scaler that never
    adapts at all. Measured with torch's own GradScaler on CPU over fp16-overflowing gradients
    (`benchmarks/scaler_rebuild_per_epoch.py`, 10 epochs, a fitting scale near `2**7`): the
    rebuilt scaler skips about 9 more steps per epoch than one kept for the run —
    log2(65536 / fitting scale) — whatever the epoch's length: 4.5% of the steps at 200 steps
    per epoch, 0.9% at 1,000, 0.2% at 5,000. Loops over folds or runs, where a fresh scaler is
    right, cannot be told apart from epoch loops reliably enough to report that milder case
    without false alarms. A loop that
    is named for epochs but whose every iteration is one step (full-batch training,
    `for epoch in range(n): ... scaler.update()` with no inner loop) is a step loop, and is
    reported.

    ## Why is this bad?
    A GradScaler is state that must live across steps: the current scale and the count of clean
    steps since the last overflow. `update()` halves the scale after an overflow and doubles it
    after `growth_interval` clean steps — changes that only matter if the same scaler runs the
    next step. A scaler created every step starts every step from `init_scale` (65536 by
    default) with no history, so the scale never adapts. Where 65536 overflows the gradients —
    common — every step finds inf gradients and `step()` skips the optimizer: the model silently
    never trains. Where it does not, small gradients that need a larger scale underflow. Each
    new scaler also allocates its scale tensors on the device again (and `torch.cuda.amp`'s
    prints a deprecation warning every step).

    ## Example
    ```python
    for x, y in loader:
        scaler = torch.amp.GradScaler("cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Use instead
    Create the scaler once, before the loop (or in `__init__`/`setup`), and save it in
    checkpoints with `scaler.state_dict()`:
    ```python
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Suppression
    Add `# noqa: AMP009` to the reported line when a fresh scaler per step is intended (e.g. a
    test of the first step).

    ## References
    - torch's `GradScaler` docstring: "Creates a GradScaler once at the beginning of training"
      ([torch/amp/grad_scaler.py](https://github.com/pytorch/pytorch/blob/main/torch/amp/grad_scaler.py)),
      whose `update()` backs off and grows the scale from one step to the next
    - PyTorch's AMP examples, where the scaler is built before the epoch loop and saved in
      checkpoints: [Automatic Mixed Precision examples](https://docs.pytorch.org/docs/stable/notes/amp_examples.html)
    - `examples/grad_scaler_per_step.py` in this repository: with a per-step scaler whose initial
      scale overflows fp16, no step is ever taken; the same loop with one scaler trains
    """

    code = "AMP009"
    name = "grad-scaler-per-step"
    summary = "a GradScaler is created every training step, so its scale restarts and never adapts"
    # Every constructor spelling (aliases included, which import the name) says `GradScaler`.
    triggers = ("GradScaler",)
    valid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.scaler = torch.amp.GradScaler("cuda")

    def train_step(self, batch):
        self.scaler.scale(self.model(batch).loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
"""
        ),
        Example(
            """\
import torch

for fold in range(5):
    model, optimizer = build(fold)
    scaler = torch.amp.GradScaler("cuda")  # one per run: the steps are in the inner loop
    for x, y in loaders[fold]:
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.step(optimizer)
        scaler.update()
"""
        ),
        Example(
            """\
from torch.amp import GradScaler


class LitModel(L.LightningModule):
    def training_step(self, batch, batch_idx):
        if self.scaler is None:  # created lazily, on the first step only
            self.scaler = GradScaler("cuda")
        self.scaler.scale(self.loss(batch)).backward()
"""
        ),
        Example(
            """\
import torch

for step, batch in enumerate(loader):
    scaler = torch.amp.GradScaler("cuda", enabled=False)  # disabled: a no-op object
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch


def train(model, loader, optimizer):
    scaler = torch.amp.GradScaler("cuda")  # beside the loop, not inside it
    for batch in loader:
        scaler.scale(model(batch).loss).backward()
        scaler.step(optimizer)
        scaler.update()


for seed in (0, 1, 2):
    train(make_model(seed), loader, optimizer)
"""
        ),
    )
    invalid = (
        Example(
            """\
import torch

for x, y in loader:
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
            (4,),
        ),
        Example(
            """\
from torch.cuda.amp import GradScaler as Scaler


def train_step(model, batch, optimizer):
    scaler = Scaler()
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()


for batch in loader:
    train_step(model, batch, optimizer)
""",
            (5,),
        ),
        Example(
            """\
import lightning as L
import torch


class LitModel(L.LightningModule):
    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        scaler = torch.amp.GradScaler("cuda")
        scaler.scale(self.loss(batch)).backward()
        scaler.step(opt)
        scaler.update()
""",
            (8,),
        ),
        Example(
            """\
import torch


class AmpOptimizer(torch.optim.Optimizer):
    def step(self, closure=None):
        self.scaler = torch.amp.GradScaler("cuda")
        self.scaler.unscale_(self.inner)
        self.scaler.step(self.inner)
        self.scaler.update()
""",
            (6,),
        ),
        Example(
            """\
import torch


def make_scaler():
    return torch.amp.GradScaler("cuda", init_scale=2.0**12)


for step, batch in enumerate(loader):
    scaler = make_scaler()
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
            (9,),
        ),
        Example(
            """\
import torch

for epoch in range(num_epochs):  # full-batch: every epoch is one step
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    with torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
        loss = loss_fn(model(features), labels)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
            (4,),
        ),
    )

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        index = module_index(context)
        receivers = scaler_receivers(index)
        if not any(receivers.is_constructor_call(call) for call in index.nodes(cst.Call)):
            return
        analysis = PerStepAnalysis(context, index, receivers.is_scaler_method_call)
        lifetimes = ScalerLifetimes(context, index, receivers, analysis)
        for found in lifetimes.per_step():
            yield Finding(found.node, _message(context, found), related=_related(found))


def _message(context: ModuleContext, found: PerStepScaler) -> str:
    code = context.module.code_for_node(found.node)
    if len(code) > 60:
        code = code[:57] + "..."
    what = (
        f"`{code}` creates a new GradScaler"
        if found.node is found.constructor
        else f"`{code}` returns a new GradScaler (line "
        f"{context.position(found.constructor).start.line})"
    )
    return (
        f"{what} every training step ({found.why}): each step restarts from the initial scale "
        "with no growth or backoff history, so the scale never adapts (and if it overflows, "
        "every step is skipped); create the scaler once, before the loop or in "
        "`__init__`/`setup`, and reuse it"
    )


def _related(found: PerStepScaler) -> tuple[tuple[cst.CSTNode, str], ...]:
    related: list[tuple[cst.CSTNode, str]] = [(found.use, "the new scaler is used for this step")]
    if found.node is not found.constructor:
        related.append((found.constructor, "the GradScaler constructor"))
    return tuple(related)
