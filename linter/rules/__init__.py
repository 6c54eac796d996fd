"""The rule registry: the one place a rule is listed."""

from __future__ import annotations

from linter._rule import Rule
from linter.rules.amp001_get_scale_every_step import GetScaleEveryStep

#: Every rule, in code order.
ALL_RULES: tuple[type[Rule], ...] = (GetScaleEveryStep,)

__all__ = ["ALL_RULES", "GetScaleEveryStep"]
