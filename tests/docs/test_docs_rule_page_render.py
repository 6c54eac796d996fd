"""The rule-page generator on a rule made up for the test (no Sphinx build needed)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

import pytest
from docs_site import DOCS

from linter import Example, Finding, ModuleContext, Rule, RuleOption

sys.path.insert(0, str(DOCS / "_ext"))
import rule_pages


class MadeUpRule(Rule):
    """Flags calls to `frobnicate()`.

    ## What it does
    Reports every call to `frobnicate`.

    ## Why is this bad?
    Frobnication syncs the device.

    ## Example
    ```python
    frobnicate()
    ```

    ## Use instead
    ```python
    pass
    ```

    ## Options
    Raise `limit` to allow a few calls.
    """

    code = "AMP999"
    name = "made-up-rule"
    summary = "frobnicate() is called"
    triggers = ("frobnicate",)
    invalid = (Example("import x\nfrobnicate()\nfrobnicate()\n", lines=(2, 3)),)
    valid = (Example("defrobnicate = 1\n"),)
    options = (RuleOption("limit", int, 0, "Calls allowed per file."),)

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        return ()


class UndocumentedRule(MadeUpRule):
    """Only a summary, no sections."""

    code = "AMP998"
    name = "undocumented-rule"
    options = ()


def test_page_has_ruffs_sections_in_order() -> None:
    page = rule_pages.render_rule_page(MadeUpRule)
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings == [
        "## What it does",
        "## Why is this bad?",
        "## Example",
        "## Use instead",
        "## Options",
        "## Suppression",
    ]
    assert page.startswith("# AMP999: made-up-rule\n")


def test_invalid_examples_highlight_the_reported_lines() -> None:
    page = rule_pages.render_rule_page(MadeUpRule)
    assert ":emphasize-lines: 2,3\n\nimport x\nfrobnicate()" in page


def test_options_come_from_the_rule_metadata() -> None:
    page = rule_pages.render_rule_page(MadeUpRule)
    assert "| `limit` | `int` | `0` | Calls allowed per file. |" in page
    assert "[tool.amp-lint.made-up-rule]\nlimit = 0" in page
    assert "Raise `limit` to allow a few calls." in page


def test_suppression_names_the_rule_code() -> None:
    page = rule_pages.render_rule_page(MadeUpRule)
    assert "`# noqa: AMP999`" in page
    assert 'ignore = ["AMP999"]' in page


def test_missing_sections_are_a_build_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        rule_pages.render_rule_page(UndocumentedRule)
    assert "AMP998" in caplog.text
    assert "'## What it does'" in caplog.text


def test_rules_with_snippets_include_them() -> None:
    assert "AMP002" in rule_pages.RULE_SNIPPETS
    for snippets in rule_pages.RULE_SNIPPETS.values():
        for snippet in snippets:
            assert (DOCS / snippet).is_file()


def test_index_lists_and_toctrees_every_rule() -> None:
    index = rule_pages.render_index((MadeUpRule, UndocumentedRule))
    assert "| [AMP999](amp999.md) | `made-up-rule` | frobnicate() is called |" in index
    assert "\namp999\namp998\n```" in index


def test_stale_pages_are_removed(tmp_path: pytest.TempPathFactory) -> None:
    class App:
        srcdir = tmp_path

    folder = tmp_path / rule_pages.RULES_DIR
    folder.mkdir(parents=True)
    (folder / "amp000.md").write_text("# a rule that no longer exists\n")
    rule_pages.generate_rule_pages(App())
    names = sorted(path.name for path in folder.glob("*.md"))
    assert "amp000.md" not in names
    assert "index.md" in names
