"""How long one GradScaler lives: is a scaler created anew for every training step?

A GradScaler is per-step when the code that creates it runs every step *and* the scaler it
creates serves that one step only. The first half is `PerStepAnalysis`'s question; the second is
answered here by following the created scaler to its uses (``scale``/``unscale_``/``step``/
``update``) in the same iteration: in the loop body or per-step function that creates it, and in
the same-module functions that body hands the scaler to. An ``update()`` in a loop nested inside
that unit means the scaler spans many steps (a scaler per fold, per run, per epoch), whatever the
loops are named. A scaler whose uses cannot be seen (handed to another module's trainer) is
not called per-step: a false alarm costs more than a miss.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from linter.model.project import ModuleContext
from linter.model.steps._per_step import PerStepAnalysis
from linter.model.steps._step_guards import classify_guard, exits
from linter.model.steps._step_loops import is_traversal
from linter.model.syntax import ModuleIndex, children, dotted_name, parameter_position, walk
from linter.model.syntax import words as words_in
from linter.model.values import ScalerReceivers

#: Scaler methods that use the scaler for a training step.
USE_METHODS = frozenset({"scale", "unscale_", "step", "update"})
#: How many same-module calls deep uses are followed, and factories up to their callers.
FOLLOW_DEPTH = 2
#: Loop targets that count configurations, not steps (``for fold in range(5)``, ``for dtype
#: in dtypes``): a scaler created in such a loop is one per run, however it is used.
CONFIGURATION_TARGET = re.compile(
    r"^(fold|seed|run|trial|config|cfg|setting|dtype|device|case|experiment|sweep|task|lr)"
    r"(_?(idx|id|i|name|num|no))?s?$",
    re.IGNORECASE,
)
#: Iterables that enumerate configurations: ``itertools.product(...)``.
_CONFIGURATION_CALLS = frozenset({"product", "itertools.product", "combinations", "permutations"})


@dataclass(frozen=True, slots=True)
class ScalerUse:
    """A call that uses a created scaler for a step."""

    #: The ``<scaler>.<method>(...)`` call.
    call: cst.Call
    #: ``scale``, ``unscale_``, ``step`` or ``update``.
    method: str
    #: True when it sits in a loop nested in the creating unit (it spans several iterations).
    nested: bool


@dataclass(frozen=True, slots=True)
class PerStepScaler:
    """A place that creates a new GradScaler on every training step."""

    #: The creating call in the per-step code: the constructor, or a factory's call.
    node: cst.Call
    #: The ``GradScaler(...)`` constructor call itself (the same node unless a factory).
    constructor: cst.Call
    #: Why the creating code runs every step, in words for a message.
    why: str
    #: The first use of the new scaler in the same step.
    use: cst.Call


def _mentions(node: cst.CSTNode, words: frozenset[str]) -> bool:
    return not words.isdisjoint(words_in(node))


def is_configuration_loop(loop: cst.For | cst.While) -> bool:
    """``for fold in range(k)``, ``for dtype in (torch.float16, torch.bfloat16)``,
    ``for lr, wd in itertools.product(...)``: one run per element, not one step."""
    if not isinstance(loop, cst.For):
        return False
    iterable = loop.iter
    if isinstance(iterable, cst.List | cst.Tuple | cst.Set):
        return True
    if isinstance(iterable, cst.Call) and dotted_name(iterable.func) in _CONFIGURATION_CALLS:
        return True
    targets = [n.value for n in walk(loop.target) if isinstance(n, cst.Name)]
    return bool(targets) and all(
        CONFIGURATION_TARGET.match(name) or name.startswith("_") for name in targets
    )


class ScalerLifetimes:
    """Finds the GradScalers of one module that are created anew on every training step."""

    def __init__(
        self,
        context: ModuleContext,
        index: ModuleIndex,
        receivers: ScalerReceivers,
        analysis: PerStepAnalysis,
    ) -> None:
        self._context = context
        self._index = index
        self._receivers = receivers
        self._analysis = analysis
        self._functions: dict[str, list[cst.FunctionDef]] | None = None

    def per_step(self) -> Iterator[PerStepScaler]:
        for call in self._index.nodes(cst.Call):
            if self._receivers.is_constructor_call(call):
                yield from self._check(call, call, 0)

    # -- one creation site -------------------------------------------------------------------

    def _check(
        self, creation: cst.Call, constructor: cst.Call, depth: int
    ) -> Iterator[PerStepScaler]:
        names = self._bound_names(creation)
        unit = self._unit(creation)
        if unit is not None and self._lazy(creation, names, unit):
            return  # one scaler, made on first use (and a lazy factory's callers share it)
        if unit is not None:
            why = self._why(creation, unit)
            if why is not None:
                use = self._one_step_use(creation, names, unit)
                if use is not None:
                    yield PerStepScaler(creation, constructor, why, use)
                    return
        if depth < FOLLOW_DEPTH:
            factory = self._factory(creation, names)
            if factory is not None:
                for call in self._calls_of(factory):
                    yield from self._check(call, constructor, depth + 1)

    def _unit(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The loop whose body creates ``node`` each iteration, else its function; None at
        module level or in a lambda/class body."""
        child = node
        for ancestor in self._index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
            if isinstance(ancestor, cst.Lambda | cst.ClassDef):
                return None
            if (
                isinstance(ancestor, cst.For | cst.While)
                and child is ancestor.body
                and not is_traversal(ancestor)
            ):
                return ancestor
            child = ancestor
        return None

    def _why(self, creation: cst.CSTNode, unit: cst.CSTNode) -> str | None:
        """Why the creating code runs every step. In a loop body: unless the loop walks
        configurations or a periodic/once guard limits it — whether the loop is a step loop
        (not an epoch or fold loop) is left to the use check, which sees where ``update()``
        runs, so a loop named for epochs whose every iteration is one step counts. In a
        function: `PerStepAnalysis` (hooks, callers in loops)."""
        if isinstance(unit, cst.For | cst.While):
            if is_configuration_loop(unit) or self._guarded(creation, unit):
                return None
            return f"inside the loop at line {self._context.position(unit).start.line}"
        return self._analysis.reason(creation)

    def _guarded(self, node: cst.CSTNode, unit: cst.CSTNode) -> bool:
        """A periodic, once-only or error-path ``if`` around ``node`` inside ``unit``."""
        for ancestor in self._index.ancestors(node):
            if ancestor is unit:
                return False
            if isinstance(ancestor, cst.If) and classify_guard(ancestor.test) is not None:
                return True
        return False

    def _bound_names(self, creation: cst.CSTNode) -> frozenset[str]:
        """The dotted names the new scaler is bound to (``scaler``, ``self.scaler``)."""
        child = creation
        for ancestor in self._index.ancestors(creation):
            if isinstance(ancestor, cst.Assign):
                targets = (dotted_name(t.target) for t in ancestor.targets)
                return frozenset(t for t in targets if t)
            if isinstance(ancestor, cst.AnnAssign | cst.NamedExpr):
                name = dotted_name(ancestor.target)
                return frozenset({name}) if name else frozenset()
            if not isinstance(ancestor, cst.IfExp | cst.BooleanOperation) or (
                isinstance(ancestor, cst.IfExp) and child is ancestor.test
            ):
                return frozenset()
            child = ancestor
        return frozenset()

    def _lazy(self, creation: cst.CSTNode, names: frozenset[str], unit: cst.CSTNode) -> bool:
        """Created only when not there yet: ``if self.scaler is None: self.scaler = ...``,
        ``self.scaler = self.scaler or GradScaler()``, an early ``return self._scaler``."""
        words = frozenset(name.rpartition(".")[2] for name in names)
        if not words:
            return False
        child: cst.CSTNode = creation
        for ancestor in self._index.ancestors(creation):
            if isinstance(ancestor, cst.If | cst.IfExp) and child is not ancestor.test:
                if _mentions(ancestor.test, words):
                    return True
            elif isinstance(ancestor, cst.BooleanOperation) and isinstance(
                ancestor.operator, cst.Or
            ):
                other = ancestor.left if child is ancestor.right else ancestor.right
                if _mentions(other, words):
                    return True
            elif isinstance(ancestor, cst.IndentedBlock):
                for statement in ancestor.body:
                    if statement is child:
                        break
                    if (
                        isinstance(statement, cst.If)
                        and exits(statement.body)
                        and _mentions(statement.test, words)
                    ):
                        return True
            if ancestor is unit:
                return False
            child = ancestor
        return False

    # -- uses of the new scaler --------------------------------------------------------------

    def _one_step_use(
        self, creation: cst.Call, names: frozenset[str], unit: cst.CSTNode
    ) -> cst.Call | None:
        """The first use of the scaler in the creating iteration, when it serves only that
        one: no ``update()`` (or, without one, no ``step()``) in a loop nested in the unit."""
        uses = list(self._uses(unit.body, names, creation, 0, False))  # type: ignore[attr-defined]  # _unit gives a loop or function, which has a body
        markers = [u for u in uses if u.method == "update"] or [
            u for u in uses if u.method == "step"
        ]
        if any(u.nested for u in markers):
            return None
        same_step = [u for u in uses if not u.nested]
        if not same_step:
            return None
        return min(same_step, key=lambda u: self._index.order[u.call]).call

    def _uses(
        self,
        root: cst.CSTNode,
        names: frozenset[str],
        creation: cst.Call | None,
        depth: int,
        nested: bool,
    ) -> Iterator[ScalerUse]:
        stack: list[tuple[cst.CSTNode, bool]] = [(root, nested)]
        while stack:
            node, inside = stack.pop()
            if isinstance(node, cst.FunctionDef | cst.ClassDef | cst.Lambda) and node is not root:
                continue
            if isinstance(node, cst.For | cst.While) and not is_traversal(node):
                stack.extend((child, True) for child in children(node))
                continue
            if isinstance(node, cst.Call):
                func = node.func
                if (
                    isinstance(func, cst.Attribute)
                    and func.attr.value in USE_METHODS
                    and (func.value is creation or dotted_name(func.value) in names)
                ):
                    yield ScalerUse(node, func.attr.value, inside)
                elif depth < FOLLOW_DEPTH:
                    for callee, passed in self._handed_to(node, names):
                        yield from self._uses(callee.body, passed, None, depth + 1, inside)
            stack.extend((child, inside) for child in children(node))

    def _handed_to(
        self, call: cst.Call, names: frozenset[str]
    ) -> Iterator[tuple[cst.FunctionDef, frozenset[str]]]:
        """Same-module functions ``call`` runs, with the names the scaler has inside them: the
        parameters it is passed as, and ``self.`` attributes for a method of the same object."""
        func = call.func
        method = isinstance(func, cst.Attribute) and dotted_name(func.value) in ("self", "cls")
        if isinstance(func, cst.Name):
            callees = [f for f in self._functions_named(func.value) if not self._is_method(f)]
        elif method and isinstance(func, cst.Attribute):  # `method` implies the isinstance
            callees = [f for f in self._functions_named(func.attr.value) if self._is_method(f)]
        else:
            return
        carried = {name for name in names if method and name.startswith("self.")}
        for callee in callees:
            passed = set(carried)
            for position, arg in enumerate(a for a in call.args if a.keyword is None):
                if dotted_name(arg.value) in names and not arg.star:
                    passed.update(self._parameter_at(callee, position))
            for arg in call.args:
                if arg.keyword is not None and dotted_name(arg.value) in names:
                    passed.add(arg.keyword.value)
            if passed:
                yield callee, frozenset(passed)

    @staticmethod
    def _parameter_at(function: cst.FunctionDef, position: int) -> list[str]:
        params = [*function.params.posonly_params, *function.params.params]
        return [
            p.name.value for p in params if parameter_position(function, p.name.value) == position
        ]

    def _functions_named(self, name: str) -> list[cst.FunctionDef]:
        if self._functions is None:
            functions: dict[str, list[cst.FunctionDef]] = {}
            for function in self._index.nodes(cst.FunctionDef):
                functions.setdefault(function.name.value, []).append(function)
            self._functions = functions
        return self._functions.get(name, [])

    def _is_method(self, function: cst.FunctionDef) -> bool:
        return self._index.enclosing_class(function.body) is not None

    # -- factories ---------------------------------------------------------------------------

    def _factory(self, creation: cst.Call, names: frozenset[str]) -> cst.FunctionDef | None:
        """The function that returns the new scaler (``def make_scaler(): return
        GradScaler()``), whose callers are the creation sites that matter."""
        function = self._index.enclosing_function(creation)
        if function is None:
            return None
        parent = self._index.parent.get(creation)
        if isinstance(parent, cst.Return):
            return function
        if not names:
            return None
        for node in self._index.nodes(cst.Return):
            if (
                self._index.enclosing_function(node) is function
                and node.value is not None
                and dotted_name(node.value) in names
            ):
                return function
        return None

    def _calls_of(self, function: cst.FunctionDef) -> list[cst.Call]:
        name = function.name.value
        if not self._is_method(function):
            return list(self._index.calls_named(name))
        return [
            call
            for call in self._index.calls_named("." + name)
            # `calls_named(".m")` holds only attribute calls; the isinstance says so to mypy.
            if isinstance(call.func, cst.Attribute)
            and dotted_name(call.func.value) in ("self", "cls")
        ]
