"""`amp-lint server` on the command line: the subcommand, its options, and what it says when
the ``server`` extra is not installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from linter.cli import build_server_parser, main


def test_without_pygls_the_command_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    for name in [name for name in sys.modules if name.partition(".")[0] == "pygls"] or ["pygls"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "linter.server", raising=False)
    assert main(["server"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert "ampscale[server]" in error
    assert "pip install '.[server]'" in error
    assert "pygls is not installed" in error


def test_the_debounce_is_whole_milliseconds(capsys: pytest.CaptureFixture[str]):
    assert build_server_parser().parse_args(["--debounce", "0"]).debounce == 0
    with pytest.raises(SystemExit) as exit_:
        main(["server", "--debounce", "-5"])
    assert exit_.value.code == 2
    assert "--debounce: must be at least 0, got -5" in capsys.readouterr().err


def test_a_folder_named_server_is_linted_as_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # "server" in first place starts the server; elsewhere, or spelt ./server, it is a path.
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "train.py").write_text(
        "for batch in loader:\n    print(scaler.get_scale())\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["./server", "--no-cache"]) == 1
    assert main(["--no-cache", "server"]) == 1
    assert capsys.readouterr().out.count("AMP001") == 2
