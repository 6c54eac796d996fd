"""Scaled tensors a plain backward may start from (`linter.model.iterations._scaled_losses`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.iterations._iteration import of_module
from linter.model.iterations._scaled_losses import (
    backpropagated,
    backpropagates_scaled,
    discarded_scale,
    is_scaling_call,
)
from linter.model.syntax._module_index import module_index


def _context(source: str) -> ModuleContext:
    source = textwrap.dedent(source)
    return ModuleContext("t.py", source, cst.parse_module(source))


def scaled_lines(source: str) -> list[int]:
    """Lines of the ``.backward()`` calls whose tensor is already scaled."""
    context = _context(source)
    index = module_index(context)
    return [
        context.position(call).start.line
        for call in index.calls_named(".backward")
        if backpropagates_scaled(index, call)
    ]


def test_the_backpropagated_tensor_of_a_method_call_and_of_autograd_backward() -> None:
    code = cst.Module([]).code_for_node
    method = cst.ensure_type(cst.parse_expression("(loss / n).backward()"), cst.Call)
    function = cst.ensure_type(cst.parse_expression("torch.autograd.backward(ts, gs)"), cst.Call)
    from_method, from_function = backpropagated(method), backpropagated(function)
    assert from_method is not None
    assert from_function is not None
    assert code(from_method) == "(loss / n)"
    assert code(from_function) == "ts"


def test_scaling_calls_include_casts_and_hand_scaling_by_a_named_scale() -> None:
    def scaling(text: str) -> bool:
        return is_scaling_call(cst.parse_expression(text))

    assert scaling("scaler.scale(loss)")
    assert scaling("amp.scale_loss(loss, opt)")
    assert scaling("cast(Tensor, scaler.scale(loss))")
    assert scaling("loss * self.loss_scale")
    assert not scaling("loss * 2")
    assert not scaling("loss.mean()")


def test_names_bound_or_reduced_from_scaled_tensors_are_scaled() -> None:
    assert scaled_lines(
        """
        scaled = scaler.scale(loss)
        scaled.mean().backward()
        with amp.scale_loss(loss, opt) as scaled_loss:
            scaled_loss.backward()
        loss *= self.cur_scale
        loss.backward()
        other.backward()
        """
    ) == [3, 5, 7]


def test_a_parameter_some_call_passes_a_scaled_loss_is_scaled() -> None:
    assert scaled_lines(
        """
        def backward(loss):
            loss.backward()
        def plain(loss):
            loss.backward()
        backward(scaler.scale(total))
        plain(total)
        """
    ) == [3]


def test_a_scale_whose_result_nothing_backpropagates_is_discarded() -> None:
    context = _context(
        """
        def step(loss, scaler):
            scaler.scale(loss)
            loss.backward()
        def kept(loss, scaler):
            scaled = scaler.scale(loss)
            scaled.backward()
            loss.backward()
        """
    )
    index, model = module_index(context), of_module(context)
    first, second, third = index.calls_named(".backward")
    found = discarded_scale(context, index, model, first)
    assert found is not None
    assert context.position(found).start.line == 3
    assert discarded_scale(context, index, model, third) is None
    assert discarded_scale(context, index, model, second) is None
