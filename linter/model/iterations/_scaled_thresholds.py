"""Clip thresholds multiplied by the loss scale: scaled gradients clipped at a scaled norm.

``clip_grad_norm_(params, max_norm * scaler.get_scale())`` after a scaled backward is not the
clip-before-unscale bug. The total norm and the threshold carry the same factor ``S``, so the
clip coefficient ``S * max_norm / (S * norm)`` is the one an unscaled clip at ``max_norm`` gives;
a value clip of ``S * g`` at ``S * v`` is ``S`` times the clip of ``g`` at ``v``. MMF's trainer
clips this way, the threshold reaching the clip through a parameter of a helper in another
module (``clip_gradients(..., scale=self.scaler.get_scale())``).

A threshold is *scaled* when one of its factors is the scale: a factor of a product, or of the
numerator of a quotient (``max_norm * scale / world_size``; dividing by the scale is not it).
The scale is ``<scaler>.get_scale()``, ``<scaler>._scale`` (also ``.item()``, ``float(...)``),
or a name bound to one. Either may be written in the clip, in a local variable, or in a
parameter whose every caller passes such a value: the call a function of another module is
grafted under, the calls of a function of this module (the one that brings the clip into the
iteration, else all of them), and calls in other modules (`Project.calls_from_other_modules`).
Unknown is not scaled: a name bound twice or by a loop, a caller that passes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from linter.model.iterations._iteration import TrainingIterations
from linter.model.iterations._iteration_events import CLIP_FUNCTIONS, Event
from linter.model.project import context_of
from linter.model.syntax import (
    MAX_CALL_DEPTH,
    ModuleIndex,
    code_children,
    dotted_name,
    keyword,
    parameter_position,
    positional,
)

#: Threshold keywords of torch's clips (``clip_grad_norm_(p, max_norm=...)``, ``clip_value=``).
_THRESHOLD_KEYWORDS = ("max_norm", "clip_value")

#: Calls that copy the scale tensor to a Python number, keeping its value.
_TO_NUMBER_METHODS = frozenset({"item", "tolist"})


class ScaledThresholds:
    """Which clips of a module clip at a threshold multiplied by the loss scale."""

    def __init__(self, model: TrainingIterations, index: ModuleIndex) -> None:
        self._model = model
        self._index = index
        #: Parsed functions of other modules (a caller's source) -> an index of their own.
        self._alone: dict[cst.Module, ModuleIndex] = {}

    def scaled(self, clip: Event) -> bool:
        """The clip's threshold is multiplied by the loss scale (see the module docstring)."""
        threshold = self._threshold(clip.call)
        return threshold is not None and self._is_scaled(threshold, 0, clip.via)

    def _threshold(self, call: cst.Call) -> cst.BaseExpression | None:
        for name in _THRESHOLD_KEYWORDS:
            found = keyword(call, name)
            if found is not None:
                return found.value
        callee = dotted_name(call.func) or ""
        # torch's functions take the parameters first; an FSDP module's method, the norm. A
        # function grafted from another module is read without that module's imports: a
        # callee spelled as torch's module path (``nn.utils.clip_grad_norm_``) is torch's.
        function = self._model.aliases.qualify(callee) in CLIP_FUNCTIONS or bool(
            {"utils", "clip_grad"} & set(callee.split(".")[:-1])
        )
        arg = positional(call, 1 if function or isinstance(call.func, cst.Name) else 0)
        return arg.value if arg is not None else None

    # -- what a value is ----------------------------------------------------------------------

    def _is_scaled(self, node: cst.BaseExpression, depth: int, via: cst.Call | None) -> bool:
        """A product (or a quotient's numerator) one of whose factors is the scale."""
        if isinstance(node, cst.BinaryOperation) and isinstance(
            node.operator, cst.Multiply | cst.Divide
        ):
            return any(self._is_scale(factor, depth, via) for factor in _factors(node))
        if isinstance(node, cst.Name) and depth < MAX_CALL_DEPTH:
            return self._name_holds(node, self._is_scaled, depth + 1, via)
        return False

    def _is_scale(self, node: cst.BaseExpression, depth: int, via: cst.Call | None) -> bool:
        """``<scaler>.get_scale()``, ``<scaler>._scale`` (as a number too), or a name bound
        to one."""
        receivers = self._model.receivers
        if isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute):
            method, owner = node.func.attr.value, node.func.value
            if method == "get_scale":
                return receivers.looks_like(owner)
            return method in _TO_NUMBER_METHODS and self._is_scale(owner, depth, via)
        if isinstance(node, cst.Call) and dotted_name(node.func) == "float" and len(node.args) == 1:
            return self._is_scale(node.args[0].value, depth, via)
        if isinstance(node, cst.Attribute) and node.attr.value == "_scale":
            return receivers.looks_like(node.value)
        if isinstance(node, cst.Name) and depth < MAX_CALL_DEPTH:
            return self._name_holds(node, self._is_scale, depth + 1, via)
        return False

    def _name_holds(
        self,
        name: cst.Name,
        test: Callable[[cst.BaseExpression, int, cst.Call | None], bool],
        depth: int,
        via: cst.Call | None,
    ) -> bool:
        """Every value ``name`` may hold where it is read passes ``test``: its one assignment
        in its function (or the module), else — a parameter — what every caller passes."""
        index = self._index_of(name)
        function = index.enclosing_function(name)
        scope: cst.CSTNode = function if function is not None else index.module
        values = list(_assigned(scope, name.value))
        if values:
            return len(values) == 1 and values[0] is not None and test(values[0], depth, via)
        if function is None:
            return False
        passed = self._passed(index, function, name.value, via)
        return bool(passed) and all(v is not None and test(v, depth, None) for v in passed)

    def _passed(
        self, index: ModuleIndex, function: cst.FunctionDef, name: str, via: cst.Call | None
    ) -> list[cst.BaseExpression | None]:
        """What each known caller of ``function`` passes as parameter ``name`` (None where a
        caller passes nothing and the parameter has no default); empty when none is known."""
        params = function.params
        every = (*params.posonly_params, *params.params, *params.kwonly_params)
        param = next((p for p in every if p.name.value == name), None)
        position = parameter_position(function, name)
        if param is None or position is None:
            return []
        return [
            arg.value if arg is not None else param.default
            for call in self._callers(index, function, param, via)
            for arg in (keyword(call, name) or positional(call, position),)
        ]

    def _callers(
        self, index: ModuleIndex, function: cst.FunctionDef, param: cst.Param, via: cst.Call | None
    ) -> list[cst.Call]:
        model, context = self._model, context_of(self._index)
        if index is not self._index:
            return []  # a caller parsed from another module: its own callers are not followed
        grafted_under = index.parent.get(function)
        if isinstance(grafted_under, cst.Call):
            return [grafted_under]  # a function of another module, hung under the call
        if context is not None and function in context.foreign:
            return []
        if via is not None and model.callee(via) is function:
            return [via]
        cls = index.enclosing_class(function.body)
        called = ("." if cls is not None else "") + function.name.value
        found = [call for call in index.calls_named(called) if model.callee(call) is function]
        if context is not None and context.project is not None:
            found += context.project.calls_from_other_modules(context, function, param)
        return found

    def _index_of(self, node: cst.CSTNode) -> ModuleIndex:
        """The module's index, or — for a caller parsed from another module's summary, which
        is not hung in this module's tree — an index of that function alone."""
        context = context_of(self._index)
        if node in self._index.parent or context is None or node not in context.foreign:
            return self._index
        module = context.foreign[node].module
        if module not in self._alone:
            self._alone[module] = ModuleIndex(module)
        return self._alone[module]


