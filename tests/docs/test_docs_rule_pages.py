"""One page per registered rule, generated from the rule's own metadata and examples."""

from __future__ import annotations

import re

import pytest
from docs_site import MAIN_CONTENT, DocsBuild, text_of

from linter.rules import ALL_RULES

#: ruff's headings, in page order.
HEADINGS = ("What it does", "Why is this bad?", "Example", "Use instead", "Options", "Suppression")


def test_rules_are_registered() -> None:
    # Without rules the loop below would pass vacuously.
    assert ALL_RULES


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_every_rule_has_a_page_with_ruffs_sections(built_docs: DocsBuild, rule: type) -> None:
    page = built_docs.page(f"reference/rules/{rule.code.lower()}")
    headings = [h for h in HEADINGS if f">{h}<" in page]
    assert headings == list(HEADINGS)
    text = text_of(page)
    assert f"{rule.code}: {rule.name}" in text
    assert f"# noqa: {rule.code}" in text


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_rule_page_shows_each_example(built_docs: DocsBuild, rule: type) -> None:
    # Highlighting splits code into tokens, so compare with all whitespace removed.
    text = "".join(text_of(built_docs.page(f"reference/rules/{rule.code.lower()}")).split())
    for example in (*rule.invalid, *rule.valid):
        assert "".join(example.code.split()) in text


def test_rules_index_links_every_rule(built_docs: DocsBuild) -> None:
    page = built_docs.page("reference/rules/index")
    for rule in ALL_RULES:
        assert f'href="{rule.code.lower()}.html"' in page


def test_rules_index_shows_fix_and_default_of_every_rule(built_docs: DocsBuild) -> None:
    page = built_docs.page("reference/rules/index")
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.DOTALL)
    cells = [
        [
            text_of(MAIN_CONTENT + c).strip()
            for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.DOTALL)
        ]
        for row in rows
    ]
    assert cells[0] == ["code", "name", "what it flags", "fix", "default"]
    assert [row[0] for row in cells[1:]] == [rule.code for rule in ALL_RULES]
    for rule, row in zip(ALL_RULES, cells[1:], strict=True):
        assert row[1] == rule.name
        assert row[3:] == [rule.fix_availability, "on" if rule.default_enabled else "off"]


@pytest.mark.parametrize(
    "rule", [r for r in ALL_RULES if r.fix_availability != "none"], ids=lambda r: r.code
)
def test_rules_with_a_fix_show_it_before_and_after(built_docs: DocsBuild, rule: type) -> None:
    page = built_docs.page(f"reference/rules/{rule.code.lower()}")
    assert ">Fix<" in page
    labels = re.findall(r'class="sd-tab-label"[^>]*>\s*(\w+)', page)
    assert labels == ["Before", "After"]
