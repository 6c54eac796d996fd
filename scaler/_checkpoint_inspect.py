"""What precision is a checkpoint on disk, and would its weights survive fp16?

A model pretrained in bf16 is the usual reason fp16 training collapses: bf16 reaches ~3e38, fp16
only 65504. This reads a ``.safetensors`` file or a Hugging Face model folder without building the
model: headers give the stored dtypes, and on request each tensor is read in bounded chunks to
count the weights fp16 cannot hold. Pickle checkpoints (``.bin``, ``.pt``...) are never opened:
unpickling runs arbitrary code.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

from ._fp16_compat import _range_stats

#: Formats found in model folders that are listed but not read, with the reason reported.
NOT_INSPECTED: dict[str, str] = {
    ".bin": "not inspected: pickle",
    ".pt": "not inspected: pickle",
    ".pth": "not inspected: pickle",
    ".ckpt": "not inspected: pickle",
    ".pkl": "not inspected: pickle",
    ".pickle": "not inspected: pickle",
    ".h5": "not inspected: Keras/TensorFlow format is not supported",
    ".msgpack": "not inspected: Flax format is not supported",
    ".gguf": "not inspected: GGUF format is not supported",
    ".onnx": "not inspected: ONNX format is not supported",
}

# safetensors' dtype codes, spelled as torch spells the dtype.
_DTYPE_NAMES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "U32": "uint32",
    "I32": "int32",
    "U64": "uint64",
    "I64": "int64",
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}
_FLOATING = frozenset({"F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2"})
# Elements read at once when counting (whole rows of the first dimension, so at least one row).
_CHUNK_ELEMENTS = 1 << 24
_INDEX_SUFFIX = ".safetensors.index.json"


class CheckpointError(ValueError):
    """A checkpoint path that is missing, unreadable, corrupt or inconsistent; names the file."""


@dataclass(frozen=True, slots=True)
class DtypeCount:
    """How much of a checkpoint is stored in one dtype."""

    #: dtype as torch spells it, e.g. ``"bfloat16"``.
    dtype: str
    #: Number of tensors.
    tensors: int
    #: Number of elements (weights) in those tensors.
    elements: int


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A checkpoint file that was seen but not read."""

    #: The file.
    path: Path
    #: Why it was not read, e.g. ``"not inspected: pickle"``.
    reason: str


@dataclass(frozen=True, slots=True)
class CheckpointReport:
    """What :func:`inspect_checkpoint` found.

    Example::

        report = inspect_checkpoint("llama-3-8b/", count_out_of_range=True)
        report.config_dtype        # "bfloat16"
        report.bf16_checkpoint     # True: train it in bf16, not fp16
        report.above_fp16_max      # 0 for most checkpoints; activations may still overflow
    """

    #: The file or folder inspected.
    path: Path
    #: ``dtype`` (or the older ``torch_dtype``) declared in ``config.json``; ``None`` when there is
    #: no config or it declares none.
    config_dtype: str | None
    #: Stored dtypes, most elements first.
    stored_dtypes: tuple[DtypeCount, ...]
    #: The ``.safetensors`` files read.
    files: tuple[Path, ...]
    #: Checkpoint files seen but not read, with the reason.
    skipped: tuple[SkippedFile, ...]
    #: Floating-point weights above fp16's max (65504); ``None`` unless counting was asked for.
    above_fp16_max: int | None = None
    #: Nonzero floating-point weights below fp16's smallest subnormal (2**-24), which would flush
    #: to zero; ``None`` unless counting was asked for.
    below_fp16_subnormal: int | None = None
    #: Largest weight magnitude; ``None`` unless counting was asked for.
    max_abs: float | None = None
    #: Tensors holding at least one weight above fp16's max, in file order; empty unless counted.
    tensors_above_fp16_max: tuple[str, ...] = ()
    #: The names ``config.json`` gives the model (``_name_or_path``, ``model_type``), for
    #: recognising its family; empty without a config.
    config_names: tuple[str, ...] = ()

    @property
    def bf16_checkpoint(self) -> bool:
        """True when the config declares bfloat16 or most floating-point weights are bf16."""
        if self.config_dtype is not None:
            return self.config_dtype == "bfloat16"
        floating = [c for c in self.stored_dtypes if c.dtype.startswith(("float", "bfloat"))]
        return bool(floating) and floating[0].dtype == "bfloat16"

    @property
    def weights_fit_fp16(self) -> bool | None:
        """Whether every stored weight fits fp16 (``None`` when not counted).

        True says nothing about activations, which overflow far more often: check those with
        :func:`check_fp16_compat`.
        """
        if self.above_fp16_max is None or self.below_fp16_subnormal is None:
            return None
        return self.above_fp16_max == 0 and self.below_fp16_subnormal == 0

    def __str__(self) -> str:
        lines = [f"checkpoint {self.path}"]
        lines.append(f"  config dtype: {self.config_dtype or '(not declared)'}")
        for count in self.stored_dtypes:
            lines.append(
                f"  stored {count.dtype}: {count.tensors} tensor(s), {count.elements} element(s)"
            )
        lines.append(f"  files read: {len(self.files)}")
        lines.extend(f"  skipped {s.path.name}: {s.reason}" for s in self.skipped)
        if self.above_fp16_max is not None:
            lines.append(f"  max |w|: {self.max_abs:.4g}")
            lines.append(f"  weights above fp16 max (65504): {self.above_fp16_max}")
            lines.append(
                f"  nonzero weights below 2**-24 (flush to zero): {self.below_fp16_subnormal}"
            )
            if self.tensors_above_fp16_max:
                lines.append("  tensors above fp16 max: " + ", ".join(self.tensors_above_fp16_max))
        return "\n".join(lines)


