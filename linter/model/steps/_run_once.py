"""Code that provably runs once: on the first call only, then cached.

Three shapes, recognised by their structure and not by the names they use:

- a *memo guard*: an ``if`` whose test holds while a value is unset and whose body sets it
  (``if self._scale is None: self._scale = scaler.get_scale()``,
  ``if not hasattr(self, "base"): self.base = ...``,
  ``if getattr(self, "base", None) is None: ...``, a first-call flag
  ``if not self._started: ...; self._started = True``);
- a *memo exit*: an early exit while the value is set, followed by setting it
  (``if self._scale is not None: return self._scale`` ... ``self._scale = ...``);
- a function under ``functools.cache``, ``lru_cache`` or ``cached_property``.

The cached value must outlive one call: an attribute of an object, a module-level name, a
``global``/``nonlocal`` name, or a local name tested inside a loop of its function (it stays set
from one pass to the next). A guard is only "once" while nothing unsets the value again; the
guard reports the assignments that do (``self._scale = None`` in a per-step hook), and the
caller decides how often those run.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from linter.model.syntax import ImportAliases, ModuleIndex, descendants, dotted_name, walk

#: Decorators that make a function's body run once (per distinct argument), by qualified name.
CACHING_DECORATORS = frozenset(
    {"functools.cache", "functools.lru_cache", "functools.cached_property"}
)

#: Unset value a test checks for: ``None`` (``is None``, ``getattr(..., None) is None``),
#: ``MISSING`` (no attribute: ``hasattr``) or a boolean (a first-call flag).
_MISSING = "missing"


@dataclass(frozen=True, slots=True)
class Memo:
    """A value cached on the first pass, and what could unset it again."""

    #: The cached expression as dotted text, e.g. ``self._scale``.
    target: str
    #: Assignments or deletions outside the guard that unset the value again.
    resets: tuple[cst.CSTNode, ...]


@dataclass(frozen=True, slots=True)
class _Test:
    """What an ``if`` test checks about one value."""

    target: str
    #: The value meaning "not computed yet": None, ``_MISSING`` or a bool.
    unset: object
    #: True when the test holds while the value is unset.
    while_unset: bool


def _literal(node: cst.BaseExpression) -> object:
    if isinstance(node, cst.Name) and node.value in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[node.value]
    return NotImplemented


def _attribute_of(call: cst.Call, function: str) -> str | None:
    """``self.base`` of ``hasattr(self, "base")`` / ``getattr(self, "base", None)``."""
    if dotted_name(call.func) != function or len(call.args) < 2:
        return None
    owner, attribute = dotted_name(call.args[0].value), call.args[1].value
    if owner is None or not isinstance(attribute, cst.SimpleString):
        return None
    text = attribute.evaluated_value
    return f"{owner}.{text}" if isinstance(text, str) and text.isidentifier() else None


def _test(test: cst.BaseExpression) -> _Test | None:
    holds = True
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        holds, test = not holds, test.expression
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        operator = test.comparisons[0].operator
        if _literal(test.comparisons[0].comparator) is not None or not isinstance(
            operator, cst.Is | cst.IsNot
        ):
            return None
        holds = holds == isinstance(operator, cst.Is)
        left = test.left
        target = (
            _attribute_of(left, "getattr")
            if isinstance(left, cst.Call) and len(left.args) == 3
            else dotted_name(left)
        )
        return _Test(target, None, holds) if target is not None else None
    if isinstance(test, cst.Call):
        target = _attribute_of(test, "hasattr")
        return _Test(target, _MISSING, not holds) if target is not None else None
    target = dotted_name(test)
    # `if not self._started:` holds while the flag is False; `if self._first:` while True.
    return _Test(target, holds, True) if target is not None else None


def _sets(statements: cst.CSTNode, test: _Test) -> bool:
    """Whether ``statements`` assign the target a value other than its unset one."""
    for node in walk(statements):
        if not isinstance(node, cst.Assign | cst.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, cst.Assign) else (node,)
        if not any(dotted_name(t.target) == test.target for t in targets):
            continue
        value = _literal(node.value)
        if test.unset is None or test.unset == _MISSING:
            if value is not None:
                return True
        elif isinstance(value, bool) and value != test.unset:
            return True
    return False


def _outlives_a_call(index: ModuleIndex, node: cst.CSTNode, target: str) -> bool:
    if "." in target:
        return True
    function = index.enclosing_function(node)
    if function is None:
        return True
    declared = any(
        isinstance(statement, cst.Global | cst.Nonlocal)
        and any(item.name.value == target for item in statement.names)
        for statement in descendants(function)
    )
    if declared:
        return True
    for ancestor in index.ancestors(node):
        if ancestor is function:
            return False
        if isinstance(ancestor, cst.For | cst.While):
            return True
    return False


def _resets(index: ModuleIndex, guard: cst.CSTNode, test: _Test) -> tuple[cst.CSTNode, ...]:
    inside = set(walk(guard))
    found: list[cst.CSTNode] = []
    for assign in index.nodes(cst.Assign):
        if assign in inside or test.unset == _MISSING:
            continue
        # Only the unset literal itself unsets: a computed value is what the cache holds.
        value = _literal(assign.value)
        if value is test.unset and any(
            dotted_name(t.target) == test.target for t in assign.targets
        ):
            found.append(assign)
    # Deletions are rare and not indexed: walked for once a guard has been found, then kept
    # for the module's other guards (a walk per guard was most of a summary's time in files
    # with many memo guards).
    deletions = index.shared(
        _DELETIONS, lambda: [n for n in descendants(index.module) if isinstance(n, cst.Del)]
    )
    found.extend(
        node for node in deletions if node not in inside and dotted_name(node.target) == test.target
    )
    return tuple(found)


#: `ModuleIndex.shared` key of the module's ``del`` statements.
_DELETIONS = "run_once.deletions"


def memo_guard(index: ModuleIndex, statement: cst.If) -> Memo | None:
    """The ``if``'s body runs while a lasting value is unset, and sets it."""
    test = _test(statement.test)
    if test is None or not test.while_unset or not _sets(statement.body, test):
        return None
    if not _outlives_a_call(index, statement, test.target):
        return None
    return Memo(test.target, _resets(index, statement, test))


def memo_exit(index: ModuleIndex, statement: cst.If, rest: tuple[cst.CSTNode, ...]) -> Memo | None:
    """``if self._scale is not None: return self._scale`` with ``rest`` (the statements after
    it in its block) setting the value: the rest runs only until the value is cached."""
    test = _test(statement.test)
    if test is None or test.while_unset or statement.orelse is not None:
        return None
    if not any(_sets(node, test) for node in rest):
        return None
    if not _outlives_a_call(index, statement, test.target):
        return None
    return Memo(test.target, _resets(index, statement, test))


def is_cached(function: cst.FunctionDef, aliases: ImportAliases) -> bool:
    """``@functools.cache``, ``@lru_cache(maxsize=None)``, ``@cached_property``: the body runs
    once per distinct argument, not once per call."""
    for decorator in function.decorators:
        expression = decorator.decorator
        if isinstance(expression, cst.Call):
            expression = expression.func
        name = dotted_name(expression)
        if name is not None and aliases.qualify(name) in CACHING_DECORATORS:
            return True
    return False
