"""Rule selectors, as in ruff: a code (``AMP001``), a code prefix (``AMP``, ``AMP0``), a rule's
kebab-case name, or ``ALL``.

With no ``select`` (``None``) a run gets the *default set*: every rule whose
`Rule.default_enabled` is true. A rule that is off by default is like a ruff rule outside ruff's
default ``select``: it is left out only of the default set, and any selector that picks it turns
it on — ``ALL``, a prefix (``AMP``, ``AMP01``), its code or its name, in ``select`` or in
``extend-select`` (which adds to the default set when ``select`` is not given). ``ignore`` still
wins. Unlike ruff's preview rules, no extra switch is needed: off by default means noisy, not
unstable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from linter._rule import Rule

#: How ``--list-rules``, ``--explain`` and the docs mark a rule that is not in the default set.
OFF_BY_DEFAULT = "off by default"

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
    select: Iterable[str] | None,
    ignore: Iterable[str],
    extend_select: Iterable[str] = (),
) -> tuple[type[Rule], ...]:
    """The rules that ``select`` (``None``: the default set) or ``extend_select`` pick and
    ``ignore`` does not; ignore wins."""
    chosen = (*(select or ()), *extend_select)
    dropped = tuple(ignore)
    return tuple(
        rule
        for rule in rules
        if ((select is None and rule.default_enabled) or any(selects(s, rule) for s in chosen))
        and not any(selects(s, rule) for s in dropped)
    )


def describe_select(select: Sequence[str] | None) -> str:
    """``select`` as a message shows it: the list, or that it is the default set."""
    return "the rules on by default" if select is None else str(list(select))


def find_rule(code_or_name: str, rules: Sequence[type[Rule]]) -> type[Rule] | None:
    """The rule with this exact code or name, if any."""
    for rule in rules:
        if code_or_name in (rule.code, rule.name):
            return rule
    return None


def how_to_enable(rule: type[Rule]) -> str:
    """One sentence on turning on a rule that is off by default."""
    return (
        f'run it with `--extend-select {rule.code}` (or `extend-select = ["{rule.code}"]` in '
        f"`[tool.amp-lint]`); `--select ALL` or a prefix of its code selects it too"
    )
