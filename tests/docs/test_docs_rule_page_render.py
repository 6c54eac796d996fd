"""The rule-page generator on a rule made up for the test (no Sphinx build needed)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

import libcst as cst
import libcst.matchers as m
import pytest
from docs_site import DOCS

from linter import (
    SAFE,
    UNSAFE,
    Example,
    Finding,
    ModuleContext,
    NodeFix,
    Rule,
    RuleOption,
    Settings,
)

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


class FixingRule(MadeUpRule):
    """Flags calls to `frobnicate()`, and renames them.

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
    defrobnicate()
    ```

    ## Fix safety
    The rename keeps the meaning.

    ## References
    - [the frobnication report](https://example.org/frobnicate)
    """

    code = "AMP997"
    name = "fixing-rule"
    options = ()
    fix_availability = SAFE
    invalid = (
        Example("frobnicate = 1\n", lines=()),  # no call: nothing to fix, so not shown
        Example("import x\nfrobnicate()\n", lines=(2,)),
    )

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        for node in _calls_to(context.module, "frobnicate"):
            rename = ((node.func, cst.Name("defrobnicate")),)
            yield Finding(node, "frobnicate() is called", fix=NodeFix("rename", rename, SAFE))


def _calls_to(module: cst.Module, name: str) -> list[cst.Call]:
    return [
        node for node in m.findall(module, m.Call(func=m.Name(name))) if isinstance(node, cst.Call)
    ]


def test_a_rule_with_a_fix_shows_it_before_and_after() -> None:
    page = rule_pages.render_rule_page(FixingRule)
    fix = page[page.index("## Fix\n") : page.index("## Options")]
    assert "`amp-lint --fix` applies it" in fix
    assert "The rename keeps the meaning." in fix
    before, after = fix.split("::::{tab-item} After `amp-lint --fix`")
    assert ":emphasize-lines: 2\n\nimport x\nfrobnicate()" in before
    # The after side is the engine's real fix of that example, its changed line highlighted.
    assert ":emphasize-lines: 2\n\nimport x\ndefrobnicate()" in after


def test_a_rule_without_a_fix_has_no_fix_section() -> None:
    page = rule_pages.render_rule_page(MadeUpRule)
    assert "## Fix\n" not in page
    assert "fix: **none**" in page


def test_references_close_the_page() -> None:
    page = rule_pages.render_rule_page(FixingRule)
    assert page.rstrip().endswith("- [the frobnication report](https://example.org/frobnicate)")
    assert "## References" not in rule_pages.render_rule_page(MadeUpRule)


def test_a_declared_fix_that_no_example_shows_is_a_build_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class ClaimsAFix(MadeUpRule):
        fix_availability = UNSAFE

    with caplog.at_level(logging.WARNING):
        rule_pages.render_rule_page(ClaimsAFix)
    assert (
        "fix_availability is 'unsafe' but no invalid example is changed by its fix" in caplog.text
    )


def test_an_unknown_fix_availability_is_a_build_warning(caplog: pytest.LogCaptureFixture) -> None:
    class Misspelt(MadeUpRule):
        fix_availability = "sometimes"

    with caplog.at_level(logging.WARNING):
        rule_pages.render_rule_page(Misspelt)
    assert "fix_availability 'sometimes' is not one of safe, unsafe, none" in caplog.text


def test_index_has_fix_and_default_columns() -> None:
    index = rule_pages.render_index((MadeUpRule, FixingRule))
    assert "| code | name | what it flags | fix | default |" in index
    assert "| [AMP999](amp999.md) | `made-up-rule` | frobnicate() is called | none | on |" in index
    assert "| [AMP997](amp997.md) | `fixing-rule` | frobnicate() is called | safe | on |" in index


def test_default_on_or_off_comes_from_the_default_selection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert rule_pages.on_by_default(MadeUpRule)
    # Were the defaults to leave a rule out, the index would say so: nothing is hard-coded.
    monkeypatch.setattr(rule_pages, "Settings", lambda: Settings(select=("AMP997",)))
    index = rule_pages.render_index((MadeUpRule, FixingRule))
    assert "| frobnicate() is called | none | off |" in index
    assert "| frobnicate() is called | safe | on |" in index
