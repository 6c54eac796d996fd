"""File discovery: what a folder walk collects and skips, and named files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from linter._discovery import Excluder, discover
from linter._patterns import PathPattern
from linter.config import DEFAULT_EXCLUDE


def touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def found(root: Path, *paths: str, exclude=DEFAULT_EXCLUDE, force: bool = False) -> list[str]:
    excluder = Excluder(exclude, str(root))
    result = discover([str(root / p) for p in paths] or [str(root)], excluder, force_exclude=force)
    assert result.errors == ()
    return sorted(os.path.relpath(path, root) for path in result.files)


def test_walk_collects_python_files_only(tmp_path: Path) -> None:
    touch(tmp_path, "a.py", "pkg/b.py", "stub.pyi", "notes.txt", "script")
    assert found(tmp_path) == ["a.py", "pkg/b.py"]


@pytest.mark.parametrize(
    "folder",
    [
        ".git",
        ".hg",
        ".venv",
        "venv",
        "build",
        "dist",
        "__pycache__",
        ".tox",
        ".nox",
        "node_modules",
        ".eggs",
        "pkg.egg-info",
    ],
)
def test_walk_skips_default_excluded_folders(tmp_path: Path, folder: str) -> None:
    touch(tmp_path, "a.py", f"{folder}/b.py", f"src/{folder}/c.py")
    assert found(tmp_path) == ["a.py"]


def test_walk_skips_any_virtualenv_by_its_pyvenv_cfg(tmp_path: Path) -> None:
    touch(tmp_path, "a.py", "myenv/lib/site.py", "myenv/pyvenv.cfg")
    assert found(tmp_path) == ["a.py"]


def test_extend_exclude_globs_are_relative_to_the_root(tmp_path: Path) -> None:
    touch(tmp_path, "a.py", "tests/fixtures/f.py", "src/tests/fixtures/g.py", "gen_x.py")
    exclude = (*DEFAULT_EXCLUDE, "tests/fixtures/**", "gen_*.py")
    assert found(tmp_path, exclude=exclude) == ["a.py", "src/tests/fixtures/g.py"]


def test_named_file_is_linted_even_if_excluded_or_not_dot_py(tmp_path: Path) -> None:
    touch(tmp_path, "build/gen.py", "tool")
    assert found(tmp_path, "build/gen.py", "tool") == ["build/gen.py", "tool"]


def test_force_exclude_applies_excludes_to_named_files(tmp_path: Path) -> None:
    touch(tmp_path, "build/gen.py", "ok.py")
    assert found(tmp_path, "build/gen.py", "ok.py", force=True) == ["ok.py"]


def test_folder_symlink_loop_is_not_followed(tmp_path: Path) -> None:
    touch(tmp_path, "pkg/a.py")
    (tmp_path / "pkg" / "again").symlink_to(tmp_path)
    (tmp_path / "self").symlink_to(tmp_path / "self")
    assert found(tmp_path) == ["pkg/a.py"]


def test_linked_python_file_is_collected(tmp_path: Path) -> None:
    touch(tmp_path, "real/a.py")
    (tmp_path / "link.py").symlink_to(tmp_path / "real" / "a.py")
    assert found(tmp_path) == ["link.py", "real/a.py"]


def test_missing_path_is_an_error_and_others_are_still_found(tmp_path: Path) -> None:
    touch(tmp_path, "a.py")
    excluder = Excluder(DEFAULT_EXCLUDE, str(tmp_path))
    result = discover([str(tmp_path / "nope"), str(tmp_path)], excluder, force_exclude=False)
    assert [e.message for e in result.errors] == ["no such file or directory"]
    assert result.files == (str(tmp_path / "a.py"),)


def test_same_file_named_twice_is_linted_once(tmp_path: Path) -> None:
    touch(tmp_path, "a.py")
    assert found(tmp_path, "a.py", "a.py", ".") == ["a.py"]


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("build", "build", True),
        ("build", "src/build", True),
        ("build", "builder", False),
        ("*.egg-info", "x/pkg.egg-info", True),
        ("tests/fixtures/**", "tests/fixtures", True),
        ("tests/fixtures/**", "tests/fixtures/deep/a.py", True),
        ("tests/fixtures/**", "src/tests/fixtures/a.py", False),
        ("**/gen/*.py", "a/b/gen/x.py", True),
        ("**/gen/*.py", "gen/x.py", True),
        ("src/*.py", "src/a/b.py", False),
        ("test_?.py", "test_1.py", True),
        ("[!a]*.py", "b.py", True),
        ("[!a]*.py", "a.py", False),
        ("./docs/", "docs", True),
    ],
)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert PathPattern(pattern).matches(path) is expected
