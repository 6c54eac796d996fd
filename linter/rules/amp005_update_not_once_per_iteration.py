"""AMP005 update-not-once-per-iteration."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import libcst as cst

from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.iterations import (
    TrainingIterations,
    of_module,
    repeated_updates,
    steps_without_update,
)
from linter.model.syntax import ModuleIndex, module_index

#: Text a file with a finding almost always holds (see `UpdateNotOncePerIteration.wants`).
_SCALER_STEP_OR_UPDATE = re.compile(r"caler\s*\.\s*(?:step|update)\s*\(")


class UpdateNotOncePerIteration(Rule):
    """`scaler.update()` not called exactly once per training iteration.

    ## What it does
    Flags a `scaler.step(optimizer)` in a training loop that never calls `scaler.update()` on
    that scaler in the iteration — nowhere in the file (for a scaler the file builds as a
    GradScaler), or only outside the loop (once per epoch) — and a `scaler.update()` that runs
    more than once in one iteration: inside a loop over several optimizers, or once after each
    optimizer's step (a GAN's discriminator and generator sharing one scaler).

    An iteration is the loop body (or step function, or framework hook) that runs once per
    optimizer step, with the methods of the file it calls (see the iteration model of AMP003 and
    AMP005–AMP007). Gradient accumulation (`if (i + 1) % accum == 0:` around `step` and
    `update`) is one iteration per optimizer step, as it should be. Not reported: an update in
    another method or hook of the file that the loop does not visibly call (it may run every
    step), a step in a hook or step function whose caller is not in the file, two scalers each
    updated once, a critic's inner loop with its own step and update (an iteration of its own),
    `for scaler in scalers: scaler.update()`, exclusive branches, an update in an `if` arm that
    ends the iteration (`continue`), and a scaler built with `enabled=False`. Nor a second
    update after a step of the same optimizer as before the first (a test, or a function run
    once, that calls a one-step helper twice): stepping that optimizer again starts a second
    iteration; the helper called for two optimizers sharing the scaler is reported.

    ## Why is this bad?
    `GradScaler.update()` ends an iteration: it backs the scale off after an overflow, grows it
    after `growth_interval` clean steps, and resets every optimizer's state for the next
    iteration. Without it, the second `scaler.step(optimizer)` raises `RuntimeError: step() has
    already been called since the last update()` — the usual result of putting `update()` after
    the epoch's loop (MS-AMP fixed its MNIST example for exactly this error:
    https://github.com/Azure/MS-AMP/pull/45) — and the scale never adapts. Called after each
    of several optimizers, it counts one iteration several times: `growth_interval` counts
    updates, so the scale grows several times too fast, and one iteration can back off several
    times. PyTorch's AMP examples say: "scaler.update() should only be called once per
    iteration, after all optimizers used this iteration have been stepped"
    (https://docs.pytorch.org/docs/stable/notes/amp_examples.html#working-with-multiple-models-losses-and-optimizers);
    the state machine is in `torch/amp/grad_scaler.py` (`step()` raises when the optimizer's
    stage is already `STEPPED`; `update()` refreshes the per-optimizer states).

    ## Example
    ```python
    for epoch in range(epochs):
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            optimizer.zero_grad()
        scaler.update()
    ```

    ## Use instead
    ```python
    for epoch in range(epochs):
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    ```
    With several optimizers, step each one, then update once:
    `scaler.step(opt_d); scaler.step(opt_g); scaler.update()`.

    No fix is offered: where the update belongs (after which optimizer, inside which guard) is
    the author's decision.

    ## Options
    None.
    """

    code = "AMP005"
    name = "update-not-once-per-iteration"
    summary = "scaler.step() without scaler.update() in the iteration, or update() more than once"
    triggers = (".step(", ".update(")
    valid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for step, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y) / accum_steps
    scaler.scale(loss).backward()
    if (step + 1) % accum_steps == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(loss_d(x, y)).backward()
    scaler.scale(loss_g(x, y)).backward()
    for opt in (opt_d, opt_g):
        scaler.step(opt)
    scaler.update()
"""
        ),
        Example(
            """\
import torch

scaler_d = torch.amp.GradScaler("cuda")
scaler_g = torch.amp.GradScaler("cuda")
for x in loader:
    scaler_d.scale(d_loss(x)).backward()
    scaler_d.step(opt_d)
    scaler_d.update()
    scaler_g.scale(g_loss(x)).backward()
    scaler_g.step(opt_g)
    scaler_g.update()
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x in loader:
    for _ in range(n_critic):
        scaler.scale(critic_loss(x)).backward()
        scaler.step(opt_critic)
        scaler.update()
    scaler.scale(generator_loss(x)).backward()
    scaler.step(opt_generator)
    scaler.update()
"""
        ),
        Example(
            """\
import torch


class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")

    def train_step(self, batch):
        self.scaler.scale(self.model(batch)).backward()
        self.scaler.step(self.optimizer)

    def on_step_end(self):
        self.scaler.update()

    def fit(self, loader):
        for batch in loader:
            self.train_step(batch)
            self.call_hook("on_step_end")
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(loss_fn(x)).backward()
    scaler.unscale_(optimizer)
    if not all_finite(optimizer):
        scaler.update()
        optimizer.zero_grad()
        continue
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch

scalers = [torch.amp.GradScaler("cuda") for _ in models]
for x in loader:
    for scaler, model, opt in zip(scalers, models, optimizers):
        scaler.scale(model(x)).backward()
        scaler.step(opt)
    for scaler in scalers:
        scaler.update()
"""
        ),
    )
    invalid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for epoch in range(epochs):
    for x, y in loader:
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.step(optimizer)
        optimizer.zero_grad()
    scaler.update()
