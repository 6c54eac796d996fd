"""Whether the gradients one backward leaves reach a later step of the same iteration.

A backward's gradients reach a step when the step may run after it on a path that runs both,
with no optimizer step or ``zero_grad`` that always runs in between (those consume or clear the
gradients). "Never together" is wider than exclusive arms: the two events' conditions may
contradict (``if use_amp:`` and ``if not use_amp:`` blocks, a helper's ``if scaler:`` read with
the caller's argument). A plain backward may also feed an optimizer stepped directly (a GAN's
fp32 discriminator): then its gradients are that optimizer's business.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from linter.model.iterations._iteration import TrainingIterations
from linter.model.iterations._iteration_events import Event, Iteration, Kind
from linter.model.syntax import ModuleIndex

#: Events that consume or clear the gradients a backward left.
GRADIENT_SINKS = (Kind.OPTIMIZER_STEP, Kind.ZERO_GRAD)


def never_together(model: TrainingIterations, iteration: Iteration, a: Event, b: Event) -> bool:
    """No execution of the iteration runs both: exclusive arms, or contradicting conditions."""
    if iteration.exclusive(a, b):
        return True
    return model.facts.contradict(model.conditions(a), model.conditions(b))


def reaches(
    model: TrainingIterations,
    index: ModuleIndex,
    iteration: Iteration,
    backward: Event,
    step: Event,
) -> bool:
    """The backward's gradients may reach ``step``: it may run later in the iteration, on a path
    that runs both, with no optimizer step or ``zero_grad`` always in between."""
    if not iteration.may_precede(backward, step) or never_together(
        model, iteration, backward, step
    ):
        return False
    return not any(
        _always_between(model, index, iteration, backward, sink, step)
        for sink in iteration.between(backward, step, *GRADIENT_SINKS)
    )


def feeds_a_plain_optimizer(
    model: TrainingIterations, iteration: Iteration, backward: Event, steps: Sequence[Event]
) -> bool:
    """An optimizer other than those of ``steps`` is stepped directly after the backward: its
    gradients may be that optimizer's (an fp32 discriminator stepped after the generator's
    scaler step)."""
    stepped = {step.optimizer for step in steps}
    return any(
        plain.optimizer is not None
        and None not in stepped
        and plain.optimizer not in stepped
        and iteration.may_precede(backward, plain)
        and not never_together(model, iteration, backward, plain)
        for plain in iteration.of(Kind.OPTIMIZER_STEP)
    )


def _always_between(
    model: TrainingIterations,
    index: ModuleIndex,
    iteration: Iteration,
    first: Event,
    sink: Event,
    last: Event,
) -> bool:
    """``sink`` runs whenever ``first`` and ``last`` do: no ``if`` or loop of its own between it
    and the iteration (one around ``first`` or ``last`` too is shared)."""
    if sink.via is not None and model.facts.conditions(sink.call):
        return False
    shared = set(index.ancestors(first.site)) | set(index.ancestors(last.site))
    for ancestor in index.ancestors(sink.site):
        if ancestor is iteration.scope:
            return True
        if isinstance(ancestor, cst.If | cst.For | cst.While) and ancestor not in shared:
            return False
    return True
