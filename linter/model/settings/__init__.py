"""Settings: the switches a run reads, from flags, constants and config files the project ships.

Questions answered here: which argparse flags and dataclass fields a script declares, with their
defaults (`DeclaredSettings`); which names a module binds once to a value (`ModuleConstants`);
which config files (DeepSpeed JSON, TrainingArguments JSON, Hydra/OmegaConf and Lightning CLI
YAML, accelerate YAML) the code loads and what precision they set, read with safe loaders and
never executed; the dtype an expression takes from such a config; when an fp16 switch is on; and
which dtypes a run-time dtype may take, on which runs (`dtype_choices`).

May import: project, syntax.
"""

from __future__ import annotations

from linter.model.settings._command_line import DeclaredSettings
from linter.model.settings._config_dtypes import ConfigDtype, ConfigDtypes
from linter.model.settings._config_files import (
    ACCELERATE,
    DEEPSPEED,
    LIGHTNING_CLI,
    ConfigFile,
    ConfigValue,
    precision_facts,
    precision_of,
)
from linter.model.settings._config_files import TRAINING_ARGUMENTS as TRAINING_ARGUMENTS_FILE
from linter.model.settings._config_references import (
    ACCELERATE_READER,
    DEEPSPEED_READER,
    LIGHTNING_CLI_READER,
    TRAINING_ARGUMENTS_READER,
    ConfigReference,
    config_dependencies,
    config_notes,
    config_references,
)
from linter.model.settings._dtype_choices import (
    DtypeChoice,
    DtypeChoices,
    argument_options,
    dtype_choices,
    runs_choosing,
)
from linter.model.settings._fp16_switches import (
    ON_GPUS_WITHOUT_BF16,
    Fp16Switches,
    SwitchOn,
    asks_for_fp16,
)
from linter.model.settings._module_constants import ModuleConstants

__all__ = [
    "ACCELERATE",
    "ACCELERATE_READER",
    "DEEPSPEED",
    "DEEPSPEED_READER",
    "LIGHTNING_CLI",
    "LIGHTNING_CLI_READER",
    "ON_GPUS_WITHOUT_BF16",
    "TRAINING_ARGUMENTS_FILE",
    "TRAINING_ARGUMENTS_READER",
    "ConfigDtype",
    "ConfigDtypes",
    "ConfigFile",
    "ConfigReference",
    "ConfigValue",
    "DeclaredSettings",
    "DtypeChoice",
    "DtypeChoices",
    "Fp16Switches",
    "ModuleConstants",
    "SwitchOn",
    "argument_options",
    "asks_for_fp16",
    "config_dependencies",
    "config_notes",
    "config_references",
    "dtype_choices",
    "precision_facts",
    "precision_of",
    "runs_choosing",
]
