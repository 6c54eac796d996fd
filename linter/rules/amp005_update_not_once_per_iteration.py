"""AMP005 update-not-once-per-iteration."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import libcst as cst

from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model._dotted_names import dotted_name
from linter.model._iteration import Event, Iteration, Kind, TrainingIterations, of_module
from linter.model._module_index import ModuleIndex, module_index, walk
from linter.model._per_step import exits
from linter.model._scaler_identity import is_disabled, same_scaler

#: Text a file with a finding almost always holds (see `UpdateNotOncePerIteration.wants`).
_SCALER_STEP_OR_UPDATE = re.compile(r"caler\s*\.\s*(?:step|update)\s*\(")


def _names_in(node: cst.CSTNode) -> set[str]:
    """Variables ``node`` reads (``opts`` and ``k`` in ``opts[k].step``, not ``step``)."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.add(current.value)
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)
        else:
            stack.extend(current.children)
    return found


def _arm_exits(arm: cst.CSTNode) -> bool:
    """An ``if`` arm (body or ``else``, not an ``elif``) that ends the iteration early."""
    suite = arm.body if isinstance(arm, cst.Else) else arm
    return isinstance(suite, cst.BaseSuite) and exits(suite)


def _has_modulo(node: cst.CSTNode) -> bool:
    """``(i + 1) % accum == 0``: a gradient-accumulation guard, true on many passes."""
    return any(
        isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
        for n in walk(node)
    )


def _skips_elements(node: cst.CSTNode) -> bool:
    """A ``continue`` of this loop in ``node`` (not of a nested loop)."""
    if isinstance(node, cst.Continue):
        return True
    if isinstance(node, cst.For | cst.While | cst.FunctionDef | cst.Lambda | cst.ClassDef):
        return False
    return any(_skips_elements(child) for child in node.children)


class _Query:
    """The questions AMP005 asks of one module's iterations."""

    def __init__(self, model: TrainingIterations, index: ModuleIndex) -> None:
        self.model = model
        self.index = index

    def inside(self, node: cst.CSTNode, scope: cst.CSTNode) -> bool:
        return scope is self.index.module or scope in set(self.index.ancestors(node))

    def loops_between(self, node: cst.CSTNode, scope: cst.CSTNode) -> list[cst.For]:
        """``for`` loops around ``node`` inside the iteration ``scope`` (loops over a collection,
        since a loop over steps would be an iteration of its own)."""
        loops = []
        for ancestor in self.index.ancestors(node):
            if ancestor is scope or isinstance(ancestor, cst.FunctionDef | cst.Lambda):
                break
            if isinstance(ancestor, cst.For):
                loops.append(ancestor)
        return loops

    def once_per_loop(self, event: Event, loop: cst.CSTNode) -> bool:
        """``event`` runs on one pass of ``loop`` only: under ``if micro == accum - 1:`` or
        ``if is_last_batch:`` (an equality with the loop's variable, or a name saying last)."""
        targets = _names_in(loop.target) if isinstance(loop, cst.For) else set()
        for ancestor in self.index.ancestors(event.site):
            if ancestor is loop:
                return False
            if not isinstance(ancestor, cst.If):
                continue
            names = _names_in(ancestor.test)
            if any("last" in name.lower() or "final" in name.lower() for name in names):
                return True
            equality = any(
                isinstance(node, cst.Comparison)
                and any(isinstance(c.operator, cst.Equal) for c in node.comparisons)
                and not _has_modulo(node)
                for node in walk(ancestor.test)
            )
            if equality and names & targets:
                return True
        return False

    def guarded_within(self, event: Event, loop: cst.For) -> bool:
        """The update may run for only some elements of ``loop``: an ``if`` around it in the
        loop (``if i == len(optimizers) - 1:``) or in the method that brings it (``if
        optimizer_idx + 1 == num_optimizers:``), or a ``continue`` that skips elements (``if
        iopt != optim_idx: continue``)."""
        if event.via is not None and any(
            isinstance(ancestor, cst.If)
            for ancestor in self.index.ancestors(event.call)
            if self.index.enclosing_function(ancestor) is self.index.enclosing_function(event.call)
        ):
            return True
        for ancestor in self.index.ancestors(event.site):
            if ancestor is loop:
                break
            if isinstance(ancestor, cst.If):
                return True
        return _skips_elements(loop.body)

    def rebinds(self, loop: cst.For, name: str | None) -> bool:
        """``loop`` assigns ``name`` afresh on each pass (``for case in cases: scaler =
        GradScaler()``): one scaler per element, each updated once."""
        return name is not None and any(
            dotted_name(target.target) == name
            for assign in self.index.nodes(cst.Assign)
            if self.inside(assign, loop)
            for target in assign.targets
        )

    def leaves_before(self, first: Event, second: Event) -> bool:
        """``first`` sits in an ``if`` arm that ends with ``continue``/``break``/``return``/
        ``raise`` and does not hold ``second``: after ``first`` the iteration is over."""
        around = set(self.index.ancestors(second.site))
        return any(
            statement not in around and _arm_exits(arm)
            for statement, arm in self.model.facts.arms(first.site)
        )


