"""One parse per text: a summary and a lint of one file share the tree, never the analyses."""

from __future__ import annotations

import shutil
from pathlib import Path

import libcst as cst
import pytest

import linter.rules
from linter._engine import lint_text
from linter._parse import parse_module
from linter._rule import ModuleContext, Rule
from linter.model.assembly._project_build import SummaryStore, build_project
from linter.model.assembly._summary_making import summarise_file
from linter.model.project._project import Project
from linter.model.syntax._module_index import module_index

PROJECTS = Path(__file__).parent / "fixtures" / "projects"
PROJECT = PROJECTS / "amp001_pos_engine_and_main"


def test_the_same_text_is_parsed_once_and_other_text_again() -> None:
    first = parse_module("x = 1\n")
    assert parse_module("x = 1\n") is first
    other = parse_module("y = 2\n")
    assert other is not first
    assert isinstance(other.body[0], cst.SimpleStatementLine)


def test_two_contexts_of_one_tree_get_their_own_index() -> None:
    text = "def step(scaler):\n    scaler.step(opt)\n"
    module = parse_module(text)
    alone = ModuleContext("m.py", text, module)
    index = module_index(alone)
    other = ModuleContext("m.py", text, module)
    assert module_index(other) is not index
    assert module_index(other).context is other
    assert module_index(other) is module_index(other)


def _project_of(root: Path) -> tuple[list[str], list[Rule], Project]:
    """The files under ``root``, every rule, and the project they make (summaries unstored)."""
    files = sorted(str(path) for path in root.rglob("*.py"))
    rules = [rule() for rule in linter.rules.ALL_RULES]
    project = build_project(
        str(root),
        files,
        lambda text: any(rule.wants(text) for rule in rules),
        SummaryStore(None, "test"),
        workers=1,
        linted=files,
    )
    return files, rules, project


@pytest.mark.parametrize(
    "folder", sorted(p for p in PROJECTS.iterdir() if p.is_dir()), ids=lambda p: p.name
)
def test_a_file_summarised_and_then_linted_still_sees_its_project(
    folder: Path, tmp_path: Path
) -> None:
    # The summary analyses the module alone; a lint right after it (same text, so the same
    # tree) must analyse it with the project around it, as after a parse of its own.
    root = tmp_path / "project"
    shutil.copytree(folder, root)
    files, rules, project = _project_of(root)
    for path in files:
        text = Path(path).read_text(encoding="utf-8")
        parse_module("pass\n")  # another text last: the lint parses its own tree
        fresh = lint_text(path, text, rules, project).diagnostics
        summarise_file((path, text.encode(), True))
        assert parse_module(text) is parse_module(text)
        shared = lint_text(path, text, rules, project).diagnostics
        assert shared == fresh


def test_the_engine_fixture_finding_needs_the_project(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(PROJECT, root)
    _, rules, project = _project_of(root)
    engine = str(root / "engine.py")
    text = Path(engine).read_text(encoding="utf-8")
    summarise_file((engine, text.encode(), True))
    assert lint_text(engine, text, rules, project).diagnostics
    assert not lint_text(engine, text, rules).diagnostics
