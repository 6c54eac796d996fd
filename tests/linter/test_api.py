"""The Python API: results as frozen data, per-file-ignores, stdin, parallel equal to serial."""

from __future__ import annotations

import dataclasses
import io
import sys
from pathlib import Path

import pytest
from lint_dummies import DUMMY_RULES, PrintCall

import linter
from linter import LintError, Settings, lint_paths, lint_source
from linter._engine import PARALLEL_MIN_FILES


def test_lint_source_returns_diagnostics_as_data() -> None:
    (diagnostic,) = lint_source("print(1)\n", "train.py", rules=DUMMY_RULES)
    assert (diagnostic.path, diagnostic.line, diagnostic.column, diagnostic.code) == (
        "train.py",
        1,
        1,
        "TST001",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        diagnostic.line = 2  # type: ignore[misc]


def test_lint_source_honours_select_and_ignore() -> None:
    assert lint_source("print(1)\n", rules=DUMMY_RULES, ignore=["TST001"]) == []
    assert lint_source("print(1)\n", rules=DUMMY_RULES, select=["TST002"]) == []


def test_lint_source_raises_on_unparsable_source() -> None:
    with pytest.raises(LintError, match=r"^bad.py: cannot parse: "):
        lint_source("print(\n", "bad.py", rules=DUMMY_RULES)


def test_unknown_selector_in_the_api_is_an_error() -> None:
    with pytest.raises(ValueError, match="select: unknown rule selector 'NOPE'"):
        lint_source("x\n", rules=DUMMY_RULES, select=["NOPE"])


def test_rule_options_from_settings_reach_the_rule() -> None:
    settings = Settings(rule_options={"TST003": {"names": ["alpha"], "limit": 1}})
    found = lint_source("alpha = alpha\n", rules=DUMMY_RULES, settings=settings)
    assert [(d.code, d.column) for d in found] == [("TST003", 1)]


def test_with_no_rules_nothing_is_reported_or_parsed(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("print(1)\ndef broken(:\n")
    result = lint_paths([tmp_path], rules=())
    assert (result.diagnostics, result.errors, result.files_checked, result.files_parsed) == (
        (),
        (),
        1,
        0,
    )


def test_lint_paths_collects_findings_and_errors_from_all_files(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("print(1)\n")
    (tmp_path / "b.py").write_text("print(\n")
    (tmp_path / "c.py").write_bytes(b"print('\xff')\n")
    (tmp_path / "d.py").write_text("print(2)\n")
    result = lint_paths([tmp_path], rules=DUMMY_RULES, jobs=1)
    assert [Path(d.path).name for d in result.diagnostics] == ["a.py", "d.py"]
    assert [Path(e.path).name for e in result.errors] == ["b.py", "c.py"]
    assert result.files_checked == 4
    assert not result.ok


def test_per_file_ignores_use_globs_relative_to_the_config_root(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("print(1)\n")
    (tmp_path / "main.py").write_text("print(1)\n")
    settings = Settings(per_file_ignores=(("tests/**", ("TST001",)),), root=str(tmp_path))
    result = lint_paths([tmp_path], rules=DUMMY_RULES, settings=settings)
    assert [Path(d.path).name for d in result.diagnostics] == ["main.py"]


def test_stdin_uses_the_stdin_filename(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x = 1\nprint(x)\n")))
    settings = Settings(per_file_ignores=(("skip_*.py", ("TST001",)),), root=str(tmp_path))
    result = lint_paths(["-"], rules=DUMMY_RULES, settings=settings, stdin_filename="job.py")
    assert [(d.path, d.line) for d in result.diagnostics] == [("job.py", 2)]


def test_stdin_filename_selects_per_file_ignores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"print(1)\n")))
    settings = Settings(per_file_ignores=(("skip_*.py", ("TST001",)),))
    result = lint_paths(["-"], rules=DUMMY_RULES, settings=settings, stdin_filename="skip_me.py")
    assert result.diagnostics == ()
    assert result.files_checked == 1


def test_parallel_results_equal_serial_results(tmp_path: Path) -> None:
    count = PARALLEL_MIN_FILES + 8
    for index in range(count):
        body = "print(1)\n" * (index % 3) + ("boom = 1\n" if index % 7 == 0 else "")
        body += "def broken(:\n" if index % 11 == 5 else ""
        (tmp_path / f"m{index:03}.py").write_text(body or "print(0)\n")
    serial = lint_paths([tmp_path], rules=DUMMY_RULES, jobs=1)
    parallel = lint_paths([tmp_path], rules=DUMMY_RULES, jobs=2)
    assert parallel == serial
    assert serial.files_parsed == count
    assert len(serial.errors) == sum(1 for i in range(count) if i % 7 == 0 or i % 11 == 5)


def test_public_names_are_exported() -> None:
    for name in ("lint_source", "lint_paths", "LintResult", "FileError", "Settings"):
        assert name in linter.__all__
        assert hasattr(linter, name)


def test_dummy_rule_is_not_registered() -> None:
    assert PrintCall not in linter.rules.ALL_RULES


def test_rules_that_cannot_reach_workers_are_run_here(tmp_path: Path) -> None:
    class LocalPrint(PrintCall):  # defined in a function: cannot be pickled for a worker
        pass

    for index in range(PARALLEL_MIN_FILES + 1):
        (tmp_path / f"m{index:03}.py").write_text("print(1)\n")
    result = lint_paths([tmp_path], rules=(LocalPrint,), jobs=2)
    assert len(result.diagnostics) == PARALLEL_MIN_FILES + 1
    assert result.errors == ()
