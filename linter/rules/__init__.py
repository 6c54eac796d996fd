"""The rule registry: the one place a rule is listed."""

from __future__ import annotations

from linter._rule import Rule
from linter.rules.amp001_get_scale_every_step import GetScaleEveryStep
from linter.rules.amp002_fp16_amp_with_bf16_checkpoint import Fp16AmpWithBf16Checkpoint
from linter.rules.amp004_deprecated_amp_api import DeprecatedAmpApi
from linter.rules.amp009_grad_scaler_per_step import GradScalerPerStep
from linter.rules.amp010_grad_scaler_with_bf16_autocast import GradScalerWithBf16Autocast

#: Every rule, in code order.
ALL_RULES: tuple[type[Rule], ...] = (
    GetScaleEveryStep,
    Fp16AmpWithBf16Checkpoint,
    DeprecatedAmpApi,
    GradScalerPerStep,
    GradScalerWithBf16Autocast,
)

__all__ = [
    "ALL_RULES",
    "DeprecatedAmpApi",
    "Fp16AmpWithBf16Checkpoint",
    "GetScaleEveryStep",
    "GradScalerPerStep",
    "GradScalerWithBf16Autocast",
]
