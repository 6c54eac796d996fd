"""Values: what an expression is, in AMP's terms.

Questions answered here: is this a GradScaler (`scaler_receivers`), and is it on only for a
precision other than bf16; which autocasts a module enters and in which dtype (`ModuleAutocasts`);
where a model became bf16 or fp16 (`Bf16Origins`, a documented bf16 family included); which fp16
switches apply to a bf16 model (`Fp16Sites`, AMP002 and AMP008); which trained parameters stay
fp32 anyway; which engines manage precision themselves (DeepSpeed, accelerate, Lightning);
which checkpoints hold which state; the deprecated ``torch.cuda.amp`` API; and which of these
values a module holds where other modules reach them, or reaches in other modules
(`value_records`, `imported_values`).

May import: settings, project, syntax.
"""

from __future__ import annotations

from linter.model.values._autocasts import AUTOCAST_SIGNATURES, Autocast, ModuleAutocasts
from linter.model.values._bf16_families import (
    BF16_FAMILIES,
    Bf16Family,
    bf16_family,
    user_families,
)
from linter.model.values._checkpoint_helpers import checkpoint_helpers
from linter.model.values._checkpoints import (
    CheckpointWrite,
    checkpoints,
    confining_functions,
    readable_at,
)
from linter.model.values._deprecated_amp_api import (
    CURRENT_API,
    DEPRECATED,
    DEVICE_FIRST,
    DEVICE_KEYWORD,
    DTYPE_OVERRIDE,
    MODULES,
    PARENTS,
    Replacement,
    Use,
    deprecated_imports,
    deprecated_uses,
    head_name,
    local_name,
    new_spelling,
)
from linter.model.values._exported_values import value_records
from linter.model.values._fp16_site_search import Fp16Site, may_hold_a_finding, may_train
from linter.model.values._fp16_sites import Fp16Sites
from linter.model.values._fp32_trainables import Fp32Trainables
from linter.model.values._model_origins import Bf16Origin
from linter.model.values._parsed_training_arguments import TRAINING_ARGUMENTS
from linter.model.values._precision_engines import (
    DEEPSPEED_ENGINE,
    PrecisionEngine,
    beside,
    precision_engines,
    switched,
)
from linter.model.values._scaler_identity import is_disabled, same_scaler
from linter.model.values._scaler_precision import (
    BF16_WORDS,
    for_another_precision,
    used_for_another_precision,
)
from linter.model.values._scaler_receivers import (
    GRAD_SCALER_CLASS_NAMES,
    GRAD_SCALER_CONSTRUCTORS,
    ScalerReceivers,
    may_name_a_scaler,
    scaler_receivers,
)

__all__ = [
    "AUTOCAST_SIGNATURES",
    "BF16_FAMILIES",
    "BF16_WORDS",
    "CURRENT_API",
    "DEEPSPEED_ENGINE",
    "DEPRECATED",
    "DEVICE_FIRST",
    "DEVICE_KEYWORD",
    "DTYPE_OVERRIDE",
    "GRAD_SCALER_CLASS_NAMES",
    "GRAD_SCALER_CONSTRUCTORS",
    "MODULES",
    "PARENTS",
    "TRAINING_ARGUMENTS",
    "Autocast",
    "Bf16Family",
    "Bf16Origin",
    "CheckpointWrite",
    "Fp16Site",
    "Fp16Sites",
    "Fp32Trainables",
    "ModuleAutocasts",
    "PrecisionEngine",
    "Replacement",
    "ScalerReceivers",
    "Use",
    "beside",
    "bf16_family",
    "checkpoint_helpers",
    "checkpoints",
    "confining_functions",
    "deprecated_imports",
    "deprecated_uses",
    "for_another_precision",
    "head_name",
    "is_disabled",
    "local_name",
    "may_hold_a_finding",
    "may_name_a_scaler",
    "may_train",
    "new_spelling",
    "precision_engines",
    "readable_at",
    "same_scaler",
    "scaler_receivers",
    "switched",
    "used_for_another_precision",
    "user_families",
    "value_records",
]
