"""The multi-module fixtures with real config files (DeepSpeed JSON, TrainingArguments JSON,
Hydra / accelerate / Lightning CLI YAML): linted as a folder and file by file, each reports
exactly its ``# expect:`` lines (the project harness's contract, for the fixtures whose findings
one module's own model already sees)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from linter.api import lint_paths

PROJECTS = Path(__file__).resolve().parents[1] / "fixtures" / "projects"
EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)$")
#: The config fixtures; the cross-module ones wait for the project-wide model.
SINGLE_MODULE_PROJECTS = sorted(
    path
    for prefix in ("amp002", "amp008", "amp010", "amp014")
    for path in PROJECTS.glob(f"{prefix}_*")
    if path.is_dir() and "cross_module" not in path.name
)


def expected_in(folder: Path) -> set[tuple[str, int, str]]:
    found = set()
    for path in sorted(folder.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = EXPECT.search(line)
            if match:
                found |= {(path.name, number, c.strip()) for c in match.group(1).split(",")}
    return found


@pytest.mark.parametrize("folder", SINGLE_MODULE_PROJECTS, ids=lambda path: path.name)
def test_config_project_fixtures_report_exactly_the_marked_lines(folder: Path) -> None:
    whole = lint_paths([folder], jobs=1)
    assert not whole.errors
    found = {(Path(d.path).name, d.line, d.code) for d in whole.diagnostics}
    assert found == expected_in(folder)
    alone = {
        (Path(d.path).name, d.line, d.code)
        for path in sorted(folder.rglob("*.py"))
        for d in lint_paths([path], jobs=1).diagnostics
    }
    assert alone == found


def test_there_are_config_fixtures_of_every_kind() -> None:
    names = {path.name for path in SINGLE_MODULE_PROJECTS}
    kinds = ("deepspeed_json", "training_arguments_json", "accelerate_yaml", "lightning_cli_yaml")
    for shape in (*kinds, "hydra_yaml"):
        assert any(f"_pos_{shape}" in name for name in names), shape
        assert any(f"_neg_{shape}" in name for name in names), shape
