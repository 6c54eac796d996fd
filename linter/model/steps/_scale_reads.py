"""Where a module copies a GradScaler's loss scale to the host, and which reads bracket an update.

Every spelling of the sync: ``scaler.get_scale()``, ``scaler._scale.item()`` (or
``.tolist()``), ``float(scaler._scale)`` and ``scaler.state_dict()["scale"]``. A zero-argument
``get_scale()`` counts on a receiver that merely looks like a scaler (torch's getter takes no
argument, which already rules out look-alikes); the other spellings need a proven scaler.

A *skip detection* is the commonest reason to read it every step: reads before and after one
``<scaler>.update()`` (or ``step()``) of the same scaler in one function, one of them compared
(``if scaler.get_scale() < before:``) — the "was this step skipped?" idiom.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from linter.model.syntax import ModuleIndex, dotted_name, walk
from linter.model.values import ScalerReceivers

#: Methods that turn the ``_scale`` tensor into a Python number (a device-to-host copy).
TO_HOST_METHODS = frozenset({"item", "tolist"})

#: Scaler methods a skip detection reads the scale around.
_BRACKETED_METHODS = frozenset({"update", "step"})


@dataclass(frozen=True, slots=True)
class ScaleRead:
    """One place that copies the loss scale to the host."""

    #: The node reported (the call or subscript that syncs).
    node: cst.CSTNode
    #: The scaler expression, e.g. ``self.scaler``.
    receiver: str


def _no_space(whitespace: cst.BaseParenthesizableWhitespace) -> bool:
    return isinstance(whitespace, cst.SimpleWhitespace) and not whitespace.value


def _scale_tensor_owner(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``R`` of ``R._scale``, spelled without spaces around the dot (so the file says ``._scale``,
    the trigger that lets the engine skip the many files that only mention ``x_scale``)."""
    if (
        isinstance(node, cst.Attribute)
        and node.attr.value == "_scale"
        and _no_space(node.dot.whitespace_before)
        and _no_space(node.dot.whitespace_after)
    ):
        return node.value
    return None


def _call_read(call: cst.Call, receivers: ScalerReceivers) -> ScaleRead | None:
    func = call.func
    owner: cst.BaseExpression | None = None
    if isinstance(func, cst.Attribute) and not call.args:
        if func.attr.value == "get_scale":
            looks = receivers.looks_like(func.value)
            return ScaleRead(call, dotted_name(func.value) or "") if looks else None
        if func.attr.value in TO_HOST_METHODS:
            owner = _scale_tensor_owner(func.value)
    elif isinstance(func, cst.Name) and func.value == "float" and len(call.args) == 1:
        owner = _scale_tensor_owner(call.args[0].value)
    if owner is not None and receivers.proves(owner):
        return ScaleRead(call, dotted_name(owner) or "")
    return None


def _state_dict_read(
    subscript: cst.Subscript, proves: Callable[[cst.BaseExpression], bool]
) -> ScaleRead | None:
    """``R.state_dict()["scale"]`` on a proven scaler ``R``."""
    value, elements = subscript.value, subscript.slice
    if not (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "state_dict"
        and not value.args
        and proves(value.func.value)
        and len(elements) == 1
        and isinstance(elements[0].slice, cst.Index)
        and isinstance(elements[0].slice.value, cst.SimpleString)
        and elements[0].slice.value.evaluated_value == "scale"
    ):
        return None
    return ScaleRead(subscript, dotted_name(value.func.value) or "")


def scale_reads(
    index: ModuleIndex,
    receivers: ScalerReceivers,
    wrapper: Callable[[cst.BaseExpression], bool] | None = None,
) -> list[ScaleRead]:
    """Every host read of a loss scale in the module, in source order. ``wrapper`` says which
    other receivers hand on a GradScaler's ``state_dict`` (a parameter its callers pass one
    to, `linter.model.steps._passed_scalers`)."""

    def proves(receiver: cst.BaseExpression) -> bool:
        return receivers.proves(receiver) or (wrapper is not None and wrapper(receiver))

    found: list[ScaleRead | None] = [_call_read(c, receivers) for c in index.nodes(cst.Call)]
    found += [_state_dict_read(s, proves) for s in index.nodes(cst.Subscript)]
    reads = [read for read in found if read is not None]
    return sorted(reads, key=lambda read: index.order[read.node])


def skip_detections(
    index: ModuleIndex,
    reads: list[ScaleRead],
    is_scaler_call: Callable[[cst.CSTNode, frozenset[str]], bool],
) -> set[cst.CSTNode]:
    """Reads that bracket a ``<scaler>.update()``/``step()`` in the same function, one of them
    compared: they detect a skipped step."""
    order = index.order
    found: set[cst.CSTNode] = set()
    for update in (c for c in index.nodes(cst.Call) if is_scaler_call(c, _BRACKETED_METHODS)):
        scope = index.enclosing_function(update)
        receiver = dotted_name(update.func.value)  # type: ignore[attr-defined]  # is_scaler_call matches attribute calls only
        same = [
            r for r in reads if r.receiver == receiver and index.enclosing_function(r.node) is scope
        ]
        before = [r for r in same if order[r.node] < order[update]]
        after = [r for r in same if order[r.node] > order[update]]
        if before and after and any(_compared(index, r.node) for r in before + after):
            found.update(r.node for r in before + after)
    return found


def _compared(index: ModuleIndex, read: cst.CSTNode) -> bool:
    """The value read is compared: in a comparison itself, or through the name it is bound to
    (``before = scaler.get_scale()`` ... ``if scaler.get_scale() < before``)."""
    bound: str | None = None
    for ancestor in index.ancestors(read):
        if isinstance(ancestor, cst.Comparison):
            return True
        if isinstance(ancestor, cst.Assign) and len(ancestor.targets) == 1:
            bound = dotted_name(ancestor.targets[0].target)
            break
        if isinstance(ancestor, cst.BaseSmallStatement | cst.BaseCompoundStatement):
            break
    if bound is None:
        return False
    scope = index.enclosing_function(read)
    return any(
        isinstance(node, cst.Comparison)
        and any(
            dotted_name(part) == bound
            for part in (node.left, *(t.comparator for t in node.comparisons))
        )
        for node in walk(scope if scope is not None else index.module)
    )
