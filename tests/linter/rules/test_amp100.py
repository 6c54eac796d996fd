"""AMP100 unused-noqa: which codes it judges, what its fix leaves, how it meets the engine."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from rule_runner import run_rule

from linter import fix_source, lint_paths, lint_source
from linter._engine import lint_text
from linter._rule import FindingsRule, ModuleContext
from linter.config import Settings
from linter.rules import ALL_RULES, GetScaleEveryStep, UnusedNoqa

LOOP = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    scaler.scale(model(batch)).backward()
    print(scaler.get_scale()){comment}
    scaler.step(optimizer)
    scaler.update()
"""


def messages(source: str) -> list[tuple[int, str]]:
    return [(line, message) for line, _col, message in run_rule(UnusedNoqa, source)]


def test_a_code_that_suppresses_a_finding_is_used() -> None:
    assert messages(LOOP.format(comment="  # noqa: AMP001")) == []


def test_the_code_goes_stale_once_the_bug_is_gone() -> None:
    fixed = LOOP.format(comment="  # noqa: AMP001").replace("print(scaler.get_scale())", "pass")
    assert messages(fixed) == [(6, "unused noqa: AMP001 has no finding here")]


def test_a_code_on_the_wrong_line_is_stale_and_the_finding_still_reported() -> None:
    source = LOOP.format(comment="").replace(
        "    scaler.step(optimizer)", "    scaler.step(optimizer)  # noqa: AMP001"
    )
    codes = sorted((d.line, d.code) for d in lint_source(source))
    assert codes == [(6, "AMP001"), (7, "AMP100")]


@pytest.mark.parametrize(
    "comment",
    ["  # noqa", "  # noqa: F841", "  # noqa: E501, W291", "  # NOQA:F401"],
    ids=["bare", "other-tool", "other-tools", "spelling"],
)
def test_bare_noqa_and_other_tools_codes_are_never_judged(comment: str) -> None:
    assert messages(f"x = 1{comment}\nimport torch\n") == []


def test_an_unknown_amp_code_is_reported() -> None:
    assert messages("import torch\nx = 1  # noqa: AMP099\n") == [
        (2, "unused noqa: AMP099 is no amp-lint code")
    ]


def test_codes_of_rules_that_did_not_run_are_left_alone() -> None:
    source = "import torch\nscaler = torch.amp.GradScaler()  # noqa: AMP009\n"
    # AMP009 not selected, or switched off for the file: unknown stays unknown.
    assert lint_source(source, select=["AMP100"]) == []
    settings = Settings(per_file_ignores=(("train.py", ("AMP009",)),))
    assert lint_source(source, "train.py", settings=settings) == []
    assert [d.code for d in lint_source(source, "other.py", settings=settings)] == ["AMP100"]


def test_a_rule_that_failed_does_not_make_its_codes_stale() -> None:
    class Broken(GetScaleEveryStep):
        def check(self, context: ModuleContext):
            raise RuntimeError("boom")

    source = LOOP.format(comment="  # noqa: AMP001")
    report = lint_text("t.py", source, [Broken(), UnusedNoqa()])
    assert [error.message for error in report.errors] == [
        "rule AMP001 (get-scale-every-step) failed: RuntimeError: boom"
    ]
    assert report.diagnostics == ()


def test_its_own_code_suppresses_it() -> None:
    assert lint_source("import torch\nx = 1  # noqa: AMP099, AMP100\n") == []
    assert lint_source("# amp-lint: noqa: AMP100\nimport torch\nx = 1  # noqa: AMP099\n") == []


def test_a_stale_code_with_a_used_one_reports_only_the_stale() -> None:
    source = LOOP.format(comment="  # noqa: AMP001, AMP009, F841")
    assert messages(source) == [(6, "unused noqa: AMP009 has no finding here")]
    fixed = fix_source(source).text
    assert fixed == LOOP.format(comment="  # noqa: AMP001, F841")