""",
            (7,),
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    optimizer.zero_grad()
""",
            (6,),
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(loss_fn(x)).backward()
    for opt in optimizers:
        scaler.step(opt)
        scaler.update()
""",
            (8,),
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for real in loader:
    scaler.scale(d_loss(real)).backward()
    scaler.step(opt_d)
    scaler.update()
    scaler.scale(g_loss(real)).backward()
    scaler.step(opt_g)
    scaler.update()
""",
            (10,),
        ),
        Example(
            """\
import torch


class GanTrainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")

    def optimizer_step(self, optimizer):
        self.scaler.step(optimizer)
        self.scaler.update()
        optimizer.zero_grad()

    def train(self, loader):
        for real in loader:
            self.scaler.scale(self.d_loss(real)).backward()
            self.optimizer_step(self.opt_d)
            self.scaler.scale(self.g_loss(real)).backward()
            self.optimizer_step(self.opt_g)
""",
            (18,),
        ),
        Example(
            """\
import torch


def train_one_epoch(model, loader, optimizer, scaler):
    for step, batch in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(**batch).loss
        scaler.scale(loss).backward()
        if (step + 1) % 4 == 0:
            scaler.step(optimizer)
            optimizer.zero_grad()
    scaler.update()
""",
            (10,),
        ),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        # A finding needs a scaler's step or update: ``scaler.step(``, ``self.grad_scaler.update(``
        # or, for a scaler under another name, a file that builds a ``GradScaler``.
        return _SCALER_STEP_OR_UPDATE.search(text) is not None or (
            "GradScaler" in text and super().wants(text)
        )

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        model = of_module(context)
        if not model.iterations:
            return
        index = module_index(context)
        seen: set[cst.CSTNode] = set()
        for finding in (*_missing(model, index), *_repeated(model, index)):
            if finding.node not in seen:
                seen.add(finding.node)
                yield finding


def _missing(model: TrainingIterations, index: ModuleIndex) -> Iterator[Finding]:
    for missing in steps_without_update(model, index):
        step, text = missing.step, missing.step.scaler or "scaler"
        if missing.outside is None:
            yield Finding(
                step.call,
                f"`{text}.step()` without `{text}.update()` in the training loop: the scale "
                "never adapts, and the next step raises 'step() has already been called since "
                "the last update()'",
            )
        else:
            yield Finding(
                step.call,
                f"`{text}.step()` runs every iteration but `{text}.update()` runs outside the "
                "loop: the second step raises 'step() has already been called since the "
                "last update()'; update once per iteration, after the step",
                related=((missing.outside.call, "the only update, outside the loop"),),
            )


def _repeated(model: TrainingIterations, index: ModuleIndex) -> Iterator[Finding]:
    for repeated in repeated_updates(model, index):
        update = repeated.update
        if repeated.earlier is None:
            yield Finding(
                update.site,
                f"`{update.scaler}.update()` inside the loop over optimizers runs once per "
                "optimizer; call it once, after every optimizer of the iteration has stepped",
            )
        else:
            yield Finding(
                update.site,
                f"`{update.scaler}.update()` runs a second time in one iteration: update "
                "once, after every optimizer of the iteration has stepped",
                related=((repeated.earlier.site, "first update in the same iteration"),),
            )
