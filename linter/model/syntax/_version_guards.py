"""Which arm of an ``if`` runs only on an old version: ``if torch_version < (1, 10):``,
``if version.parse(torch.__version__) >= version.parse("2.4"): ... else: <old>``,
``if is_torch_version("<", "2.4"):``, ``if not is_torch_greater_or_equal("2.4"):``.

A deprecated API kept in such an arm is a compatibility fallback (AMP004 must neither report
nor rewrite it). Read by shape: a comparison of something named ``*version*`` with a literal
version (a string, a number, a tuple of them, or a ``parse("2.4")`` of one), a
``*version*`` / ``*greater*`` / ``*less*`` helper called with literal arguments, or a flag
constant that spells torch, a version and a direction in its name
(``_TORCH_GREATER_EQUAL_2_4``, ``is_torch_greater_or_equal_than_1_10``, ``TORCH_LESS_THAN_2``).
"""

from __future__ import annotations

import re
from typing import Literal

import libcst as cst

from linter.model.syntax._dotted_names import dotted_name, last_part, words
from linter.model.syntax._module_index import ModuleIndex
from linter.model.syntax._parsed_module import ParsedModule

#: The arm of an ``if`` (or conditional expression): ``body`` or ``orelse``.
Arm = Literal["body", "orelse"]

#: Comparison operators that put the old version on the true side when the installed version
#: is on the left (``installed < "2.4"``), and those that put it on the false side.
_OLD_WHEN_TRUE = (cst.LessThan, cst.LessThanEqual)
_OLD_WHEN_FALSE = (cst.GreaterThan, cst.GreaterThanEqual)

#: Words of a version flag's name that say the installed torch is at least (newer) or below
#: (older) the version the name spells.
_NEWER_WORDS = frozenset({"greater", "ge", "gte", "geq", "newer", "plus", "after", "atleast"})
_OLDER_WORDS = frozenset({"less", "lt", "lower", "older", "before", "below"})


def old_torch_arm(test: cst.BaseExpression) -> Arm | None:
    """The arm of ``if <test>:`` that runs only on the old version, or None when the test is
    no version guard (or its direction is unknown)."""
    holds = True
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, holds = test.expression, not holds
    old_when_true = _old_when_true(test)
    if old_when_true is None:
        return None
    return "body" if old_when_true == holds else "orelse"


def _old_when_true(test: cst.BaseExpression) -> bool | None:
    if isinstance(test, cst.Name | cst.Attribute):
        return _version_flag(test)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        left, right = test.left, target.comparator
        if _is_literal_version(right) and _names_a_version(left):
            installed_left = True
        elif _is_literal_version(left) and _names_a_version(right):
            installed_left = False
        else:
            return None
        if isinstance(target.operator, _OLD_WHEN_TRUE):
            return installed_left
        if isinstance(target.operator, _OLD_WHEN_FALSE):
            return not installed_left
        return None
    if isinstance(test, cst.Call) and test.args and all(_literal(a.value) for a in test.args):
        name = " ".join(words(test.func)).lower()
        first = test.args[0].value
        if "version" in name and isinstance(first, cst.SimpleString):
            operator = first.evaluated_value
            if operator in ("<", "<="):
                return True
            if operator in (">", ">="):
                return False
        if "greater" in name or "newer" in name or "at_least" in name:
            return False
        if "less" in name or "older" in name or "lower" in name:
            return True
    return None


def _version_flag(flag: cst.Name | cst.Attribute) -> bool | None:
    """True/False for a flag named as "torch older/newer than <digits>"; None otherwise."""
    name = dotted_name(flag)
    parts = last_part(name).lower().split("_") if name else []
    if "torch" not in parts or not any(part.isdigit() for part in parts):
        return None
    newer, older = bool(_NEWER_WORDS.intersection(parts)), bool(_OLDER_WORDS.intersection(parts))
    return None if newer == older else older


def _names_a_version(node: cst.BaseExpression) -> bool:
    """``torch.__version__``, ``TORCH_VERSION``, ``torch_ver``, ``parse(torch.__version__)``."""
    return any(
        "version" in word.lower() or "ver" in word.lower().split("_")
        for word in words(node)
        if word.isidentifier()
    )


def _is_literal_version(node: cst.BaseExpression) -> bool:
    """``"2.4"``, ``2.4``, ``(1, 10)``, ``parse("2.4")``, ``Version("1.10.0")``."""
    if isinstance(node, cst.Call):
        return len(node.args) == 1 and _literal(node.args[0].value)
    return _literal(node)


def _literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.SimpleString | cst.Integer | cst.Float):
        return True
    if isinstance(node, cst.Tuple | cst.List):
        return bool(node.elements) and all(_literal(e.value) for e in node.elements)
    return False


class CompatFallbacks:
    """Deprecated uses kept on purpose for old versions: the other branch of their ``if``,
    conditional expression or ``try`` already uses the current API (``current_api`` finds its
    text), or they sit in the old-version arm of a version test (`old_torch_arm`). E.g. accelerate's
    ``if is_torch_version(">=", "2.3"): torch.amp.GradScaler("cuda") else:
    torch.cuda.amp.GradScaler()`` or timm's ``try: torch.amp.GradScaler(device=device) except
    (AttributeError, TypeError): torch.cuda.amp.GradScaler()``. Rewriting them would drop the
    support for torch < 2.3 (no ``torch.amp.GradScaler``) that they exist for."""

    def __init__(
        self, context: ParsedModule, index: ModuleIndex, current_api: re.Pattern[str]
    ) -> None:
        self._context = context
        self._index = index
        self._current_api = current_api

    def covers(self, node: cst.CSTNode) -> bool:
        """``node`` (a use or an import) is such a fallback, or inside one."""
        child = node
        for parent in self._index.ancestors(node):
            for other in _alternatives(parent, child):
                if self._current_api.search(self._context.module.code_for_node(other)):
                    return True
            if (
                isinstance(parent, cst.If | cst.IfExp)
                and child is not parent.test
                and old_torch_arm(parent.test) == ("body" if child is parent.body else "orelse")
            ):
                return True  # `if torch_version < (1, 10): <deprecated>`
            child = parent
        return False


def _alternatives(parent: cst.CSTNode, child: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The branches that run instead of ``child``, a branch of ``parent``."""
    if isinstance(parent, (cst.If, cst.IfExp)):
        branches = (parent.body, parent.orelse)
        if child in branches:
            return tuple(b for b in branches if b is not child and b is not None)
    elif isinstance(parent, cst.Try):
        if child is parent.body:
            return tuple(parent.handlers)
        if child in parent.handlers:
            return (parent.body,)
    return ()
