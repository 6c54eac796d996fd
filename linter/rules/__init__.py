"""The rule registry: the one place a rule is listed."""

from __future__ import annotations

from linter._rule import Rule
from linter.rules.amp001_get_scale_every_step import GetScaleEveryStep
from linter.rules.amp002_fp16_amp_with_bf16_checkpoint import Fp16AmpWithBf16Checkpoint
from linter.rules.amp003_clip_before_unscale import ClipBeforeUnscale
from linter.rules.amp004_deprecated_amp_api import DeprecatedAmpApi

#: Every rule, in code order.
ALL_RULES: tuple[type[Rule], ...] = (
    GetScaleEveryStep,
    Fp16AmpWithBf16Checkpoint,
    ClipBeforeUnscale,
    DeprecatedAmpApi,
)

__all__ = [
    "ALL_RULES",
    "ClipBeforeUnscale",
    "DeprecatedAmpApi",
    "Fp16AmpWithBf16Checkpoint",
    "GetScaleEveryStep",
]
