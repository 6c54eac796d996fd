"""The installed `amp-lint` entry points start and answer --version / --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import linter

SCRIPT = Path(sys.executable).with_name("amp-lint")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def test_console_script_prints_version() -> None:
    result = run(str(SCRIPT), "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"amp-lint {linter.__version__}"


def test_console_script_prints_help() -> None:
    result = run(str(SCRIPT), "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: amp-lint")


def test_python_dash_m_linter_matches_console_script() -> None:
    result = run(sys.executable, "-m", "linter", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"amp-lint {linter.__version__}"
