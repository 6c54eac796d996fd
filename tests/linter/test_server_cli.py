"""`amp-lint server` on the command line: the subcommand, its options, and what it says when
the ``server`` extra is not installed."""

from __future__ import annotations

import sys

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
    assert "pygls is not installed" in error


def test_the_debounce_is_whole_milliseconds(capsys: pytest.CaptureFixture[str]):
    assert build_server_parser().parse_args(["--debounce", "0"]).debounce == 0
    with pytest.raises(SystemExit) as exit_:
        main(["server", "--debounce", "-5"])
    assert exit_.value.code == 2
    assert "--debounce: must be at least 0, got -5" in capsys.readouterr().err


def test_server_is_the_subcommand_only_in_first_place(capsys: pytest.CaptureFixture[str]):
    # "server" later on is a path like any other.
    assert main(["--no-cache", "--select", "AMP001", "--", "server"]) == 2
    assert "server" in capsys.readouterr().err
