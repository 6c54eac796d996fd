"""TOML shown in the docs is accepted by the real configuration loader, so it cannot go stale."""

from __future__ import annotations

import re
import sys

import pytest
from docs_site import DOCS

from linter.config import settings_from_table
from linter.rules import ALL_RULES

sys.path.insert(0, str(DOCS / "_ext"))
import rule_pages

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

_TOML_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.MULTILINE | re.DOTALL)


def toml_blocks(markdown: str) -> list[str]:
    """The ```toml fenced blocks of a Markdown page."""
    return _TOML_BLOCK.findall(markdown)


def _accept(block: str, where: str) -> None:
    document = tomllib.loads(block)
    table = document["tool"]["amp-lint"]
    settings_from_table(table, path=where, rules=ALL_RULES)


def test_configuration_page_examples_are_valid() -> None:
    blocks = toml_blocks((DOCS / "reference" / "configuration.md").read_text(encoding="utf-8"))
    assert blocks
    for block in blocks:
        _accept(block, "configuration.md")


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_rule_page_toml_is_valid(rule: type) -> None:
    blocks = toml_blocks(rule_pages.render_rule_page(rule))
    assert blocks  # at least the suppression example
    for block in blocks:
        _accept(block, f"{rule.code} page")


def test_an_invalid_key_would_be_caught() -> None:
    # The check above is only worth something if the loader rejects what it does not know.
    with pytest.raises(ValueError, match="no-such-key"):
        _accept("[tool.amp-lint]\nno-such-key = 1\n", "test")
