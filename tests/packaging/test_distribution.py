"""The wheel and sdist ship both import packages and nothing from tests/ or docs builds."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dist_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def wheel_names(dist_dir: Path) -> list[str]:
    (wheel,) = dist_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def sdist_names(dist_dir: Path) -> list[str]:
    (sdist,) = dist_dir.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        # Drop the leading "ampscale-X.Y.Z/" folder.
        return [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]


@pytest.mark.parametrize("lister", [wheel_names, sdist_names], ids=["wheel", "sdist"])
def test_distribution_contains_both_packages(dist_dir: Path, lister) -> None:
    names = lister(dist_dir)
    assert "scaler/__init__.py" in names
    assert "linter/__init__.py" in names
    assert "linter/cli.py" in names


@pytest.mark.parametrize("lister", [wheel_names, sdist_names], ids=["wheel", "sdist"])
def test_distribution_has_no_tests_or_build_output(dist_dir: Path, lister) -> None:
    names = lister(dist_dir)
    unwanted = [
        name
        for name in names
        if name.startswith(("tests/", "docs/", "examples/", "benchmarks/"))
        or "/_build/" in name
        or "__pycache__" in name
    ]
    assert unwanted == []


def test_wheel_declares_console_script(dist_dir: Path) -> None:
    (wheel,) = dist_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (entry_points,) = [n for n in archive.namelist() if n.endswith("entry_points.txt")]
        text = archive.read(entry_points).decode()
    assert "amp-lint = linter.cli:main" in text
