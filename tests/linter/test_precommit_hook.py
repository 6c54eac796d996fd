"""The pre-commit hook, run the way pre-commit runs it: ``entry`` + ``args`` + file names."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from linter.rules import ALL_RULES

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def hook_command() -> list[str]:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "amp-lint"
    assert hook["language"] == "python"
    assert hook["types_or"] == ["python", "jupyter"]
    entry = shlex.split(hook["entry"])
    # pre-commit runs the entry from the hook's own environment, where it is a console script.
    return [str(BIN / entry[0]), *entry[1:], *hook.get("args", [])]


def run_hook(cwd: Path, *files: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*hook_command(), *files], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.amp-lint]\nextend-exclude = ['vendored']\n")
    for index in range(40):
        (tmp_path / f"clean_{index}.py").write_text(f"value_{index} = {index}\n")
    (tmp_path / "vendored").mkdir()
    (tmp_path / "vendored" / "bad.py").write_bytes(b"x = '\xff'\n")
    return tmp_path


def test_many_clean_files_pass(repo: Path) -> None:
    files = sorted(p.name for p in repo.glob("clean_*.py"))
    result = run_hook(repo, *files)
    assert (result.returncode, result.stdout) == (0, ""), result.stderr


def test_a_broken_staged_file_fails_the_hook_and_is_named(repo: Path) -> None:
    (repo / "broken.py").write_bytes(b"print('\xff')\n")
    result = run_hook(repo, "clean_1.py", "broken.py", "clean_2.py")
    assert result.returncode == 2
    assert "amp-lint: error: broken.py: cannot decode as utf-8" in result.stderr


def test_excluded_staged_file_is_skipped(repo: Path) -> None:
    result = run_hook(repo, "clean_1.py", "vendored/bad.py")
    assert result.returncode == 0, result.stderr


def test_no_file_names_lints_the_working_folder(repo: Path) -> None:
    # pre-commit skips a hook with no matching files, unless `always_run`; then it passes no
    # names and the linter checks the current folder, as `amp-lint` alone does.
    assert run_hook(repo).returncode == 0
    (repo / "broken.py").write_bytes(b"x = 1\0\n")
    result = run_hook(repo)
    assert result.returncode == 2
    assert "broken.py: source contains a NUL byte" in result.stderr


def test_registered_rules_report_their_invalid_examples_through_the_hook(tmp_path: Path) -> None:
    # Every registered rule's own invalid examples must be found end to end (the hook runs the
    # default selection, so a rule that is off by default is left out).
    expected = set()
    for rule in (rule for rule in ALL_RULES if rule.default_enabled):
        for number, example in enumerate(rule.invalid):
            name = f"{rule.code.lower()}_{number}.py"
            (tmp_path / name).write_text(example.code)
            expected |= {(name, line, rule.code) for line in example.lines}
    result = run_hook(tmp_path, *sorted(p.name for p in tmp_path.glob("*.py")))
    reported = set()
    for line in result.stdout.splitlines():
        location, _, rest = line.partition(": ")
        path, row, _column = location.split(":")
        reported.add((path, int(row), rest.split()[0]))
    assert expected <= reported
    assert result.returncode == (1 if expected else 0), result.stderr


def test_a_staged_notebook_is_linted(tmp_path: Path) -> None:
    notebook = Path(__file__).parent / "fixtures" / "notebooks" / "flan_t5_fp16_t4.ipynb"
    (tmp_path / "t4.ipynb").write_bytes(notebook.read_bytes())
    result = run_hook(tmp_path, "t4.ipynb")
    assert result.returncode == 1, result.stderr
    assert "t4.ipynb:cell 5:9:55: AMP001 " in result.stdout
