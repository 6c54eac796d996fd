"""Gradient clips that may see gradients still multiplied by the loss scale.

After ``scaler.scale(loss).backward()`` the gradients carry the scale until ``scaler.unscale_(
optimizer)`` (or ``scaler.step``, which unscales in place). A clip between the two, with no
unscale that may run first, applies its threshold to scaled values. Read per iteration
(`linter.model.iterations._iteration`): a clip followed by a ``scaler.step`` of the iteration,
after a
scaled backward on a path that runs both; a clip with no backward written in the iteration (a
trainer's ``optimizer_step(self)`` that clips, then steps) only when the scaler is proven a
GradScaler and nothing in the module unscales it. A clip at a threshold multiplied by the loss
scale (`linter.model.iterations._scaled_thresholds`) clips scaled gradients at a scaled norm, as it
should.

Unknown counts as "it may unscale": an ``unscale_`` of an unknown optimizer, a call named like
an unscale or handed the scaler (`linter.model.iterations._unscaling`), an ``unscale_`` in a
function no
iteration reaches (a hook the trainer may call between backward and clip).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from linter.model.iterations._iteration import TrainingIterations
from linter.model.iterations._iteration_events import Event, Iteration, Kind
from linter.model.iterations._scaled_thresholds import scaled_thresholds
from linter.model.iterations._unscaling import may_run_before
from linter.model.syntax import ModuleIndex, last_part


@dataclass(frozen=True, slots=True)
class ScaledClip:
    """A clip of gradients that may still carry the loss scale, as one iteration shows it."""

    #: The clip, as its iteration sees it (``via`` set when a called function does it).
    clip: Event
    #: The first ``scaler.step(optimizer)`` that may follow it.
    step: Event
    #: The scaled backward that may precede it, or None when none is written in the
    #: iteration (a trainer's ``optimizer_step(self)`` that clips and steps).
    backward: Event | None
    #: The iteration.
    iteration: Iteration


@dataclass(frozen=True, slots=True)
class ClipVerdicts:
    """What a module's iterations say about its clips."""

    #: Clips that may see scaled gradients, in source order, one per clip.
    scaled: tuple[ScaledClip, ...]
    #: Every clip some iteration judged before a scaler step: scaled, or unscaled first.
    judged: frozenset[cst.Call]


def scaled_clips(
    model: TrainingIterations, index: ModuleIndex, unscaling_calls: Sequence[cst.Call]
) -> ClipVerdicts:
    """The clips of the module that may run on scaled gradients (see the module docstring)."""
    found: dict[cst.Call, ScaledClip] = {}
    covered: set[cst.Call] = set()
    at_scale: set[cst.Call] = set()
    thresholds = scaled_thresholds(model, index)
    for iteration in model.iterations:
        for clip in iteration.of(Kind.CLIP):
            verdict = _judge(model, index, iteration, clip, unscaling_calls)
            if verdict is True:
                covered.add(clip.call)
            elif isinstance(verdict, ScaledClip) and thresholds.scaled(clip):
                at_scale.add(clip.call)  # a threshold multiplied by the scale: as it should
            elif isinstance(verdict, ScaledClip):
                before = found.get(clip.call)
                if before is None or (before.backward is None and verdict.backward):
                    found[clip.call] = verdict
    # An unscale_ in a function no iteration reaches (a hook, a callback's method) may be
    # called between backward and clip in ways this file does not show.
    unreached = {
        last_part(event.scaler)
        for event in model.events
        if event.kind is Kind.UNSCALE and event.scaler and not model.holding(event.call)
    }
    scaled = tuple(
        clip
        for call, clip in sorted(found.items(), key=lambda item: index.order[item[0]])
        if call not in covered
        and last_part(clip.step.scaler or "") not in unreached
        and (clip.backward is not None or _unscaled_nowhere(model, clip, unscaling_calls))
    )
    return ClipVerdicts(scaled, frozenset(found) | frozenset(covered) | frozenset(at_scale))


