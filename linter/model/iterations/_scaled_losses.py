"""Whether the tensor a backward starts from is a scaled loss, by means the iteration model does
not see as a scaled backward.

`linter.model.iterations._iteration` calls ``scaler.scale(loss).backward()`` a scaled backward. A
plain
``x.backward()`` may still backpropagate a scaled tensor: ``x`` bound to a ``.scale(...)``
result or reduced from one (the reductions are linear: ``scaled.mean()``, ``scaled / n``), the
``as`` name of apex's ``with amp.scale_loss(loss, opt) as scaled_loss:``, a hand-scaled ``loss *
self.loss_scale``, ``loss *= scaler.get_scale()``, or a parameter some call of the function
passes ``scaler.scale(loss)``. And a ``scaler.scale(loss)`` whose result nothing backpropagates
before ``loss.backward()`` is the classic mistake: ``scale`` returns a new tensor.
"""

from __future__ import annotations

import libcst as cst

from linter.model.iterations._iteration import TrainingIterations
from linter.model.project import ModuleContext
from linter.model.syntax import ModuleIndex, dotted_name, last_part

#: Methods whose result is a scaled loss: a GradScaler's ``scale``, apex's ``amp.scale_loss``.
SCALING_METHODS = frozenset({"scale", "scale_loss"})

#: Tensor methods whose result is as scaled as their input (linear in it): a scaled loss
#: reduced with one of them is still scaled.
LINEAR_REDUCTIONS = frozenset({"mean", "sum", "float", "squeeze", "reshape", "view"})


def backpropagated(call: cst.Call) -> cst.BaseExpression | None:
    """The tensor a plain backward starts from: ``R`` of ``R.backward(...)``, the first
    argument of ``torch.autograd.backward(...)``."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "backward":
        owner = dotted_name(func.value)
        if owner is None or not owner.endswith("autograd"):
            return func.value
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value == "tensors":
            return arg.value
    return None


def is_scaling_call(node: cst.BaseExpression) -> bool:
    """A scaled tensor's expression: ``<anything>.scale(x)``, ``amp.scale_loss(x, opt)``
    (through ``cast(T, ...)``), or a hand-scaled ``loss * self.loss_scale`` /
    ``loss * scaler.get_scale()`` (a custom scaler's static loss scale)."""
    while (
        isinstance(node, cst.Call) and dotted_name(node.func) in ("cast", "typing.cast")
    ) and len(node.args) == 2:
        node = node.args[1].value
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return _names_a_scale(node.left) or _names_a_scale(node.right)
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in SCALING_METHODS
    )


def backpropagates_scaled(index: ModuleIndex, call: cst.Call) -> bool:
    """The plain backward ``call`` starts from a tensor that is already scaled (see the module
    docstring), or from nothing it can read (``self.backward()``: a method of the caller's own
    class, not a tensor's backward)."""
    tensor = backpropagated(call)
    if tensor is None:
        return True
    if isinstance(tensor, cst.Name) and tensor.value in ("self", "cls"):
        return True
    parts = (
        [element.value for element in tensor.elements]
        if isinstance(tensor, cst.List | cst.Tuple)
        else [tensor]
    )
    return any(_is_scaled(index, part, call) for part in parts)


def discarded_scale(
    context: ModuleContext, index: ModuleIndex, model: TrainingIterations, backward: cst.Call
) -> cst.Call | None:
    """``scaler.scale(loss)`` before ``loss.backward()`` in the same function whose result is
    never backpropagated: a statement of its own, or bound to a name that no backward in the
    function starts from."""
    tensor = backpropagated(backward)
    if tensor is None:
        return None
    code = context.module.code_for_node
    text = code(tensor).strip()
    function = index.enclosing_function(backward)
    for call in index.calls_named(".scale"):
        if not (
            index.enclosing_function(call) is function
            and model.receivers.looks_like(cst.ensure_type(call.func, cst.Attribute).value)
            and len(call.args) == 1
            and code(call.args[0].value).strip() == text
            and index.order[call] < index.order[backward]
        ):
            continue
        statement = index.parent.get(call)
        if isinstance(statement, cst.Expr):
            return call
        if isinstance(statement, cst.Assign) and not any(
            _backpropagates(index, dotted_name(target.target), function)
            for target in statement.targets
        ):
            return call
    return None


def _reduced_from(tensor: cst.BaseExpression) -> cst.BaseExpression:
    """What ``tensor`` reduces or rescales: ``loss`` of ``loss.mean()``, ``loss.sum() / n``,
    ``(loss * w).mean()``; scaled when that one is."""
    while True:
        if (
            isinstance(tensor, cst.Call)
            and isinstance(tensor.func, cst.Attribute)
            and tensor.func.attr.value in LINEAR_REDUCTIONS
        ):
            tensor = tensor.func.value
        elif isinstance(tensor, cst.BinaryOperation) and isinstance(
            tensor.operator, cst.Divide | cst.Multiply
        ):
            if is_scaling_call(tensor):
                return tensor
            tensor = tensor.left
        else:
            return tensor


def _names_a_scale(node: cst.BaseExpression) -> bool:
    """``self.loss_scale``, ``scaler.get_scale()``, ``cur_scale``."""
    if isinstance(node, cst.Call):
        node = node.func
    name = dotted_name(node)
    return name is not None and "scale" in last_part(name).lower()


def _is_scaled(index: ModuleIndex, tensor: cst.BaseExpression, call: cst.Call) -> bool:
    tensor = _reduced_from(tensor)
    if is_scaling_call(tensor):
        return True
    name = dotted_name(tensor)
    if name is None:
        return False
    for node in index.nodes(cst.AsName):
        item = index.parent.get(node)
        if (
            isinstance(item, cst.WithItem)
            and dotted_name(node.name) == name
            and is_scaling_call(item.item)
        ):
            return True
    for assign in index.nodes(cst.Assign):
        targets = {dotted_name(t.target) for t in assign.targets}
        if name in targets and is_scaling_call(assign.value):
            return True
    for update in index.nodes(cst.AugAssign):  # loss *= self.loss_scale
        if (
            dotted_name(update.target) == name
            and isinstance(update.operator, cst.MultiplyAssign)
            and _names_a_scale(update.value)
        ):
            return True
    return _parameter_given_scaled(index, call, name)


def _parameter_given_scaled(index: ModuleIndex, call: cst.Call, name: str) -> bool:
    """``name`` is a parameter of the function around ``call`` that some call of it, in this
    module, passes a scaled tensor."""
    function = index.enclosing_function(call)
    if function is None:
        return False
    params = [p.name.value for p in function.params.params]
    if name not in params:
        return False
    method = index.enclosing_class(call) is not None
    position = params.index(name) - (1 if method else 0)
    for site in index.calls_named(function.name.value) + index.calls_named(
        "." + function.name.value
    ):
        positional = [arg for arg in site.args if arg.keyword is None and not arg.star]
        given = [arg.value for arg in site.args if arg.keyword and arg.keyword.value == name]
        if 0 <= position < len(positional):
            given.append(positional[position].value)
        if any(is_scaling_call(value) for value in given):
            return True
    return False


def _backpropagates(index: ModuleIndex, name: str | None, function: cst.CSTNode | None) -> bool:
    """Some backward in ``function`` starts from ``name`` (or the name is not plain)."""
    if name is None:
        return True
    return any(
        index.enclosing_function(call) is function
        and (tensor := backpropagated(call)) is not None
        and dotted_name(tensor) == name
        for call in index.calls_named(".backward")
    )
