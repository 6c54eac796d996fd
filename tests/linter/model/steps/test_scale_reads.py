"""Host reads of the loss scale and skip detections (`linter.model.steps._scale_reads`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.steps._scale_reads import scale_reads, skip_detections
from linter.model.syntax._module_index import ModuleIndex, module_index
from linter.model.values._scaler_receivers import scaler_receivers


def _index(source: str) -> tuple[ModuleContext, ModuleIndex]:
    source = textwrap.dedent(source)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    return context, module_index(context)


def _read_texts(source: str) -> list[str]:
    context, index = _index(source)
    reads = scale_reads(index, scaler_receivers(index))
    return [context.module.code_for_node(read.node) for read in reads]


def test_every_spelling_of_the_sync_on_a_proven_scaler_is_a_read_in_source_order() -> None:
    assert _read_texts(
        """
        import torch
        amp = torch.amp.GradScaler("cuda")
        a = amp.state_dict()["scale"]
        b = float(amp._scale)
        c = amp._scale.item()
        d = amp.get_scale()
        """
    ) == ['amp.state_dict()["scale"]', "float(amp._scale)", "amp._scale.item()", "amp.get_scale()"]


def test_a_get_scale_with_arguments_or_a_private_scale_of_an_unknown_object_is_no_read() -> None:
    assert (
        _read_texts(
            """
            layout.get_scale(epoch)
            x = float(module._scale)
            y = tensor.state_dict()["scale"]
            """
        )
        == []
    )


def test_a_zero_argument_get_scale_on_a_scaler_like_name_is_a_read() -> None:
    assert _read_texts("print(self.loss_scaler.get_scale())\n") == ["self.loss_scaler.get_scale()"]


def _skips(source: str) -> list[int]:
    context, index = _index(source)
    receivers = scaler_receivers(index)
    reads = scale_reads(index, receivers)
    found = skip_detections(index, reads, receivers.is_scaler_method_call)
    return sorted(context.line_and_column(node)[0] for node in found)


def test_reads_around_an_update_compared_through_a_bound_name_detect_a_skip() -> None:
    source = """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        def step(loss):
            scaler.scale(loss).backward()
            before = scaler.get_scale()
            scaler.step(optimizer)
            scaler.update()
            if scaler.get_scale() < before:
                print("skipped")
        """
    assert _skips(source) == [6, 9]


def test_reads_around_an_update_that_are_only_logged_are_no_skip_detection() -> None:
    source = """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        def step(loss):
            log(scaler.get_scale())
            scaler.update()
            log(scaler.get_scale())
        """
    assert _skips(source) == []


def test_reads_in_another_function_than_the_update_do_not_bracket_it() -> None:
    source = """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        def before():
            return scaler.get_scale()
        def step():
            scaler.update()
            return scaler.get_scale() < 1
        """
    assert _skips(source) == []
