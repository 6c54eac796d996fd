"""Every rule's own VALID/INVALID examples (the ones its docs page shows) behave as documented."""

from __future__ import annotations

import pytest

from linter import lint_source
from linter._rule import FIX_AVAILABILITIES, NO_FIX, Rule
from linter.rules import ALL_RULES

CASES = [
    pytest.param(rule, example, id=f"{rule.code}-{kind}-{number}")
    for rule in ALL_RULES
    for kind, examples in (("valid", rule.valid), ("invalid", rule.invalid))
    for number, example in enumerate(examples)
]


@pytest.mark.parametrize(("rule", "example"), CASES)
def test_example_reports_exactly_its_lines(lint, rule: type[Rule], example) -> None:
    lines = tuple(line for line, _column, _message in lint(rule, example.code))
    assert lines == example.lines


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_rule_has_valid_and_invalid_examples(rule: type[Rule]) -> None:
    assert rule.valid
    assert rule.invalid
    assert all(example.lines for example in rule.invalid)


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_docstring_has_ruff_sections(rule: type[Rule]) -> None:
    doc = rule.__doc__ or ""
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert heading in doc


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_every_invalid_example_contains_a_trigger(rule: type[Rule]) -> None:
    # The engine skips files that contain no trigger: an example without one would be unreachable.
    for example in rule.invalid:
        assert rule.wants(example.code)


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_fix_availability_matches_the_fixes_of_the_invalid_examples(rule: type[Rule]) -> None:
    # The rules index and the rule's page show `fix_availability`; it must say what the rule
    # really offers, and an invalid example must show it (the page renders it before/after).
    assert rule.fix_availability in FIX_AVAILABILITIES
    offered = {
        diagnostic.fix.applicability
        for example in rule.invalid
        for diagnostic in lint_source(example.code, rules=(rule,), select=[rule.code])
        if diagnostic.fix is not None
    }
    if rule.fix_availability == NO_FIX:
        assert offered == set()
    else:
        assert rule.fix_availability in offered
