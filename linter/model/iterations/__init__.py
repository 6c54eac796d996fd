"""Iterations: one training iteration as ordered events, and what it does with them.

Questions answered here: where one iteration runs and which events it holds — a scaled or
plain backward, ``unscale_``, a gradient clip, a scaler or optimizer step, ``update``,
``zero_grad``, a look at gradient values — in order and branch by branch (`TrainingIterations`,
`Iteration`); whether a clip or a read sees gradients still scaled, or its threshold is scaled
itself; whether something else unscales; whether a backward's gradients reach a later step;
how many times ``update()`` runs per iteration; and when a scaler actually scales.

May import: steps, values, settings, project, syntax.
"""

from __future__ import annotations

from linter.model.iterations._accelerate_backwards import accelerate_backwards, may_scale_fp16
from linter.model.iterations._gradient_reach import (
    feeds_a_plain_optimizer,
    never_together,
    reaches,
)
from linter.model.iterations._gradient_reads import gradient_loggers
from linter.model.iterations._iteration import TrainingIterations, of_module
from linter.model.iterations._iteration_events import Event, Iteration, Kind
from linter.model.iterations._scaled_clips import (
    ScaledClip,
    in_a_nested_loop,
    scaled_clips,
    under_the_steps_conditions,
)
from linter.model.iterations._scaled_losses import (
    backpropagated,
    backpropagates_scaled,
    discarded_scale,
)
from linter.model.iterations._scaler_switches import (
    DISABLED,
    ScalerSwitches,
    scaler_off,
    scaler_switches,
)
from linter.model.iterations._unscaling import may_run_before, unscaling_calls
from linter.model.iterations._updates_per_iteration import repeated_updates, steps_without_update

__all__ = [
    "DISABLED",
    "Event",
    "Iteration",
    "Kind",
    "ScaledClip",
    "ScalerSwitches",
    "TrainingIterations",
    "accelerate_backwards",
    "backpropagated",
    "backpropagates_scaled",
    "discarded_scale",
    "feeds_a_plain_optimizer",
    "gradient_loggers",
    "in_a_nested_loop",
    "may_run_before",
    "may_scale_fp16",
    "never_together",
    "of_module",
    "reaches",
    "repeated_updates",
    "scaled_clips",
    "scaler_off",
    "scaler_switches",
    "steps_without_update",
    "under_the_steps_conditions",
    "unscaling_calls",
]