def in_a_nested_loop(index: ModuleIndex, scaled: ScaledClip) -> bool:
    """The clip sits in a loop inside its iteration (or inside the function that clips): a
    micro-batch loop of gradient accumulation."""
    function = index.enclosing_function(scaled.clip.call)
    for ancestor in index.ancestors(scaled.clip.call):
        if ancestor is scaled.iteration.scope or ancestor is function:
            return False
        if isinstance(ancestor, cst.For | cst.While):
            return True
    return False


def under_the_steps_conditions(
    index: ModuleIndex, model: TrainingIterations, scaled: ScaledClip
) -> bool:
    """Every ``if`` around the step (in its function) is around the clip too, in the same arm:
    where the clip runs, the step follows (not so under ``if (i + 1) % accum == 0: step``)."""
    clip, step = scaled.clip.call, scaled.step.call
    if index.enclosing_function(clip) is not index.enclosing_function(step):
        return True  # across functions the conditions are not comparable: say nothing
    return set(model.facts.arms(step)) <= set(model.facts.arms(clip))


def _judge(
    model: TrainingIterations,
    index: ModuleIndex,
    iteration: Iteration,
    clip: Event,
    unscaling_calls: Sequence[cst.Call],
) -> ScaledClip | bool:
    """What one iteration says about ``clip``: a `ScaledClip`; True when something may unscale
    before it; False when it says nothing (no scaler step after it, the non-AMP path)."""
    steps = [step for step in iteration.of(Kind.SCALER_STEP) if iteration.may_precede(clip, step)]
    if not steps:
        return False
    step = steps[0]
    if any(
        iteration.may_precede(clip, direct) and iteration.may_precede(direct, step)
        for direct in iteration.of(Kind.OPTIMIZER_STEP)
    ):
        return False  # an optimizer stepped directly comes first: the clip is its business
    for unscale in iteration.of(Kind.UNSCALE):
        if iteration.may_precede(unscale, clip) and _unscales_for(unscale, step, iteration):
            return True
    if any(may_run_before(model, index, call, clip) for call in unscaling_calls):
        return True
    backwards = [
        backward
        for backward in iteration.of(Kind.SCALED_BACKWARD, Kind.BACKWARD)
        if iteration.may_precede(backward, clip) and not iteration.exclusive(backward, step)
    ]
    scaled = [b for b in backwards if b.kind is Kind.SCALED_BACKWARD]
    if scaled:
        return ScaledClip(clip, step, scaled[-1], iteration)
    if iteration.of(Kind.SCALED_BACKWARD, Kind.BACKWARD):
        return False  # a plain backward before it (the non-AMP path), or none before it
    return ScaledClip(clip, step, None, iteration)


def _unscales_for(unscale: Event, step: Event, iteration: Iteration) -> bool:
    """Whether ``unscale`` may unscale the gradients ``step`` applies: the same optimizer, an
    unknown one, or one the iteration does not step through the scaler (a loop variable over
    the optimizers, an alias) — only another optimizer stepped here is certainly not it."""
    if unscale.optimizer is None or step.optimizer is None:
        return True
    if unscale.optimizer == step.optimizer:
        return True
    return unscale.optimizer not in {s.optimizer for s in iteration.of(Kind.SCALER_STEP)}


def _unscaled_nowhere(
    model: TrainingIterations, scaled: ScaledClip, unscaling_calls: Sequence[cst.Call]
) -> bool:
    """With no scaled backward written in the iteration: the scaler is proven a GradScaler and
    nothing in the module unscales it (another method or a subclass here might do it first)."""
    step = scaled.step
    receiver = step.call.func
    if step.scaler is None or not isinstance(receiver, cst.Attribute):
        return False
    if not model.receivers.proves(receiver.value) or unscaling_calls:
        return False
    name = last_part(step.scaler)
    return not any(
        event.kind is Kind.UNSCALE and last_part(event.scaler or name) == name
        for event in model.events
    )
