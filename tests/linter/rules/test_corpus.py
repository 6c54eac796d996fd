"""The labelled corpus: realistic snippets whose expected findings are marked in the source.

A line that must be reported ends with ``# expect: AMP001`` (several codes: ``# expect: AMP001,
AMP002``). Every other line must stay silent, so a false positive fails as surely as a miss.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rule_runner import run_rule

from linter.rules import ALL_RULES

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)$")
FILES = sorted(CORPUS.glob("*.py"))


def expected_findings(source: str) -> set[tuple[int, str]]:
    found = set()
    for number, line in enumerate(source.splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            found.update((number, code.strip()) for code in match.group(1).split(","))
    return found


def actual_findings(source: str) -> set[tuple[int, str]]:
    return {(line, rule.code) for rule in ALL_RULES for line, _col, _msg in run_rule(rule, source)}


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_corpus_file_reports_exactly_the_marked_lines(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert actual_findings(source) == expected_findings(source)


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_findings_only_in_files_the_trigger_filter_keeps(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    for rule in ALL_RULES:
        if run_rule(rule, source):
            assert rule.wants(source)


def test_corpus_is_large_enough_and_balanced() -> None:
    positives = [path for path in FILES if expected_findings(path.read_text(encoding="utf-8"))]
    assert len(FILES) >= 40
    assert 0.3 < len(positives) / len(FILES) < 0.7
