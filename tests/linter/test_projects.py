"""Multi-module projects: findings that need another file, the same whether the project or the
one file is linted.

Each folder of ``fixtures/projects`` is a small project (copied to a temporary folder with a
``pyproject.toml`` at its root, so that folder is the project root). A line that must be
reported ends with ``# expect: AMPnnn``; every other line of every file must stay silent.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from linter._engine import PARALLEL_MIN_FILES
from linter.api import lint_paths

PROJECTS = Path(__file__).parent / "fixtures" / "projects"
EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)$")
#: Projects without markers are a folder of their own, linted without one (test_project_roots.py).
WITHOUT_MARKERS = PROJECTS / "without_markers"
FOLDERS = sorted(path for path in PROJECTS.iterdir() if path.is_dir() and path != WITHOUT_MARKERS)


def copied(folder: Path, tmp_path: Path) -> Path:
    root = tmp_path / folder.name
    shutil.copytree(folder, root)
    if not (root / "pyproject.toml").exists():
        (root / "pyproject.toml").write_text("", encoding="utf-8")
    return root


def expected(root: Path) -> set[tuple[str, int, str]]:
    found = set()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = EXPECT.search(line)
            if match:
                found.update((relative, number, c.strip()) for c in match.group(1).split(","))
    return found


def findings(root: Path, paths: list[Path]) -> set[tuple[str, int, str]]:
    result = lint_paths([str(p) for p in paths], select=["ALL"], jobs=1)
    assert not result.errors, result.errors
    return {
        (Path(d.path).resolve().relative_to(root.resolve()).as_posix(), d.line, d.code)
        for d in result.diagnostics
    }


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda path: path.name)
def test_the_project_reports_exactly_the_marked_lines(folder: Path, tmp_path: Path) -> None:
    root = copied(folder, tmp_path)
    assert findings(root, [root]) == expected(root)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda path: path.name)
def test_each_file_alone_reports_what_the_project_run_reports_for_it(
    folder: Path, tmp_path: Path
) -> None:
    root = copied(folder, tmp_path)
    wanted = expected(root)
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        mine = {item for item in wanted if item[0] == relative}
        assert findings(root, [path]) == mine, relative


def _marked(folder: Path) -> list[tuple[Path, str]]:
    """(folder, code) for each code a line of the project is marked with and for the rule the
    project is named after (a negative twin: that rule alone must stay silent too), AMP100 left
    out: it judges only the codes of the rules that ran, so a run of AMP100 alone judges none."""
    codes = {code for _path, _line, code in expected(folder)} | {folder.name[:6].upper()}
    return [(folder, code) for code in sorted(codes - {"AMP100"})]


@pytest.mark.parametrize(
    ("folder", "code"),
    [pair for folder in FOLDERS for pair in _marked(folder)],
    ids=lambda value: value.name if isinstance(value, Path) else value,
)
def test_a_run_of_one_rule_reports_what_the_run_of_every_rule_reports_for_it(
    folder: Path, code: str, tmp_path: Path
) -> None:
    # `select = ["AMP008"]` (or `--select AMP008`) once summarised none of a project where no
    # file passed AMP008's own pre-filter on its text alone, so the findings whose evidence is
    # in another module were lost.
    root = copied(folder, tmp_path)
    wanted = {item for item in expected(root) if item[2] == code}
    for paths in [[root]] + [[root / relative] for relative in sorted({w[0] for w in wanted})]:
        result = lint_paths([str(p) for p in paths], select=[code], jobs=1)
        assert not result.errors, result.errors
        found = {
            (Path(d.path).resolve().relative_to(root.resolve()).as_posix(), d.line, d.code)
            for d in result.diagnostics
        }
        assert found == {w for w in wanted if paths == [root] or root / w[0] == paths[0]}


def test_every_rule_has_a_positive_and_a_negative_project() -> None:
    names = [folder.name for folder in FOLDERS]
    codes = {name.split("_")[0] for name in names}
    for code in codes:
        assert any(n.startswith(f"{code}_pos_") for n in names), code
        assert any(n.startswith(f"{code}_neg_") for n in names), code


def test_many_projects_in_worker_processes_report_what_each_reports_alone(tmp_path: Path) -> None:
    # Every fixture project in one run with two workers: each worker must lint against the
    # projects the main process built. (A forked worker once emptied them while "setting" them
    # from the very dict it held: on 96 real repositories every cross-module finding of a
    # whole-tree run was lost, while one file alone still had them.)
    roots = [copied(folder, tmp_path) for folder in FOLDERS]
    assert sum(1 for root in roots for _ in root.rglob("*.py")) >= 2 * PARALLEL_MIN_FILES
    result = lint_paths([str(tmp_path)], select=["ALL"], jobs=2)
    assert not result.errors, result.errors
    found = {
        (Path(d.path).resolve().relative_to(tmp_path.resolve()).as_posix(), d.line, d.code)
        for d in result.diagnostics
    }
    wanted = {
        (f"{root.name}/{relative}", line, code)
        for root in roots
        for relative, line, code in expected(root)
    }
    assert found == wanted


def test_two_repositories_vendoring_the_same_files_are_each_cached(tmp_path: Path) -> None:
    # Real trees vendor the same modules (mmcv in both ControlNet and LAVIS, ``ldm`` in three
    # diffusion repositories). A result depends on the project around the file, so identical
    # bytes in two projects are two results: keyed by content alone, each copy's entry named
    # the other project's summaries, and every warm run linted both copies again.
    folder = PROJECTS / "amp001_pos_engine_and_main"
    roots = [copied(folder, tmp_path / name) for name in ("first", "second")]
    cache = tmp_path / "cache"
    cold = lint_paths([str(tmp_path)], select=["ALL"], jobs=1, cache_dir=cache)
    warm = lint_paths([str(tmp_path)], select=["ALL"], jobs=1, cache_dir=cache)
    assert cold.files_parsed > 0
    assert warm.files_parsed == 0
    assert warm.files_cached == warm.files_checked
    assert warm.diagnostics == cold.diagnostics
    for root in roots:
        mine = [d for d in warm.diagnostics if Path(d.path).resolve().is_relative_to(root)]
        assert mine, root
        for diagnostic in mine:
            for related in diagnostic.related:
                assert Path(related.path).resolve().is_relative_to(root.resolve()), related
