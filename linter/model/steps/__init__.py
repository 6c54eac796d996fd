"""Steps: what runs on every training step, and what runs once.

Questions answered here: does this code run on every training step, and why (`PerStepAnalysis`:
loops, framework hooks, a path that runs the scaler's step, an optimizer wrapper's ``step``);
which ``if`` tests make code periodic, one-off or rare, and which merely configure it
(`classify_guard`: a log interval, ``step == 0``, a non-finite check, an accumulation boundary);
which loops count epochs or walk a collection; what is cached on the first call; what changes
from one loop pass to the next; whether the host has already waited for the device; and what a
step does on its own: reads the scale, builds a GradScaler anew, steps an LR scheduler, runs
only under bf16 autocasts.

May import: values, settings, project, syntax.
"""

from __future__ import annotations

from linter.model.steps._bf16_only_steps import Bf16OnlySteps
from linter.model.steps._device_syncs import DeviceSyncs
from linter.model.steps._loop_passes import (
    assigned_in,
    breaks,
    follows_the_target,
    loops_between,
    mentions,
    on_one_pass_only,
    per_pass_names,
    skips_passes,
    variables_read,
)
from linter.model.steps._lr_schedulers import Hold, lr_schedulers
from linter.model.steps._passed_scalers import passed_scaler_wrapper
from linter.model.steps._per_step import PerStepAnalysis
from linter.model.steps._scale_reads import ScaleRead, scale_reads, skip_detections
from linter.model.steps._scaler_lifetimes import PerStepScaler, ScalerLifetimes
from linter.model.steps._step_guards import exits
from linter.model.steps._step_loops import TRAVERSED_COLLECTIONS, is_epoch_loop

__all__ = [
    "TRAVERSED_COLLECTIONS",
    "Bf16OnlySteps",
    "DeviceSyncs",
    "Hold",
    "PerStepAnalysis",
    "PerStepScaler",
    "ScaleRead",
    "ScalerLifetimes",
    "assigned_in",
    "breaks",
    "exits",
    "follows_the_target",
    "is_epoch_loop",
    "loops_between",
    "lr_schedulers",
    "mentions",
    "on_one_pass_only",
    "passed_scaler_wrapper",
    "per_pass_names",
    "scale_reads",
    "skip_detections",
    "skips_passes",
    "variables_read",
]
