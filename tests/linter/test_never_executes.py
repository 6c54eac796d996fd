"""Linting is static: the linted code is never imported or run, whatever it would do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from lint_dummies import DUMMY_RULES

from linter import lint_paths
from linter.rules import ALL_RULES

# Would leave a marker file and end the process if anything imported or executed it.
HOSTILE = """\
import os, pathlib, sys
pathlib.Path(os.environ["AMP_LINT_MARKER"]).write_text("executed")
sys.exit(3)
print("unreachable")
# every rule's trigger words, so that every rule parses and visits this file: {triggers}
"""


def write_hostile(folder: Path) -> Path:
    triggers = sorted({word for rule in (*ALL_RULES, *DUMMY_RULES) for word in rule.triggers})
    path = folder / "hostile.py"
    path.write_text(HOSTILE.format(triggers=" ".join(triggers)))
    (folder / "__init__.py").write_text("import hostile\n")
    return path


def test_cli_does_not_execute_the_linted_file(tmp_path: Path) -> None:
    path = write_hostile(tmp_path)
    marker = tmp_path / "marker"
    result = subprocess.run(
        [sys.executable, "-m", "linter", str(tmp_path), "--exit-zero"],
        env={**os.environ, "AMP_LINT_MARKER": str(marker)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    assert path.exists()


def test_api_parses_but_does_not_run_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_hostile(tmp_path)
    marker = tmp_path / "marker"
    monkeypatch.setenv("AMP_LINT_MARKER", str(marker))
    result = lint_paths([tmp_path], rules=DUMMY_RULES, jobs=1)
    assert [d.line for d in result.diagnostics if d.code == "TST001"] == [4]
    assert result.files_parsed == 2
    assert not marker.exists()
