"""Calls that may unscale, and whether a call may run before an event
(`linter.model.iterations._unscaling`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.iterations._iteration import of_module
from linter.model.iterations._iteration_events import Kind
from linter.model.iterations._unscaling import may_run_before
from linter.model.syntax._module_index import module_index

SOURCE = """
import torch


class Trainer:
    def _backward(self, loss):
        self._driver.backward(loss)

    def _late(self):
        self._driver.unscale_gradients()

    def train_step(self, batch):
        self._backward(self.model(batch))
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self._late()
        self.optimizer.step()
"""


def _calls_before_the_clip() -> dict[str, bool]:
    source = textwrap.dedent(SOURCE)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    model, index = of_module(context), module_index(context)
    (iteration,) = [it for it in model.iterations if it.of(Kind.CLIP)]
    (clip,) = iteration.of(Kind.CLIP)
    return {
        context.module.code_for_node(call): may_run_before(model, index, call, clip)
        for call in index.calls_named(".backward") + index.calls_named(".unscale_gradients")
    }


def test_a_call_in_a_method_called_before_the_event_may_run_before_it() -> None:
    assert _calls_before_the_clip()["self._driver.backward(loss)"]


def test_a_call_in_a_method_called_after_the_event_does_not() -> None:
    assert not _calls_before_the_clip()["self._driver.unscale_gradients()"]
