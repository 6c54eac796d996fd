"""inspect_checkpoint: declared and stored precision of a checkpoint, never unpickling anything."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import scaler._checkpoint_inspect as checkpoint_inspect
from scaler import CheckpointError, DtypeCount, SkippedFile, inspect_checkpoint

# 3 values above 65504, 2 nonzero ones below 2**-24, the rest fit fp16.
BF16_VALUES = [1e5, -2e5, 7e4, 1e-9, -3e-10, 0.0, 1.0, 60000.0]


def _bf16_file(path: Path) -> Path:
    save_file(
        {
            "embed.weight": torch.tensor(BF16_VALUES, dtype=torch.bfloat16).reshape(2, 4),
            "norm.weight": torch.ones(3, dtype=torch.bfloat16),
            "position_ids": torch.arange(6),
        },
        str(path),
    )
    return path


def _write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _sharded_folder(folder: Path) -> Path:
    save_file(
        {"a.weight": torch.full((4, 4), 1e5, dtype=torch.bfloat16)}, str(folder / "s1.safetensors")
    )
    save_file(
        {"b.weight": torch.ones(2, 3, dtype=torch.bfloat16), "b.bias": torch.zeros(3)},
        str(folder / "s2.safetensors"),
    )
    _write_json(
        folder / "model.safetensors.index.json",
        {
            "metadata": {"total_size": 0},
            "weight_map": {
                "a.weight": "s1.safetensors",
                "b.weight": "s2.safetensors",
                "b.bias": "s2.safetensors",
            },
        },
    )
    _write_json(folder / "config.json", {"torch_dtype": "bfloat16"})
    return folder


class _OpensFileWhenUnpickled:
    """Unpickling this opens (creates) a file: the side effect that proves a load happened."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def test_stored_dtypes_of_a_single_file(tmp_path: Path) -> None:
    report = inspect_checkpoint(_bf16_file(tmp_path / "model.safetensors"))

    assert report.stored_dtypes == (
        DtypeCount("bfloat16", tensors=2, elements=11),
        DtypeCount("int64", tensors=1, elements=6),
    )
    assert report.files == (tmp_path / "model.safetensors",)
    assert report.config_dtype is None
    assert report.above_fp16_max is None
    assert report.weights_fit_fp16 is None


def test_counting_finds_weights_outside_fp16(tmp_path: Path) -> None:
    report = inspect_checkpoint(_bf16_file(tmp_path / "model.safetensors"), count_out_of_range=True)

    assert report.above_fp16_max == 3
    assert report.below_fp16_subnormal == 2
    assert report.max_abs == pytest.approx(2e5, rel=1e-2)
    assert report.tensors_above_fp16_max == ("embed.weight",)
    assert report.weights_fit_fp16 is False
    assert report.bf16_checkpoint


def test_counting_in_small_chunks_gives_the_same_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.manual_seed(0)
    values = torch.randn(37, 11) * 3e4
    values[5, 3] = 1e-9
    expected_above = int((values.bfloat16().float().abs() > 65504).sum())
    save_file({"w": values.bfloat16()}, str(tmp_path / "w.safetensors"))
    reads: list[int] = []
    real_range_stats = checkpoint_inspect._range_stats

    def counting_range_stats(chunk: torch.Tensor) -> object:
        reads.append(chunk.numel())
        return real_range_stats(chunk)

    monkeypatch.setattr(checkpoint_inspect, "_CHUNK_ELEMENTS", 25)
    monkeypatch.setattr(checkpoint_inspect, "_range_stats", counting_range_stats)

    report = inspect_checkpoint(tmp_path / "w.safetensors", count_out_of_range=True)

    assert expected_above > 0
    assert report.above_fp16_max == expected_above
    assert report.below_fp16_subnormal == 1
    assert max(reads) <= 25
    assert sum(reads) == 37 * 11


def test_fp16_checkpoint_with_values_in_range_fits(tmp_path: Path) -> None:
    save_file(
        {"w": torch.tensor([1.0, -65504.0, 2.0**-24], dtype=torch.float16)},
        str(tmp_path / "m.safetensors"),
    )

    report = inspect_checkpoint(tmp_path / "m.safetensors", count_out_of_range=True)

    assert report.weights_fit_fp16 is True
    assert not report.bf16_checkpoint


