"""The rule registry: the one place a rule is listed."""

from __future__ import annotations

from linter._rule import Rule
from linter.rules.amp001_get_scale_every_step import GetScaleEveryStep
from linter.rules.amp002_fp16_amp_with_bf16_checkpoint import Fp16AmpWithBf16Checkpoint
from linter.rules.amp003_clip_before_unscale import ClipBeforeUnscale
from linter.rules.amp004_deprecated_amp_api import DeprecatedAmpApi
from linter.rules.amp005_update_not_once_per_iteration import UpdateNotOncePerIteration
from linter.rules.amp006_backward_without_scale import BackwardWithoutScale
from linter.rules.amp007_step_bypasses_scaler import StepBypassesScaler
from linter.rules.amp008_grad_scaler_with_fp16_params import GradScalerWithFp16Params
from linter.rules.amp009_grad_scaler_per_step import GradScalerPerStep
from linter.rules.amp010_grad_scaler_with_bf16_autocast import GradScalerWithBf16Autocast
from linter.rules.amp011_scaler_state_not_checkpointed import ScalerStateNotCheckpointed
from linter.rules.amp012_scaled_gradients_observed import ScaledGradientsObserved
from linter.rules.amp013_unscale_more_than_once import UnscaleMoreThanOnce
from linter.rules.amp014_precision_managed_twice import PrecisionManagedTwice
from linter.rules.amp015_scheduler_steps_on_skipped_step import SchedulerStepsOnSkippedStep
from linter.rules.amp100_unused_noqa import UnusedNoqa

#: Every rule, in code order.
ALL_RULES: tuple[type[Rule], ...] = (
    GetScaleEveryStep,
    Fp16AmpWithBf16Checkpoint,
    ClipBeforeUnscale,
    DeprecatedAmpApi,
    UpdateNotOncePerIteration,
    BackwardWithoutScale,
    StepBypassesScaler,
    GradScalerWithFp16Params,
    GradScalerPerStep,
    GradScalerWithBf16Autocast,
    ScalerStateNotCheckpointed,
    ScaledGradientsObserved,
    UnscaleMoreThanOnce,
    PrecisionManagedTwice,
    SchedulerStepsOnSkippedStep,
    UnusedNoqa,
)
UnusedNoqa.registered_codes = frozenset(rule.code for rule in ALL_RULES)

__all__ = [
    "ALL_RULES",
    "BackwardWithoutScale",
    "ClipBeforeUnscale",
    "DeprecatedAmpApi",
    "Fp16AmpWithBf16Checkpoint",
    "GetScaleEveryStep",
    "GradScalerPerStep",
    "GradScalerWithBf16Autocast",
    "GradScalerWithFp16Params",
    "PrecisionManagedTwice",
    "ScaledGradientsObserved",
    "ScalerStateNotCheckpointed",
    "SchedulerStepsOnSkippedStep",
    "StepBypassesScaler",
    "UnscaleMoreThanOnce",
    "UnusedNoqa",
    "UpdateNotOncePerIteration",
]
