"""``python -m scaler inspect``: the fp16 verdict on tiny checkpoints the tests write."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from scaler.cli import (
    EXIT_ERROR,
    EXIT_FP16_OK,
    EXIT_NOT_FP16_SAFE,
    build_inspect_parser,
    build_parser,
    main,
)


def _folder(path: Path, tensors: dict[str, torch.Tensor], config: dict | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"))
    if config is not None:
        (path / "config.json").write_text(json.dumps(config))
    return path


def _weights(dtype: torch.dtype, n: int = 16) -> torch.Tensor:
    return torch.linspace(-1, 1, n).to(dtype)


def _inspect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["inspect", *args])
    out, err = capsys.readouterr()
    return code, out, err


class Payload:
    """Unpickling this runs code: it writes the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.write_text, (self.marker, "unpickled!"))


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (torch.bfloat16, EXIT_NOT_FP16_SAFE),
        (torch.float16, EXIT_FP16_OK),
        (torch.float32, EXIT_FP16_OK),
    ],
)
def test_stored_dtype_decides_without_a_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dtype: torch.dtype, expected: int
) -> None:
    folder = _folder(tmp_path / "model", {"w": _weights(dtype), "b": _weights(dtype, 4)})
    code, out, _ = _inspect(capsys, str(folder))
    assert code == expected
    name = str(dtype).removeprefix("torch.")
    assert f"stored {name}: 2 tensor(s), 20 element(s)" in out
    if expected == EXIT_NOT_FP16_SAFE:
        assert "most floating-point weights are stored in bfloat16 (20 of 20)" in out
    else:
        assert "fp16 training: no evidence against it" in out
        assert "check_fp16_compat" in out


def test_mixed_dtypes_are_listed_most_elements_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(
        tmp_path / "model",
        {"big": _weights(torch.float32, 64), "norm": _weights(torch.bfloat16, 8)},
    )
    code, out, _ = _inspect(capsys, str(folder), "--json")
    data = json.loads(out)
    assert [d["dtype"] for d in data["stored_dtypes"]] == ["float32", "bfloat16"]
    assert data["fp16_advisable"] is True
    assert code == EXIT_FP16_OK


def test_config_declaring_bfloat16_is_not_fp16_safe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(
        tmp_path / "model",
        {"w": _weights(torch.float32)},
        {"model_type": "llama", "dtype": "bfloat16"},
    )
    code, out, _ = _inspect(capsys, str(folder), "--json")
    data = json.loads(out)
    assert code == EXIT_NOT_FP16_SAFE
    assert data["config_dtype"] == "bfloat16"
    assert data["bf16_checkpoint"] is True
    assert data["reasons"] == ["config.json declares dtype bfloat16: the model was saved in bf16"]
    assert data["family"] is None


def test_a_bf16_pretrained_family_is_named_with_its_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(tmp_path / "flan-t5-small", {"w": _weights(torch.float32)})
    code, out, _ = _inspect(capsys, str(folder), "--json")
    data = json.loads(out)
    assert code == EXIT_NOT_FP16_SAFE
    assert data["family"]["name"] == "FLAN-T5"
    assert data["family"]["evidence"]
    assert data["bf16_checkpoint"] is False


def test_family_from_the_config_model_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(tmp_path / "model", {"w": _weights(torch.float32)}, {"model_type": "gemma3"})
    code, out, _ = _inspect(capsys, str(folder))
    assert code == EXIT_NOT_FP16_SAFE
    assert "family: Gemma 3 (bf16-pretrained)" in out


def test_weights_beyond_fp16_are_counted_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(tmp_path / "model", {"w": torch.tensor([1.0, 1e5, -2e5, 0.5])})
    assert _inspect(capsys, str(folder))[0] == EXIT_FP16_OK
    code, out, _ = _inspect(capsys, str(folder), "--count-out-of-range")
    assert code == EXIT_NOT_FP16_SAFE
    assert "2 weight(s) exceed fp16's max 65504 (first in w)" in out


def test_a_truncated_shard_is_unreadable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(tmp_path / "model", {"w": _weights(torch.bfloat16, 1024)})
    shard = folder / "model.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])
    code, out, err = _inspect(capsys, str(folder))
    assert code == EXIT_ERROR
    assert out == ""
    assert err.startswith("python -m scaler inspect: error: ")
    assert "model.safetensors" in err
    assert len(err.strip().splitlines()) == 1


def test_a_missing_path_is_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _inspect(capsys, str(tmp_path / "nope"))
    assert code == EXIT_ERROR
    assert "no such file or folder" in err


def test_a_pickle_is_listed_and_never_unpickled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    marker = tmp_path / "marker"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Payload(marker)))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a pickle was loaded")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(torch, "load", refuse)
    code, _, err = _inspect(capsys, str(folder))
    assert code == EXIT_ERROR
    assert "pytorch_model.bin: not inspected: pickle" in err
    assert not marker.exists()

    save_file({"w": _weights(torch.float16)}, str(folder / "model.safetensors"))
    code, out, _ = _inspect(capsys, str(folder))
    assert code == EXIT_FP16_OK
    assert "skipped pytorch_model.bin: not inspected: pickle" in out
    assert not marker.exists()


def test_python_dash_m_scaler_runs_the_command(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "model", {"w": _weights(torch.bfloat16)}, {"dtype": "bfloat16"})
    marker = tmp_path / "marker"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Payload(marker)))
    result = subprocess.run(
        [sys.executable, "-m", "scaler", "inspect", str(folder), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == EXIT_NOT_FP16_SAFE, result.stderr
    assert json.loads(result.stdout)["skipped"][0]["reason"] == "not inspected: pickle"
    assert not marker.exists()


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect"])
    assert exit_info.value.code == EXIT_ERROR
    assert "PATH" in capsys.readouterr().err


def test_the_documented_parser_is_the_one_the_command_uses() -> None:
    documented = {a.dest for a in build_inspect_parser()._actions}
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    used = {a.dest for a in commands.choices["inspect"]._actions}
    assert documented == used == {"help", "path", "json", "count_out_of_range"}
