"""How many times a scaler's ``update()`` runs per training iteration: none, or more than one.

``GradScaler.update()`` ends an iteration: once after every optimizer of the iteration has
stepped. Two facts about a module's iterations (`linter.model.iterations._iteration`) answer
whether it
does: a ``scaler.step`` in a training loop whose scaler is never updated in that loop
(`steps_without_update`), and an update that may run twice before the next iteration
(`repeated_updates`: in a loop over optimizers, or once after each of two steps of different
optimizers; the same optimizer stepped again is a second iteration).

Unknown stays unknown: a step in a hook or step function whose caller is not in the module, an
update in another method the loop does not visibly call, a scaler built ``enabled=False``, a
scaler passed in (it may be a wrapper whose ``step()`` updates too) are none of these.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import libcst as cst

from linter.model.iterations._iteration import TrainingIterations
from linter.model.iterations._iteration_events import Event, Iteration, Kind
from linter.model.steps import (
    assigned_in,
    exits,
    loops_between,
    on_one_pass_only,
    skips_passes,
    variables_read,
)
from linter.model.syntax import ModuleIndex
from linter.model.values import is_disabled, same_scaler


@dataclass(frozen=True, slots=True)
class StepWithoutUpdate:
    """A ``scaler.step(...)`` of a training loop whose scaler no update of the loop follows."""

    #: The step, as written in the module.
    step: Event
    #: The scaler's only update when it sits beside the loop, outside it (once per epoch);
    #: None when the module never updates that scaler (a scaler it proves a GradScaler).
    outside: Event | None


@dataclass(frozen=True, slots=True)
class RepeatedUpdate:
    """A ``scaler.update()`` that may run a second time in one iteration."""

    #: The update, as its iteration holds it (``site`` is the call that brings it, if any).
    update: Event
    #: The earlier update of the same scaler in the iteration, with a scaler step between;
    #: None when the update sits in a loop over optimizers (``loop``).
    earlier: Event | None
    #: The loop over optimizers around the update, when that is why it repeats.
    loop: cst.For | None = None


def _own(iteration: Iteration, event: Event) -> Event:
    """``event`` as ``iteration`` holds it (with the call that brought it, if any)."""
    return next(e for e in iteration.events if e.call is event.call)


def _inside(index: ModuleIndex, node: cst.CSTNode, scope: cst.CSTNode) -> bool:
    return scope is index.module or scope in set(index.ancestors(node))


def steps_without_update(
    model: TrainingIterations, index: ModuleIndex
) -> Iterator[StepWithoutUpdate]:
    """Scaler steps in a training loop that no update of the same scaler follows there."""
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
                isinstance(it.scope, cst.For)
                and variables_read(it.scope.target) & variables_read(step.call)
            )
            and not on_one_pass_only(index, _own(it, step).site, it.scope)
        ]
        if not loops:
            continue  # a hook or step function called from elsewhere: its caller may update
        mine = [u for u in updates if same_scaler(u.scaler, step.scaler)]
        if not mine:
            # Certain only for a scaler the file builds (or annotates) as a GradScaler.
            receiver = cst.ensure_type(step.call.func, cst.Attribute).value
            if model.receivers.proves(receiver):
                yield StepWithoutUpdate(step, None)
            continue
        # An update beside the loop in the same function runs once per loop (per epoch); one
        # elsewhere (another method, a hook) may run every step: not known, not reported.
        for iteration in loops:
            outside = [
                update
                for update in mine
                if index.enclosing_function(update.call)
                is index.enclosing_function(iteration.scope)
                and not _inside(index, update.call, iteration.scope)
            ]
            if outside:
                yield StepWithoutUpdate(step, outside[0])
                break


def repeated_updates(model: TrainingIterations, index: ModuleIndex) -> Iterator[RepeatedUpdate]:
    """Updates that may run more than once per iteration of their scaler."""
    for iteration in model.iterations:
        updates = iteration.of(Kind.UPDATE)
        steps = _ScalerSteps(model, iteration)
        for position, later in enumerate(updates):
            if is_disabled(index, later.scaler):
                continue
            for loop in loops_between(index, later.site, iteration.scope):
                if not isinstance(loop, cst.For):
                    continue
                if (
                    not variables_read(loop.target) & variables_read(later.call.func)
                    and not (later.scaler is not None and later.scaler in assigned_in(index, loop))
                    and not _guarded_within(index, later, loop)
                    and steps.any_inside(index, loop)
                ):
                    yield RepeatedUpdate(later, None, loop)
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
                        and not _leaves_before(model, index, first, later)
                        and steps.between_a_new_one(first, later)
                    ),
                    None,
                )
                if earlier is not None:
                    yield RepeatedUpdate(later, earlier)


class _ScalerSteps:
    """The scaler steps of one iteration, as bits of an integer per question, so that asking
    about every pair of its updates costs a few integer operations a pair: the steps that may
    run after an update, before one, and those that step an optimizer stepped before one."""

    def __init__(self, model: TrainingIterations, iteration: Iteration) -> None:
        self._model = model
        self._iteration = iteration
        self._steps = iteration.of(Kind.SCALER_STEP)
        self._after: dict[int, int] = {}
        self._before: dict[int, int] = {}
        self._stepped_again: dict[int, int | None] = {}

    def any_inside(self, index: ModuleIndex, loop: cst.For) -> bool:
        return any(_inside(index, step.site, loop) for step in self._steps)

    def between_a_new_one(self, first: Event, later: Event) -> bool:
        """Some scaler step may run between the two updates, and one of those may step an
        optimizer not stepped before ``first``. When every step between them steps an
        optimizer stepped before the first, they are two iterations (a test or a once-run
        function that calls a one-step helper twice), not two updates in one."""
        between = self._after_of(first) & self._before_of(later)
        if not between:
            return False
        again = self._again_of(first)
        return again is None or bool(between & ~again)

    def _after_of(self, event: Event) -> int:
        """The steps that may run after ``event``."""
        return self._steps_where(self._after, event, after=True)

    def _before_of(self, event: Event) -> int:
        """The steps that may run before ``event``."""
        return self._steps_where(self._before, event, after=False)

    def _steps_where(self, kept: dict[int, int], event: Event, *, after: bool) -> int:
        found = kept.get(id(event))
        if found is None:
            may_precede = self._iteration.may_precede
            found = kept[id(event)] = _bits(
                step is not event
                and (may_precede(event, step) if after else may_precede(step, event))
                for step in self._steps
            )
        return found

    def _again_of(self, first: Event) -> int | None:
        """The steps of an optimizer some step before ``first`` steps; None when a step
        before it steps an optimizer not known."""
        if id(first) not in self._stepped_again:
            passed = self._model.optimizer_as_passed
            before = self._before_of(first)
            stepped = {passed(step) for at, step in enumerate(self._steps) if before >> at & 1}
            self._stepped_again[id(first)] = (
                None if None in stepped else _bits(passed(step) in stepped for step in self._steps)
            )
        return self._stepped_again[id(first)]


def _bits(flags: Iterable[bool]) -> int:
    """An integer whose bit ``i`` is set where the ``i``-th flag is true."""
    return sum(1 << at for at, flag in enumerate(flags) if flag)


def _guarded_within(index: ModuleIndex, event: Event, loop: cst.For) -> bool:
    """The update may run for only some elements of ``loop``: an ``if`` around it in the loop
    (``if i == len(optimizers) - 1:``) or in the method that brings it (``if optimizer_idx + 1
    == num_optimizers:``), or a ``continue`` that skips elements."""
    if event.via is not None and any(
        isinstance(ancestor, cst.If)
        for ancestor in index.ancestors(event.call)
        if index.enclosing_function(ancestor) is index.enclosing_function(event.call)
    ):
        return True
    for ancestor in index.ancestors(event.site):
        if ancestor is loop:
            break
        if isinstance(ancestor, cst.If):
            return True
    return skips_passes(loop.body)


def _arm_exits(arm: cst.CSTNode) -> bool:
    """An ``if`` arm (body or ``else``, not an ``elif``) that ends the iteration early."""
    suite = arm.body if isinstance(arm, cst.Else) else arm
    return isinstance(suite, cst.BaseSuite) and exits(suite)


def _leaves_before(
    model: TrainingIterations, index: ModuleIndex, first: Event, second: Event
) -> bool:
    """``first`` sits in an ``if`` arm that ends with ``continue``/``break``/``return``/``raise``
    and does not hold ``second``: after ``first`` the iteration is over."""
    around = set(index.ancestors(second.site))
    return any(
        statement not in around and _arm_exits(arm)
        for statement, arm in model.facts.arms(first.site)
    )