def _own(iteration: Iteration, event: Event) -> Event:
    """``event`` as ``iteration`` holds it (with the call that brought it, if any)."""
    return next(e for e in iteration.events if e.call is event.call)


def _missing_updates(query: _Query) -> Iterator[Finding]:
    model, index = query.model, query.index
    updates = model.events_where(lambda e: e.kind is Kind.UPDATE)
    for step in model.events_where(lambda e: e.kind is Kind.SCALER_STEP):
        if is_disabled(index, step.scaler):
            continue
        holding = model.holding(step.call)
        if any(
            same_scaler(update.scaler, step.scaler)
            and not iteration.exclusive(_own(iteration, step), update)
            for iteration in holding
            for update in iteration.of(Kind.UPDATE)
        ):
            continue
        loops = [it for it in holding if not isinstance(it.scope, cst.FunctionDef | cst.Lambda)]
        # A loop that indexes optimizers by its target (``for k in names: scaler.step(opts[k])``)
        # runs once per optimizer, not once per step.
        loops = [
            it
            for it in loops
            if not (
                isinstance(it.scope, cst.For) and _names_in(it.scope.target) & _names_in(step.call)
            )
            and not query.once_per_loop(_own(it, step), it.scope)
        ]
        if not loops:
            continue  # a hook or step function called from elsewhere: its caller may update
        mine = [u for u in updates if same_scaler(u.scaler, step.scaler)]
        text = step.scaler or "scaler"
        if not mine:
            # Never updated in this file: certain only for a scaler the file builds (or
            # annotates) as a GradScaler. A scaler passed in may be a wrapper whose ``step()``
            # updates too.
            receiver = cst.ensure_type(step.call.func, cst.Attribute).value
            if not model.receivers.proves(receiver):
                continue
            yield Finding(
                step.call,
                f"`{text}.step()` without `{text}.update()` in the training loop: the scale "
                "never adapts, and the next step raises 'step() has already been called since "
                "the last update()'",
            )
            continue
        # An update written beside the loop in the same function, outside it: it runs once per
        # loop (per epoch), not once per step. An update elsewhere (another method, a hook this
        # module never calls from the loop) may run every step: not known, not reported.
        for iteration in loops:
            outside = [
                update
                for update in mine
                if index.enclosing_function(update.call)
                is index.enclosing_function(iteration.scope)
                and not query.inside(update.call, iteration.scope)
            ]
            if outside:
                yield Finding(
                    step.call,
                    f"`{text}.step()` runs every iteration but `{text}.update()` runs outside the "
                    "loop: the second step raises 'step() has already been called since the "
                    "last update()'; update once per iteration, after the step",
                    related=((outside[0].call, "the only update, outside the loop"),),
                )
                break


def _repeated_updates(query: _Query) -> Iterator[Finding]:
    model, index = query.model, query.index
    for iteration in model.iterations:
        updates = iteration.of(Kind.UPDATE)
        steps = iteration.of(Kind.SCALER_STEP)
        for position, later in enumerate(updates):
            if is_disabled(index, later.scaler):
                continue
            for loop in query.loops_between(later.site, iteration.scope):
                targets = _names_in(loop.target)
                if (
                    not targets & _names_in(later.call.func)  # not ``for scaler in scalers``
                    and not query.rebinds(loop, later.scaler)
                    and not query.guarded_within(later, loop)
                    and any(query.inside(step.site, loop) for step in steps)
                ):
                    yield Finding(
                        later.site,
                        f"`{later.scaler}.update()` inside the loop over optimizers runs once per "
                        "optimizer; call it once, after every optimizer of the iteration has "
                        "stepped",
                    )
                    break
            else:
                earlier = next(
                    (
                        first
                        for first in updates[:position]
                        # Two updates one call brings: the callee's own iteration reports them.
                        if (first.via is None or first.via is not later.via)
                        and same_scaler(first.scaler, later.scaler)
                        and iteration.may_precede(first, later)
                        and not iteration.exclusive(first, later)
                        and not query.leaves_before(first, later)
                        and iteration.between(first, later, Kind.SCALER_STEP)
                    ),
                    None,
                )
                if earlier is not None:
                    yield Finding(
                        later.site,
                        f"`{later.scaler}.update()` runs a second time in one iteration: update "
                        "once, after every optimizer of the iteration has stepped",
                        related=((earlier.site, "first update in the same iteration"),),
                    )


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
    ends the iteration (`continue`), and a scaler built with `enabled=False`.

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
        query = _Query(model, module_index(context))
        seen: set[cst.CSTNode] = set()
        for finding in (*_missing_updates(query), *_repeated_updates(query)):
            if finding.node not in seen:
                seen.add(finding.node)
                yield finding
