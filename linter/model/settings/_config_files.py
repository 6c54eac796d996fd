"""Configuration files that training code takes its precision from, read as data.

DeepSpeed keeps ``fp16.enabled`` / ``bf16.enabled`` in a JSON file, ``HfArgumentParser`` reads
``TrainingArguments`` (``fp16``, ``bf16``) from JSON, Hydra and OmegaConf read YAML with keys such
as ``precision`` or ``mixed_precision``, Lightning CLI YAML holds ``trainer.precision`` and an
accelerate config YAML ``mixed_precision``. This module reads such a file with a safe loader only
(`json`, PyYAML's ``safe_load``, `tomllib`): nothing in it is executed, a file over
`MAX_CONFIG_BYTES` is not read, and a file that cannot be read or parsed becomes a one-line
`ConfigFile.note`, never an exception. `precision_facts` says what the file picks, by its shape.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # (types-PyYAML is not a dependency)

from linter.model.syntax import BF16, FP16, FP32

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the base dependencies install tomli there
    import tomli as tomllib

#: Larger files are not read: a precision setting lives in a small hand-written file, and a
#: multi-megabyte "config" is data that would only slow the lint down.
MAX_CONFIG_BYTES = 1_000_000

#: The loader of each config suffix.
CONFIG_SUFFIXES = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}

#: Files a project root holds (the folder a relative config path may also be relative to).
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")

#: What a precision value in a config means. Strings are compared lower-cased.
PRECISION_VALUES: dict[object, str] = {
    "bf16": BF16,
    "bfloat16": BF16,
    "bf16-mixed": BF16,
    "bf16-true": BF16,
    "torch.bfloat16": BF16,
    "fp16": FP16,
    "float16": FP16,
    "half": FP16,
    "16": FP16,
    "16-mixed": FP16,
    "16-true": FP16,
    "torch.float16": FP16,
    16: FP16,
    "fp32": FP32,
    "float32": FP32,
    "float": FP32,
    "32": FP32,
    "32-true": FP32,
    "64": FP32,
    "64-true": FP32,
    "no": FP32,
    "torch.float32": FP32,
    32: FP32,
    64: FP32,
}

#: Keys (the last part of a key path) whose value names a precision in Hydra / OmegaConf /
#: Lightning CLI YAML; ``fp16`` / ``bf16`` booleans name theirs by being true.
PRECISION_KEYS = frozenset({"precision", "amp", "dtype", "amp_dtype", "mixed_precision"})
BOOLEAN_PRECISION_KEYS = {"fp16": FP16, "bf16": BF16}

#: Top-level keys only a DeepSpeed config has.
_DEEPSPEED_KEYS = frozenset(
    {
        "zero_optimization",
        "train_micro_batch_size_per_gpu",
        "train_batch_size",
        "torch_autocast",
        "gradient_clipping",
        "zero_allow_untested_optimizer",
    }
)
#: Top-level keys of ``accelerate config`` output.
_ACCELERATE_KEYS = frozenset({"compute_environment", "distributed_type"})
#: Top-level keys of a ``TrainingArguments`` JSON (besides ``fp16``/``bf16``).
_TRAINING_ARGUMENT_KEYS = frozenset(
    {"output_dir", "per_device_train_batch_size", "learning_rate", "num_train_epochs"}
)

#: The shapes `precision_facts` tells apart.
DEEPSPEED = "deepspeed"
ACCELERATE = "accelerate"
TRAINING_ARGUMENTS = "training-arguments"
LIGHTNING_CLI = "lightning-cli"
GENERIC = "generic"

#: A value whose key is absent (distinct from a ``null`` in the file).
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()


@dataclass(frozen=True, slots=True)
class ConfigValue:
    """One setting as the file states it."""

    #: Dotted key path, e.g. ``bf16.enabled`` or ``trainer.precision``.
    key: str
    #: The value as loaded (``True``, ``"auto"``, ``"bf16-mixed"``, ``16``).
    value: object
    #: 1-based line of the key in the file; 0 when not known.
    line: int


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """A config file (or a dict literal in Python) as plain data."""

    #: Absolute path of the file (for a dict literal: the Python file holding it).
    path: str
    #: The loaded top-level mapping; None when the file could not be read.
    data: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    #: Why the file could not be read, one line; None when it was.
    note: str | None = None
    #: The file's text, for finding the line of a key; empty for a dict literal.
    text: str = field(default="", compare=False, hash=False, repr=False)
    #: The line every key gets when the text is not known (a dict literal's line).
    default_line: int = 0

    def get(self, key: str) -> object:
        """The value at a dotted key path, or `MISSING`."""
        current: object = self.data
        for part in key.split("."):
            if not isinstance(current, dict) or part not in current:
                return MISSING
            current = current[part]
        return current

    def value(self, key: str) -> ConfigValue | None:
        """The setting at ``key`` with its line, or None when absent."""
        found = self.get(key)
        if found is MISSING:
            return None
        return ConfigValue(key, found, self.line_of(key))

    def line_of(self, key: str) -> int:
        """The line of a key path in the text: each part's first appearance after its parent's
        (good for the hand-written files this reads; 0 when not found)."""
        if not self.text:
            return self.default_line
        start = 0
        line = 0
        for part in key.split("."):
            pattern = re.compile(
                rf"(\"{re.escape(part)}\"|'{re.escape(part)}'|(?m:^[ \t-]*){re.escape(part)})"
                r"\s*[:=]"
            )
            match = pattern.search(self.text, start)
            if match is None:
                return 0
            start = match.end()
            line = self.text.count("\n", 0, match.start(1)) + 1
        return line


@dataclass(frozen=True, slots=True)
class PrecisionFacts:
    """What a config picks, read by its shape."""

    #: `DEEPSPEED`, `ACCELERATE`, `TRAINING_ARGUMENTS`, `LIGHTNING_CLI` or `GENERIC`.
    shape: str
    #: ``fp16``/``bf16``/``fp32`` when the file says; None when it does not, says ``"auto"``,
    #: interpolates (``${...}``) or names two precisions.
    precision: str | None
    #: DeepSpeed only: True when its own fp16/bf16 (or apex ``amp``) mode is on, False when all
    #: are off, None when one is ``"auto"`` (filled in by the Hugging Face integration).
    engine_precision: bool | None = None
    #: DeepSpeed only: whether ``torch_autocast.enabled`` is true (its torch.autocast mode).
    torch_autocast: bool = False
    #: The settings the verdict was read from.
    evidence: tuple[ConfigValue, ...] = ()


def precision_of(value: object) -> str | None:
    """``bf16``/``fp16``/``fp32`` for a precision value as configs spell it, else None."""
    if isinstance(value, bool):
        return None
    key = value.lower().strip() if isinstance(value, str) else value
    try:
        return PRECISION_VALUES.get(key)
    except TypeError:  # a list or a mapping
        return None


def shape_of(config: ConfigFile) -> str:
    """Which tool the file is written for, from its top-level keys."""
    data = config.data or {}
    keys = set(data)
    if keys & _ACCELERATE_KEYS and "mixed_precision" in keys:
        return ACCELERATE
    if keys & _DEEPSPEED_KEYS or any(
        isinstance(data.get(k), dict) for k in ("fp16", "bf16", "bfloat16")
    ):
        return DEEPSPEED
    if isinstance(data.get("trainer"), dict) and keys & {"model", "data", "seed_everything"}:
        return LIGHTNING_CLI
    if keys & _TRAINING_ARGUMENT_KEYS and any(
        isinstance(data.get(k), bool) for k in ("fp16", "bf16")
    ):
        return TRAINING_ARGUMENTS
    return GENERIC


def precision_facts(config: ConfigFile, shape: str | None = None) -> PrecisionFacts:
    """What ``config`` picks, read as ``shape`` (default: the shape its keys show)."""
    shape = shape or shape_of(config)
    if shape == DEEPSPEED:
        return _deepspeed_facts(config)
    if shape == ACCELERATE:
        return _single(config, shape, "mixed_precision")
    if shape == LIGHTNING_CLI:
        return _single(config, shape, "trainer.precision")
    if shape == TRAINING_ARGUMENTS:
        return _flags(config, shape, ["fp16", "bf16"])
    return _generic_facts(config)


def _deepspeed_facts(config: ConfigFile) -> PrecisionFacts:
    evidence = []
    modes: set[str] = set()
    auto = False
    for key, mode in (("fp16", FP16), ("bf16", BF16), ("bfloat16", BF16), ("amp", FP16)):
        setting = config.value(f"{key}.enabled")
        if setting is None:
            continue
        evidence.append(setting)
        if setting.value is True:
            modes.add(mode)
        elif setting.value is not False:  # "auto", or a value computed in Python
            auto = True
    autocast = config.value("torch_autocast.enabled")
    torch_autocast = autocast is not None and autocast.value is True
    if autocast is not None:
        evidence.append(autocast)
    if auto:
        return PrecisionFacts(DEEPSPEED, None, None, torch_autocast, tuple(evidence))
    if modes:
        precision = modes.pop() if len(modes) == 1 else None
        return PrecisionFacts(DEEPSPEED, precision, True, torch_autocast, tuple(evidence))
    precision = None
    if torch_autocast:
        dtype = config.value("torch_autocast.dtype")
        precision = precision_of(dtype.value) if dtype is not None else BF16
    return PrecisionFacts(DEEPSPEED, precision or FP32, False, torch_autocast, tuple(evidence))


def _single(config: ConfigFile, shape: str, key: str) -> PrecisionFacts:
    setting = config.value(key)
    if setting is None:
        return PrecisionFacts(shape, None)
    return PrecisionFacts(shape, precision_of(setting.value), evidence=(setting,))


def _flags(config: ConfigFile, shape: str, keys: list[str]) -> PrecisionFacts:
    settings = [s for k in keys if (s := config.value(k)) is not None]
    on = {BOOLEAN_PRECISION_KEYS[s.key.rpartition(".")[2]] for s in settings if s.value is True}
    if not settings:
        return PrecisionFacts(shape, FP32)
    if len(on) > 1 or any(not isinstance(s.value, bool) for s in settings):
        return PrecisionFacts(shape, None, evidence=tuple(settings))
    precision = on.pop() if on else FP32
    return PrecisionFacts(shape, precision, evidence=tuple(settings))


def _generic_facts(config: ConfigFile) -> PrecisionFacts:
    """Every precision key anywhere in the file (a few levels deep); one verdict when they agree."""
    settings = [config.value(key) for key in precision_keys(config.data or {})]
    found = {_meaning(s) for s in settings if s is not None}
    found.discard("")
    if len(found) != 1 or None in found:
        return PrecisionFacts(GENERIC, None, evidence=tuple(s for s in settings if s))
    return PrecisionFacts(GENERIC, found.pop(), evidence=tuple(s for s in settings if s))


def _meaning(setting: ConfigValue) -> str | None:
    """The precision a setting picks; ``""`` for one that picks none (``fp16: false``)."""
    last = setting.key.rpartition(".")[2]
    if last in BOOLEAN_PRECISION_KEYS:
        if setting.value is True:
            return BOOLEAN_PRECISION_KEYS[last]
        return "" if setting.value is False else None
    if isinstance(setting.value, bool):  # `amp: true` turns AMP on without saying the dtype
        return "" if setting.value is False else None
    return precision_of(setting.value)


def precision_keys(data: dict[str, Any], prefix: str = "", depth: int = 0) -> list[str]:
    """Dotted paths of the precision keys in a loaded mapping, up to four levels deep."""
    found = []
    for key, value in data.items():
        if not isinstance(key, str):
            continue
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            if depth < 3:
                found.extend(precision_keys(value, path + ".", depth + 1))
        elif key in PRECISION_KEYS or key in BOOLEAN_PRECISION_KEYS:
            found.append(path)
    return found


# -- reading ---------------------------------------------------------------------------------


def read_config(path: str | os.PathLike[str]) -> ConfigFile:
    """The config at ``path`` (absolute), or one with a `ConfigFile.note` saying why not."""
    location = Path(path)
    try:
        stat = location.stat()
    except OSError as error:
        return ConfigFile(str(location), note=f"cannot read {location}: {error.strerror}")
    return _read(str(location), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _read(path: str, _mtime_ns: int, size: int) -> ConfigFile:
    # Keyed by mtime and size too, so that a long-lived process (the language server) sees edits.
    loader = CONFIG_SUFFIXES.get(Path(path).suffix.lower())
    if loader is None:
        return ConfigFile(path, note=f"{path}: not a JSON, YAML or TOML file; not read")
    if size > MAX_CONFIG_BYTES:
        return ConfigFile(path, note=f"{path}: larger than {MAX_CONFIG_BYTES} bytes; not read")
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read(MAX_CONFIG_BYTES + 1)
    except (OSError, UnicodeDecodeError) as error:
        return ConfigFile(path, note=f"cannot read {path}: {type(error).__name__}")
    try:
        data = parse_config_text(text, loader)
    except ValueError as error:
        return ConfigFile(path, note=f"cannot parse {path}: {error}")
    return ConfigFile(path, data, text=text)


def parse_config_text(text: str, loader: str) -> dict[str, Any]:
    """The top-level mapping of a config's text; ValueError (one line) when it has none."""
    try:
        if loader == "json":
            data = json.loads(text)
        elif loader == "toml":
            data = tomllib.loads(text)
        else:
            # An empty YAML file is a valid empty config (Hydra's `none.yaml` group options).
            data = yaml.safe_load(text)
            data = {} if data is None else data
    except (ValueError, yaml.YAMLError, RecursionError) as error:
        raise ValueError(" ".join(str(error).split())[:200] or type(error).__name__) from None
    if not isinstance(data, dict):
        raise ValueError(f"the top level is a {type(data).__name__}, not a mapping")
    return data


def project_root(path: str | os.PathLike[str]) -> Path | None:
    """The nearest folder at or above ``path``'s folder holding a `ROOT_MARKERS` file."""
    folder = Path(path).resolve().parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in ROOT_MARKERS):
            return candidate
    return None