def _dtype_name(code: str) -> str:
    return _DTYPE_NAMES.get(code, code.lower())


#: ``config.json`` keys that name the model or its architecture.
_CONFIG_NAME_KEYS = ("_name_or_path", "model_type")


def _read_config(config: Path) -> tuple[str | None, tuple[str, ...]]:
    """The declared dtype and the model's names, from one read of ``config.json``."""
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{config}: not a readable JSON file ({exc})") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{config}: expected a JSON object, got {type(data).__name__}")
    names = tuple(data[key] for key in _CONFIG_NAME_KEYS if isinstance(data.get(key), str))
    return _config_dtype(config, data), names


def _config_dtype(config: Path, data: dict) -> str | None:
    # transformers >= 4.56 writes "dtype"; older versions "torch_dtype". Multimodal configs may
    # declare it only on their text model.
    for source in (data, data.get("text_config")):
        if not isinstance(source, dict):
            continue
        for key in ("dtype", "torch_dtype"):
            value = source.get(key)
            if value is None:
                continue
            if not isinstance(value, str):
                raise CheckpointError(f"{config}: {key!r} must be a string, got {value!r}")
            return value.removeprefix("torch.")
    return None


def _index_shards(index: Path) -> dict[Path, list[str]]:
    """Shard file → tensor names, as a sharded checkpoint's index lists them."""
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{index}: not a readable JSON file ({exc})") from exc
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{index}: no 'weight_map' object mapping tensor names to files")
    shards: dict[Path, list[str]] = {}
    for name, file in weight_map.items():
        if Path(file).is_absolute() or ".." in Path(file).parts:
            raise CheckpointError(f"{index}: shard {file!r} is outside the model folder")
        shards.setdefault(index.parent / file, []).append(name)
    for shard in shards:
        if not shard.is_file():
            raise CheckpointError(f"{index}: names shard {shard.name!r}, which does not exist")
    return shards


def _open(file: Path) -> Any:  # safetensors does not export its handle type
    try:
        return safe_open(str(file), framework="pt")
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{file}: not a readable safetensors file ({exc})") from exc