@pytest.mark.parametrize(
    ("comment", "after"),
    [
        ("  # noqa: AMP001", ""),
        ("  # noqa: AMP001, F841", "  # noqa: F841"),
        ("  # type: ignore  # noqa: AMP001", "  # type: ignore"),
        ("  # noqa: AMP001  # read once, before the loop", "  # read once, before the loop"),
    ],
)
def test_the_fix_removes_only_our_stale_codes(comment: str, after: str) -> None:
    source = f"import torch\nscale = scaler.get_scale(){comment}\n"
    assert fix_source(source).text == f"import torch\nscale = scaler.get_scale(){after}\n"


def test_a_noqa_on_a_line_of_its_own_is_stale() -> None:
    source = "import torch\n\n# noqa: AMP009\nscaler = torch.amp.GradScaler()\n"
    assert messages(source) == [(3, "unused noqa: AMP009 is on a line without code")]
    assert fix_source(source).text == "import torch\n\n\nscaler = torch.amp.GradScaler()\n"


def test_in_a_notebook_the_finding_names_the_cell(tmp_path: Path) -> None:
    import json

    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Train"]},
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": ["import torch\n", "x = 1  # noqa: AMP009"],
        },
    ]
    path = tmp_path / "t.ipynb"
    path.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    (finding,) = lint_paths([path]).diagnostics
    assert (finding.cell, finding.line, finding.code) == (2, 2, "AMP100")


def test_it_is_the_registrys_one_rule_about_findings() -> None:
    assert [rule for rule in ALL_RULES if issubclass(rule, FindingsRule)] == [UnusedNoqa]


def test_dedented_sources_still_point_at_the_comment() -> None:
    source = textwrap.dedent(
        """\
        import torch
        def f():
            return 1  # noqa: AMP001
        """
    )
    (finding,) = [d for d in lint_source(source) if d.code == "AMP100"]
    assert (finding.line, finding.column) == (3, 15)


PROJECTS = Path(__file__).resolve().parents[1] / "fixtures" / "projects"


@pytest.mark.parametrize("project", sorted(PROJECTS.glob("amp100_*")), ids=lambda path: path.name)
def test_project_fixtures_report_exactly_their_marked_lines(project: Path) -> None:
    # The marked-line format of the project fixtures, linted as a folder and file by file.
    import re

    marker = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)$")
    expected = {
        (path.name, number, code.strip())
        for path in project.glob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if (match := marker.search(line))
        for code in match[1].split(",")
    }
    together = lint_paths([project], jobs=1)
    assert together.errors == ()
    assert {(Path(d.path).name, d.line, d.code) for d in together.diagnostics} == expected
    alone = {
        (path.name, d.line, d.code)
        for path in project.glob("*.py")
        for d in lint_paths([path], jobs=1).diagnostics
    }
    assert alone == expected


class TestFileDirectives:
    def test_a_file_code_with_no_finding_in_the_file_is_reported_and_fixed(self) -> None:
        source = "# amp-lint: noqa: AMP001, AMP009  # legacy\nimport torch\n" + LOOP.format(
            comment=""
        ).removeprefix("import torch\n")
        assert messages(source) == [(1, "unused file noqa: AMP009 has no finding in this file")]
        assert fix_source(source).text.splitlines()[0] == "# amp-lint: noqa: AMP001  # legacy"

    def test_a_file_directive_left_with_nothing_goes(self) -> None:
        source = "# amp-lint: noqa: AMP009\nimport torch\nx = 1\n"
        assert messages(source) == [(1, "unused file noqa: AMP009 has no finding in this file")]
        assert fix_source(source).text == "\nimport torch\nx = 1\n"

    def test_a_bare_file_directive_names_no_code_that_could_go_stale(self) -> None:
        from linter._noqa import file_noqa_comments

        assert file_noqa_comments("# amp-lint: noqa\nx = 1\n") == []
        (found,) = file_noqa_comments("# amp-lint: noqa: AMP001  # why\nx = 1\n")
        assert found.codes == ("AMP001",)