def test_folder_reads_config_dtype_and_skips_pickles(tmp_path: Path) -> None:
    _bf16_file(tmp_path / "model.safetensors")
    _write_json(tmp_path / "config.json", {"model_type": "llama", "torch_dtype": "bfloat16"})
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
    (tmp_path / "training_args.pt").write_bytes(b"not read")

    report = inspect_checkpoint(tmp_path)

    assert report.config_dtype == "bfloat16"
    assert report.files == (tmp_path / "model.safetensors",)
    assert report.skipped == (
        SkippedFile(tmp_path / "pytorch_model.bin", "not inspected: pickle"),
        SkippedFile(tmp_path / "training_args.pt", "not inspected: pickle"),
    )


def test_newer_dtype_key_wins_over_torch_dtype(tmp_path: Path) -> None:
    _bf16_file(tmp_path / "model.safetensors")
    _write_json(tmp_path / "config.json", {"dtype": "float16", "torch_dtype": "bfloat16"})

    assert inspect_checkpoint(tmp_path).config_dtype == "float16"


def test_config_dtype_of_a_multimodal_text_model(tmp_path: Path) -> None:
    _bf16_file(tmp_path / "model.safetensors")
    _write_json(tmp_path / "config.json", {"text_config": {"torch_dtype": "bfloat16"}})

    assert inspect_checkpoint(tmp_path).config_dtype == "bfloat16"


def test_bf16_verdict_from_stored_dtypes_without_config(tmp_path: Path) -> None:
    save_file({"w": torch.ones(4, dtype=torch.float32)}, str(tmp_path / "fp32.safetensors"))
    bf16 = _bf16_file(tmp_path / "bf16.safetensors")

    assert not inspect_checkpoint(tmp_path / "fp32.safetensors").bf16_checkpoint
    assert inspect_checkpoint(bf16).bf16_checkpoint


def test_sharded_folder_reads_the_shards_its_index_names(tmp_path: Path) -> None:
    folder = _sharded_folder(tmp_path)
    save_file({"a.weight": torch.ones(4, 4)}, str(folder / "consolidated.safetensors"))

    report = inspect_checkpoint(folder, count_out_of_range=True)

    assert report.files == (folder / "s1.safetensors", folder / "s2.safetensors")
    assert report.stored_dtypes == (
        DtypeCount("bfloat16", tensors=2, elements=22),
        DtypeCount("float32", tensors=1, elements=3),
    )
    assert report.above_fp16_max == 16
    assert report.tensors_above_fp16_max == ("a.weight",)
    assert [s.path.name for s in report.skipped] == ["consolidated.safetensors"]
    assert "not named in model.safetensors.index.json" in report.skipped[0].reason


def test_index_naming_a_missing_shard_is_an_error(tmp_path: Path) -> None:
    folder = _sharded_folder(tmp_path)
    (folder / "s2.safetensors").unlink()

    with pytest.raises(
        CheckpointError, match=r"model\.safetensors\.index\.json.*'s2\.safetensors'"
    ):
        inspect_checkpoint(folder)


def test_index_listing_a_tensor_its_shard_lacks_is_an_error(tmp_path: Path) -> None:
    folder = _sharded_folder(tmp_path)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["c.weight"] = "s1.safetensors"
    _write_json(folder / "model.safetensors.index.json", index)

    with pytest.raises(CheckpointError, match=r"s1\.safetensors.*'c\.weight'"):
        inspect_checkpoint(folder)


def test_index_without_weight_map_is_an_error(tmp_path: Path) -> None:
    folder = _sharded_folder(tmp_path)
    _write_json(folder / "model.safetensors.index.json", {"metadata": {}})

    with pytest.raises(CheckpointError, match=r"index\.json: no 'weight_map'"):
        inspect_checkpoint(folder)


