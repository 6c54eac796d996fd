"""The rule registry: the one place a rule is listed."""

from __future__ import annotations

from linter._rule import Rule

#: Every rule, in code order.
ALL_RULES: tuple[type[Rule], ...] = ()

__all__ = ["ALL_RULES"]
