"""Rule selectors, as in ruff: a code (``AMP001``), a code prefix (``AMP``, ``AMP0``), a rule's
kebab-case name, or ``ALL``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from linter._rule import Rule

#: Prefixes of our code family; valid selectors even before any rule with that prefix exists.
_FAMILY_PREFIX = re.compile(r"AMP\d{0,2}")


class SelectorError(ValueError):
    """A selector that names no rule; the message names it."""


def selects(selector: str, rule: type[Rule]) -> bool:
    """Whether ``selector`` picks ``rule``."""
    return selector == "ALL" or selector == rule.name or rule.code.startswith(selector)


def check_selectors(selectors: Iterable[str], rules: Sequence[type[Rule]], where: str) -> None:
    """Raise `SelectorError` naming the first selector that picks no known rule."""
    for selector in selectors:
        if not isinstance(selector, str):
            raise SelectorError(f"{where}: expected rule codes as strings, got {selector!r}")
        if selector == "ALL" or _FAMILY_PREFIX.fullmatch(selector):
            continue
        if not any(selects(selector, rule) for rule in rules):
            raise SelectorError(f"{where}: unknown rule selector {selector!r}")


def enabled_rules(
    rules: Sequence[type[Rule]],
    select: Iterable[str],
    ignore: Iterable[str],
    extend_select: Iterable[str] = (),
) -> tuple[type[Rule], ...]:
    """The rules that ``select`` or ``extend_select`` pick and ``ignore`` does not; ignore wins."""
    chosen = (*select, *extend_select)
    dropped = tuple(ignore)
    return tuple(
        rule
        for rule in rules
        if any(selects(s, rule) for s in chosen) and not any(selects(s, rule) for s in dropped)
    )


def find_rule(code_or_name: str, rules: Sequence[type[Rule]]) -> type[Rule] | None:
    """The rule with this exact code or name, if any."""
    for rule in rules:
        if code_or_name in (rule.code, rule.name):
            return rule
    return None
