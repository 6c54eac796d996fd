"""AMP007 step-bypasses-scaler."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import libcst as cst

from linter._fix import UNSAFE, NodeFix
from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.iterations import Event, Iteration, Kind, TrainingIterations, of_module
from linter.model.syntax import ModuleIndex, dotted_name, last_part, module_index
from linter.model.values import is_disabled, same_scaler


def _own(iteration: Iteration, event: Event) -> Event:
    """``event`` as ``iteration`` holds it (with the call that brought it, if any)."""
    return next(e for e in iteration.events if e.call is event.call)


def _scaled_in_its_function(index: ModuleIndex, backward: Event) -> bool:
    """A backward of a name (``scaled.backward()``) counts as scaled only where that name was
    assigned ``scaler.scale(...)`` in the same function: the model tracks names per module."""
    receiver = cst.ensure_type(backward.call.func, cst.Attribute).value
    while isinstance(receiver, cst.BinaryOperation):
        receiver = receiver.left
    if isinstance(receiver, cst.Call):
        return True
    name = dotted_name(receiver)
    function = index.enclosing_function(backward.call)
    for assign in index.nodes(cst.Assign):
        value = assign.value
        if (
            index.enclosing_function(assign) is function
            and isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "scale"
            and any(dotted_name(t.target) == name for t in assign.targets)
        ):
            return True
    return False


def _same_optimizer(first: str | None, second: str | None) -> bool:
    return first is not None and second is not None and last_part(first) == last_part(second)


class _Bypass:
    """One direct ``optimizer.step()`` and the scaled backwards whose gradients it applies."""

    def __init__(
        self, step: Event, backwards: list[Event], needs_update: bool, again: Event | None
    ) -> None:
        self.step = step
        self.backwards = backwards
        self.needs_update = needs_update
        #: A ``scaler.step`` of the same optimizer that always runs with this step.
        self.again = again


def _arms(model: TrainingIterations, event: Event) -> frozenset[cst.CSTNode]:
    """The ``if`` arms around an event (at its call, and at the call that brought it)."""
    return frozenset(arm for node in (event.call, event.site) for _, arm in model.facts.arms(node))


def _bypasses(model: TrainingIterations, index: ModuleIndex) -> Iterator[_Bypass]:
    for written in model.events_where(lambda e: e.kind is Kind.OPTIMIZER_STEP):
        if written.call.args:
            continue  # ``optimizer.step(closure)``: LBFGS-style, the scaler cannot step it
        function = index.enclosing_function(written.call)
        if function is not None and function.name.value == "step":
            continue  # an optimizer wrapper's own ``step()`` forwarding to the inner optimizer
        found: list[Event] = []
        needs_update = True
        again: Event | None = None
        for iteration in model.holding(written.call):
            step = _own(iteration, written)
            scaler_steps = iteration.of(Kind.SCALER_STEP)
            if any(iteration.exclusive(other, step) for other in scaler_steps):
                continue  # the AMP path steps through the scaler; this is the other path
            twins = [s for s in scaler_steps if _same_optimizer(s.optimizer, step.optimizer)]
            # Stepped through the scaler too: under other conditions (``if self.use_amp:`` and
            # ``if scaler is None:``) it is the other path; under the same ones it steps twice.
            together = [s for s in twins if _arms(model, s) == _arms(model, step)]
            if twins and not together:
                continue
            if together:
                again = together[0]
            plain = [
                b
                for b in iteration.of(Kind.BACKWARD)
                if iteration.may_precede(b, step) and not iteration.exclusive(b, step)
            ]
            for backward in iteration.of(Kind.SCALED_BACKWARD):
                if (
                    iteration.may_precede(backward, step)
                    and not iteration.exclusive(backward, step)
                    and not is_disabled(index, backward.scaler)
                    and _scaled_in_its_function(index, backward)
                    # The latest backward before the step is the scaled one (not the plain
                    # backward of another loss in between).
                    and not any(iteration.may_precede(backward, b) for b in plain)
                    and backward not in found
                ):
                    found.append(backward)
            if any(
                same_scaler(update.scaler, b.scaler)
                for update in iteration.of(Kind.UPDATE)
                for b in found
            ):
                needs_update = False
        if found:
            yield _Bypass(written, found, needs_update, again)


def _fix(context: ModuleContext, index: ModuleIndex, bypass: _Bypass) -> NodeFix | None:
    """``optimizer.step()`` -> ``scaler.step(optimizer)`` (and ``scaler.update()`` on the next
    line when the iteration has none), when one scaler scaled the gradients."""
    if bypass.again is not None:
        return None  # the scaler steps it already: the direct step should go, not be rewritten
    scalers = {b.scaler for b in bypass.backwards}
    if len(scalers) != 1 or None in scalers:
        return None
    (scaler,) = scalers
    call = bypass.step.call
    optimizer = context.module.code_for_node(cst.ensure_type(call.func, cst.Attribute).value)
    new_call = cst.parse_expression(f"{scaler}.step({optimizer})")
    replacements: list[tuple[cst.CSTNode, cst.CSTNode]] = [(call, new_call)]
    message = f"step through `{scaler}.step({optimizer})`"
    if bypass.needs_update:
        expression = index.parent.get(call)
        line = index.parent.get(expression) if expression is not None else None
        if not (
            isinstance(expression, cst.Expr)
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
        ):
            return None  # ``loss = opt.step()`` or ``opt.step(); x()``: no line to add after
        start = context.position(line).start
        indent = context.source.splitlines()[start.line - 1][: start.column]
        if indent.strip():
            return None
        update = cst.SimpleStatementLine([cst.Expr(cst.parse_expression(f"{scaler}.update()"))])
        # The statement's end of line becomes: the same end of line, then the update, indented
        # like the step (an indented block renders its header, then its body at ``indent``).
        block = cst.IndentedBlock(body=[update], header=line.trailing_whitespace, indent=indent)
        replacements.append((line.trailing_whitespace, block))
        message += f" and `{scaler}.update()`"
    return NodeFix(message, tuple(replacements), UNSAFE)


class StepBypassesScaler(Rule):
    """`optimizer.step()` called directly after `scaler.scale(loss).backward()`.

    ## What it does
    Flags an `optimizer.step()` in a training iteration whose gradients come from
    `scaler.scale(loss).backward()` — the latest backward that may run before the step in the
    same iteration is a scaled one — when that optimizer is not stepped through
    `scaler.step(optimizer)` in the iteration; and a direct `optimizer.step()` that always runs
    together with `scaler.step(optimizer)` of the same optimizer (it steps twice).

    Not reported: the non-AMP branch of a trainer (`if scaler is not None: scaler.step(opt)
    else: opt.step()`, `if use_amp: ... else: ...`), a step exclusive with the scaled backward, a
    scaler built with `enabled=False` (its `scale()` returns the loss unchanged), a closure step
    (`optimizer.step(closure)`), an optimizer wrapper's own `step()` method, a step after the
    plain backward of another loss, and wrappers that apply the recipe themselves (Accelerate,
    Lightning, DeepSpeed: their calls are not iteration events).

    ## Why is this bad?
    `scaler.scale(loss)` multiplies the loss — and so every gradient — by the loss scale (65536
    at the start). `scaler.step(optimizer)` divides the gradients by the scale and skips the step
    when any of them is inf or NaN; `optimizer.step()` does neither. The parameters move by
    gradients thousands of times too large, and an overflow writes inf/NaN into the weights.
    Without `scaler.step`, `scaler.update()` also fails: it finds no inf checks recorded
    ("No inf checks were recorded prior to update."). Stepping directly after
    `scaler.step(optimizer)` applies the gradients a second time, also on the steps the scaler
    skipped for inf/NaN — Applio removed exactly that
    (https://github.com/IAHispano/Applio/pull/860: "You should not use optim.step() directly when
    you're working with GradScaler"). See PyTorch's AMP examples
    (https://docs.pytorch.org/docs/stable/notes/amp_examples.html) and the state machine in
    `torch/amp/grad_scaler.py`.

    ## Example
    ```python
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        optimizer.step()
        optimizer.zero_grad()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    ```


    `amp-lint --fix --unsafe-fixes` makes this rewrite (an unsafe fix: it changes what the step
    does, which is the point): `optimizer.step()` becomes `scaler.step(optimizer)`, followed by
    `scaler.update()` on the next line, indented like the step, when the iteration has no update
    of that scaler. No fix is offered when more than one scaler scaled the gradients (which one
    should step is the author's call) or when the step is not a statement of its own
    (`result = optimizer.step()`) and an update would be needed.

    ## Options
    None.
    """

    code = "AMP007"
    name = "step-bypasses-scaler"
    summary = "optimizer.step() called directly on gradients of scaler.scale(loss).backward()"
    fix_availability = UNSAFE
    triggers = (".scale(",)
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
def train_step(batch, model, optimizer, scaler=None):
    loss = model(batch)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
"""
        ),
        Example(
            """\
class Trainer:
    def fit(self, loader):
        for batch in loader:
            loss = self.model(batch)
            if self.use_amp:
                self.scaler.scale(loss).backward()
            else:
                loss.backward()
            if self.use_amp:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda", enabled=False)
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    optimizer.step()
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    def closure():
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss
    optimizer.step(closure)
"""
        ),
        Example(
            """\
class ScaledOptimizer:
    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def step(self):
        self.optimizer.step()
"""
        ),
        Example(
            """\
for x in loader:
    scaler.scale(gan_loss(x)).backward()
    scaler.step(opt_g)
    scaler.update()
    probe_loss(x).backward()
    probe_optimizer.step()
"""
        ),
    )
    invalid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    optimizer.step()
    optimizer.zero_grad()
""",
            (8,),
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for step, batch in enumerate(loader):
    loss = model(**batch).loss / accum
    scaler.scale(loss).backward()
    if (step + 1) % accum == 0:
        optimizer.step()
        scaler.update()
        optimizer.zero_grad()
""",
            (8,),
        ),
        Example(
            """\
class Trainer:
    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def fit(self, loader):
        for batch in loader:
            self.backward(self.model(batch))
            self.optimizer.step()
""",
            (8,),
        ),
        Example(
            """\
for real in loader:
    scaler.scale(d_loss(real)).backward()
    scaler.step(opt_d)
    scaler.scale(g_loss(real)).backward()
    opt_g.step()
    scaler.update()
""",
            (5,),
        ),
        Example(
            """\
for x, y in loader:
    scaled = scaler.scale(loss_fn(model(x), y))
    scaled.backward()
    optimizer.step()
""",
            (4,),
        ),
        Example(
            """\
for batch in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss_d, loss_g = model(batch)
    scaler.scale(loss_d).backward()
    scaler.step(optim_d)
    scaler.scale(loss_g).backward()
    scaler.step(optim_g)
    scaler.update()
    optim_g.step()
    optim_d.step()
""",
            (9, 10),
        ),
        Example(
            """\
def train(model, loader, optimizer, use_amp):
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
            loss = loss_fn(model(x), y)
        if use_amp:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        optimizer.step()
""",
            (10,),
        ),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        # A finding needs a scaled backward and a step.
        return super().wants(text) and ".step(" in text

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        model = of_module(context)
        if not model.iterations:
            return
        index = module_index(context)
        for bypass in _bypasses(model, index):
            backward = bypass.backwards[0]
            optimizer = bypass.step.optimizer
            scaler = backward.scaler or "scaler"
            related = tuple((b.site, "scaled backward") for b in bypass.backwards)
            if bypass.again is not None:
                yield Finding(
                    bypass.step.call,
                    f"`{optimizer}.step()` steps again what `{scaler}.step({optimizer})` already "
                    "steps: the gradients are applied twice, and even when the scaler skipped "
                    "the step for inf/NaN; remove the direct step",
                    related=((bypass.again.site, "scaler step of the same optimizer"), *related),
                )
                continue
            yield Finding(
                bypass.step.call,
                f"`{optimizer}.step()` applies gradients of `{scaler}.scale(loss).backward()` "
                f"directly: still multiplied by the loss scale, never checked for inf/NaN; "
                f"step through `{scaler}.step({optimizer})`",
                related=related,
                fix=_fix(context, index, bypass),
            )