def _factors(node: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The factors of a product, and of a quotient's numerator: ``a``, ``b`` of ``a * b / c``."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        yield from _factors(node.left)
        yield from _factors(node.right)
    elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        yield from _factors(node.left)
    else:
        yield node


def _assigned(scope: cst.CSTNode, name: str) -> Iterator[cst.BaseExpression | None]:
    """What the statements of ``scope`` (not of functions or classes nested in it) bind to
    ``name``: an assignment's value, or None for a binding whose value is unknown (an augmented
    assignment, a loop, a ``with ... as``, an unpacking)."""
    stack = code_children(scope)
    while stack:
        node = stack.pop()
        if isinstance(node, cst.FunctionDef | cst.ClassDef | cst.Lambda):
            continue
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name:
                    yield node.value
                elif name in _bound_names(target.target):
                    yield None
        elif isinstance(node, cst.AnnAssign) and dotted_name(node.target) == name:
            yield node.value
        elif _rebinds(node, name):
            yield None
        stack.extend(code_children(node))


def _rebinds(node: cst.CSTNode, name: str) -> bool:
    """``node`` binds ``name`` to a value not written as one expression."""
    if isinstance(node, cst.AugAssign):
        return dotted_name(node.target) == name
    if isinstance(node, cst.For | cst.CompFor):
        return name in _bound_names(node.target)
    return isinstance(node, cst.AsName) and name in _bound_names(node.name)


def _bound_names(target: cst.CSTNode) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, cst.Tuple | cst.List):
        return {n for element in target.elements for n in _bound_names(element.value)}
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return set()


def scaled_thresholds(model: TrainingIterations, index: ModuleIndex) -> ScaledThresholds:
    """The shared answer for the module."""
    return index.shared(ScaledThresholds, lambda: ScaledThresholds(model, index))