def test_index_pointing_outside_the_folder_is_an_error(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    _bf16_file(tmp_path / "outside.safetensors")
    _write_json(
        folder / "model.safetensors.index.json",
        {"weight_map": {"embed.weight": "../outside.safetensors"}},
    )

    with pytest.raises(CheckpointError, match="outside the model folder"):
        inspect_checkpoint(folder)


def test_pickle_files_are_never_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    control = tmp_path / "control-marker"
    pickle.loads(pickle.dumps(_OpensFileWhenUnpickled(control)))
    assert control.exists(), "the payload must have a side effect when unpickled"

    marker = tmp_path / "unpickled-marker"
    payload = pickle.dumps(_OpensFileWhenUnpickled(marker))
    folder = tmp_path / "model"
    folder.mkdir()
    _bf16_file(folder / "model.safetensors")
    for name in ("pytorch_model.bin", "optimizer.pt", "rng_state.pth", "last.ckpt"):
        (folder / name).write_bytes(payload)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a pickle loader was called")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)

    report = inspect_checkpoint(folder, count_out_of_range=True)

    assert not marker.exists()
    assert {s.path.name: s.reason for s in report.skipped} == dict.fromkeys(
        ("last.ckpt", "optimizer.pt", "pytorch_model.bin", "rng_state.pth"), "not inspected: pickle"
    )


def test_a_single_pickle_file_is_skipped_not_read(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled-marker"
    (tmp_path / "model.bin").write_bytes(pickle.dumps(_OpensFileWhenUnpickled(marker)))

    report = inspect_checkpoint(tmp_path / "model.bin")

    assert report.files == ()
    assert report.skipped == (SkippedFile(tmp_path / "model.bin", "not inspected: pickle"),)
    assert not marker.exists()


def _truncate(data: bytes) -> bytes:
    return data[:-7]


def _garble_header(data: bytes) -> bytes:
    return data[:8] + b"}" * 20 + data[28:]


@pytest.mark.parametrize(
    "damage",
    [_truncate, _garble_header, lambda data: data[:5], lambda data: b""],
    ids=["truncated", "garbled-header", "shorter-than-header-size", "empty"],
)
def test_corrupt_safetensors_is_an_error_naming_the_file(tmp_path: Path, damage: object) -> None:
    good = _bf16_file(tmp_path / "good.safetensors").read_bytes()
    bad = tmp_path / "broken.safetensors"
    bad.write_bytes(damage(good))  # type: ignore[operator]

    with pytest.raises(CheckpointError, match=r"broken\.safetensors: not a readable safetensors"):
        inspect_checkpoint(bad)


def test_corrupt_shard_in_a_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    folder = _sharded_folder(tmp_path)
    shard = folder / "s2.safetensors"
    shard.write_bytes(_truncate(shard.read_bytes()))

    with pytest.raises(CheckpointError, match=r"s2\.safetensors"):
        inspect_checkpoint(folder)


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"nowhere: no such file or folder"):
        inspect_checkpoint(tmp_path / "nowhere")


def test_malformed_config_is_an_error_naming_it(tmp_path: Path) -> None:
    _bf16_file(tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text('{"torch_dtype": "bfloat16",')

    with pytest.raises(CheckpointError, match=r"config\.json: not a readable JSON file"):
        inspect_checkpoint(tmp_path)


def test_config_dtype_that_is_not_a_string_is_an_error(tmp_path: Path) -> None:
    _bf16_file(tmp_path / "model.safetensors")
    _write_json(tmp_path / "config.json", {"torch_dtype": 16})

    with pytest.raises(CheckpointError, match=r"config\.json: 'torch_dtype' must be a string"):
        inspect_checkpoint(tmp_path)


def test_folder_without_checkpoint_files_is_an_error(tmp_path: Path) -> None:
    _write_json(tmp_path / "config.json", {"torch_dtype": "bfloat16"})

    with pytest.raises(CheckpointError, match=r"no \.safetensors or other checkpoint files"):
        inspect_checkpoint(tmp_path)


def test_file_of_another_kind_is_an_error(tmp_path: Path) -> None:
    other = _write_json(tmp_path / "config.json", {})

    with pytest.raises(CheckpointError, match=r"config\.json: not a \.safetensors file"):
        inspect_checkpoint(other)


def test_path_of_the_wrong_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="path must be a str or Path, got int"):
        inspect_checkpoint(3)  # type: ignore[arg-type]


def test_checkpoint_error_is_a_value_error() -> None:
    assert issubclass(CheckpointError, ValueError)


def test_str_summarises_the_report(tmp_path: Path) -> None:
    folder = _sharded_folder(tmp_path)
    (folder / "pytorch_model.bin").write_bytes(b"x")

    text = str(inspect_checkpoint(folder, count_out_of_range=True))

    assert "config dtype: bfloat16" in text
    assert "stored bfloat16: 2 tensor(s), 22 element(s)" in text
    assert "skipped pytorch_model.bin: not inspected: pickle" in text
    assert "weights above fp16 max (65504): 16" in text
