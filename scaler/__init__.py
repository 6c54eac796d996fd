"""ampscale's reference dynamic loss scaler: a drop-in for ``torch.amp.GradScaler``."""

from ._checkpoint_inspect import (
    CheckpointError,
    CheckpointReport,
    DtypeCount,
    SkippedFile,
    inspect_checkpoint,
)
from ._fp16_compat import Fp16CompatReport, Fp16Offender, check_fp16_compat
from ._grad_scaler import GradScaler, OptState
from ._overflow_report import OverflowReport, OverflowRow
from ._policy import ScaleBelowOneError, ScaleBelowOneWarning
from ._skip_aware_scheduler import SkipAwareScheduler
from ._stats import ScalerStats
from ._sync_counter import SyncCounter

__all__: list[str] = [
    "CheckpointError",
    "CheckpointReport",
    "DtypeCount",
    "Fp16CompatReport",
    "Fp16Offender",
    "GradScaler",
    "OptState",
    "OverflowReport",
    "OverflowRow",
    "ScaleBelowOneError",
    "ScaleBelowOneWarning",
    "ScalerStats",
    "SkipAwareScheduler",
    "SkippedFile",
    "SyncCounter",
    "check_fp16_compat",
    "inspect_checkpoint",
]