def _chunks(handle: Any, name: str, shape: list[int]) -> Iterator[torch.Tensor]:
    """A tensor in slices along its first dimension of about ``_CHUNK_ELEMENTS`` elements."""
    if not shape:
        yield handle.get_tensor(name)
        return
    row = math.prod(shape[1:])
    step = max(1, _CHUNK_ELEMENTS // max(row, 1))
    tensor_slice = handle.get_slice(name)
    for start in range(0, shape[0], step):
        yield tensor_slice[start : start + step]


@dataclass(slots=True)
class _Totals:
    tensors: dict[str, int]
    elements: dict[str, int]
    above: int = 0
    below: int = 0
    max_abs: float = 0.0


def _read_file(
    file: Path, expected: list[str] | None, totals: _Totals, count: bool, offenders: list[str]
) -> None:
    with _open(file) as handle:
        try:
            names = list(handle.keys())
            if expected is not None:
                missing = sorted(set(expected) - set(names))
                if missing:
                    raise CheckpointError(
                        f"{file}: the index lists tensor {missing[0]!r} in this shard, "
                        "but the shard does not hold it"
                    )
            for name in names:
                tensor_slice = handle.get_slice(name)
                code = tensor_slice.get_dtype()
                shape = list(tensor_slice.get_shape())
                dtype = _dtype_name(code)
                totals.tensors[dtype] = totals.tensors.get(dtype, 0) + 1
                totals.elements[dtype] = totals.elements.get(dtype, 0) + math.prod(shape)
                if not count or code not in _FLOATING or math.prod(shape) == 0:
                    continue
                above = 0
                for chunk in _chunks(handle, name, shape):
                    stats = _range_stats(chunk)
                    above += int(stats.overflow)
                    totals.below += int(stats.underflow)
                    totals.max_abs = max(totals.max_abs, float(stats.max_abs))
                if above:
                    totals.above += above
                    offenders.append(name)
        except SafetensorError as exc:
            raise CheckpointError(f"{file}: not a readable safetensors file ({exc})") from exc


def _plan_folder(folder: Path) -> tuple[dict[Path, list[str] | None], list[SkippedFile]]:
    """Which files of a model folder to read (with the tensors the index expects) and to skip."""
    try:
        entries = sorted(p for p in folder.iterdir() if p.is_file())
    except OSError as exc:
        raise CheckpointError(f"{folder}: cannot list the folder ({exc})") from exc
    skipped = [
        SkippedFile(p, NOT_INSPECTED[p.suffix.lower()])
        for p in entries
        if p.suffix.lower() in NOT_INSPECTED
    ]
    safetensors_files = [p for p in entries if p.suffix == ".safetensors"]
    indexes = [p for p in entries if p.name.endswith(_INDEX_SUFFIX)]
    if not indexes:
        return dict.fromkeys(safetensors_files), skipped
    # A sharded checkpoint is what its index names; other .safetensors files beside it (a
    # consolidated copy, an adapter) would count the same weights twice.
    plan: dict[Path, list[str] | None] = {}
    for index in indexes:
        for shard, names in _index_shards(index).items():
            plan.setdefault(shard, []).extend(names)  # type: ignore[union-attr]
    skipped.extend(
        SkippedFile(p, f"not inspected: not named in {', '.join(i.name for i in indexes)}")
        for p in safetensors_files
        if p not in plan
    )
    return plan, skipped


def inspect_checkpoint(path: str | Path, *, count_out_of_range: bool = False) -> CheckpointReport:
    """Report the stored and declared precision of a checkpoint, without building the model.

    ``path`` is a ``.safetensors`` file or a Hugging Face model folder (its ``config.json``, its
    ``*.safetensors`` files, or the shards a ``*.safetensors.index.json`` names; subfolders are
    not searched). Only headers are read unless ``count_out_of_range`` is true; then every
    floating-point tensor is read, one slice of rows at a time, to count the weights above fp16's
    max and the nonzero ones below its smallest subnormal. Pickle files are listed as skipped and
    never opened. Raises :class:`CheckpointError` naming the file for a missing path, a corrupt or
    truncated safetensors file, an index naming a missing shard, or a malformed JSON file.
    """
    if not isinstance(path, (str, Path)):
        raise TypeError(
            f"inspect_checkpoint: path must be a str or Path, got {type(path).__name__}"
        )
    root = Path(path)
    config_dtype, config_names = None, ()
    if root.is_dir():
        config = root / "config.json"
        if config.is_file():
            config_dtype, config_names = _read_config(config)
        plan, skipped = _plan_folder(root)
        if not plan and not skipped:
            raise CheckpointError(
                f"{root}: no .safetensors or other checkpoint files in the folder"
            )
    elif root.is_file():
        suffix = root.suffix.lower()
        if suffix == ".safetensors":
            plan, skipped = {root: None}, []
        elif suffix in NOT_INSPECTED:
            plan, skipped = {}, [SkippedFile(root, NOT_INSPECTED[suffix])]
        else:
            raise CheckpointError(f"{root}: not a .safetensors file or a model folder")
    else:
        raise CheckpointError(f"{root}: no such file or folder")

    totals = _Totals(tensors={}, elements={})
    offenders: list[str] = []
    for file, expected in plan.items():
        _read_file(file, expected, totals, count_out_of_range, offenders)
    stored = tuple(
        sorted(
            (DtypeCount(d, totals.tensors[d], totals.elements[d]) for d in totals.tensors),
            key=lambda c: (-c.elements, c.dtype),
        )
    )
    return CheckpointReport(
        path=root,
        config_dtype=config_dtype,
        config_names=config_names,
        stored_dtypes=stored,
        files=tuple(plan),
        skipped=tuple(skipped),
        above_fp16_max=totals.above if count_out_of_range else None,
        below_fp16_subnormal=totals.below if count_out_of_range else None,
        max_abs=totals.max_abs if count_out_of_range else None,
        tensors_above_fp16_max=tuple(offenders),
    )
