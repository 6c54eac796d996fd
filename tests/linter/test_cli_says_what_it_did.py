"""The command line never claims a check it did not make: empty rule selections, folders without
Python files, files that failed, misspelt or unreadable configuration, stdin and excludes."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from linter.cli import main

pytestmark = pytest.mark.usefixtures("dummy_registry")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print(1)\nprint(2)\n")
    return tmp_path


def test_two_findings_are_errors_plural(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["."]) == 1
    assert capsys.readouterr().err == "Found 2 errors.\n"


def test_a_file_that_failed_is_never_all_checks_passed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "train.py").write_text("x = 1\n")
    (project / "broken.py").write_text("print(\n")
    assert main(["."]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "No findings; 1 file could not be checked."
    assert "All checks passed!" not in err


def test_findings_and_failed_files_are_both_counted(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "broken.py").write_text("print(\n")
    (project / "bad.py").write_bytes(b"print(1)\n\xff\xfe\n")
    assert main(["."]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "Found 2 errors; 2 files could not be checked."
    )


@pytest.mark.parametrize(
    "argv",
    [["--select", "AMP9"], ["--select", ""], ["--ignore", "TST"], ["--ignore", "ALL"]],
    ids=["unmatched-prefix", "empty", "ignore-everything", "ignore-all"],
)
def test_a_selection_of_no_rule_is_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main([*argv, "."]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("amp-lint: error: no rule selected (")
    assert err.count("\n") == 1


def test_an_empty_selection_in_the_config_is_a_usage_error_too(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text("[tool.amp-lint]\nselect = []\n")
    assert main(["."]) == 2
    assert capsys.readouterr().err.startswith("amp-lint: error: no rule selected (select [],")


def test_a_folder_without_python_files_says_so(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "index.md").write_text("# nothing to lint\n")
    assert main(["docs"]) == 0
    assert capsys.readouterr().err == (
        "amp-lint: warning: No Python files found under the given paths\nAll checks passed!\n"
    )


@pytest.mark.parametrize("table", ["amp_lint", "amplint", "AMP-Lint"])
def test_a_misspelt_table_is_named_with_the_right_spelling(
    project: Path, capsys: pytest.CaptureFixture[str], table: str
) -> None:
    (project / "pyproject.toml").write_text(f"[tool.{table}]\nignore = ['TST001']\n")
    assert main(["."]) == 1  # not read: the findings are still there
    assert capsys.readouterr().err.splitlines()[0] == (
        f"amp-lint: warning: {project / 'pyproject.toml'}: [tool.{table}] is not read; "
        "the table is [tool.amp-lint]"
    )


def test_a_misspelt_table_in_an_explicit_config_says_why_it_is_missing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "ruff.toml").write_text("[tool.amp_lint]\nignore = ['TST001']\n")
    assert main(["--config", "ruff.toml", "."]) == 2
    assert capsys.readouterr().err == (
        "amp-lint: error: ruff.toml: no [tool.amp-lint] table ([tool.amp_lint] is misspelt)\n"
    )


def test_an_unreadable_pyproject_is_one_line_and_exit_2(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Running as root, chmod cannot make a file unreadable: fail the read itself.
    pyproject = project / "pyproject.toml"
    pyproject.write_text("[tool.amp-lint]\n")
    real_read_bytes = Path.read_bytes

    def read_bytes(path: Path) -> bytes:
        if path.name == "pyproject.toml":
            raise PermissionError(13, "Permission denied")
        return real_read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    assert main(["."]) == 2
    assert capsys.readouterr().err == (
        f"amp-lint: error: {pyproject}: cannot read: Permission denied\n"
    )


def test_force_exclude_is_honoured_for_stdin(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text("[tool.amp-lint]\nextend-exclude = ['gen']\n")
    source = b"print(3)\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(source)))
    assert main(["-", "--stdin-filename", "gen/out.py", "--force-exclude"]) == 0
    assert capsys.readouterr().out == ""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(source)))
    assert main(["-", "--stdin-filename", "gen/out.py"]) == 1  # named: linted without it
    assert capsys.readouterr().out == "gen/out.py:1:1: TST001 print called\n"


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_machine_formats_include_files_that_failed(
    project: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    (project / "broken.py").write_text("print(\n")
    assert main(["--format", fmt, "."]) == 2
    log = json.loads(capsys.readouterr().out)
    if fmt == "json":
        failed = [record for record in log if record["code"] is None]
        assert [record["filename"] for record in failed] == ["broken.py"]
        assert failed[0]["message"].startswith("cannot parse: ")
        assert [record["code"] for record in log] == ["TST001", "TST001", None]
    else:
        (invocation,) = log["runs"][0]["invocations"]
        (notification,) = invocation["toolExecutionNotifications"]
        assert notification["message"]["text"].startswith("cannot parse: ")
        location = notification["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == "broken.py"
