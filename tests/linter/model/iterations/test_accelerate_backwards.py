"""Accelerate's backward calls and whether they may scale in fp16
(`linter.model.iterations._accelerate_backwards`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.iterations._accelerate_backwards import accelerate_backwards, may_scale_fp16
from linter.model.syntax._module_index import module_index


def _context(source: str) -> ModuleContext:
    source = textwrap.dedent(source)
    return ModuleContext("t.py", source, cst.parse_module(source))


def test_backwards_through_an_accelerator_receiver_only() -> None:
    context = _context(
        """
        accelerator.backward(loss)
        self._accelerator.backward(loss)
        loss.backward()
        engine.backward(loss)
        accelerator.backward()
        """
    )
    found = accelerate_backwards(module_index(context))
    assert [context.position(call).start.line for call in found] == [2, 3]


def test_fp16_is_possible_unless_every_accelerator_pins_another_precision() -> None:
    def fp16(source: str) -> bool:
        context = _context(source)
        return may_scale_fp16(context, module_index(context))

    assert fp16('accelerator = Accelerator(mixed_precision="fp16")\n')
    assert fp16("accelerator = Accelerator(mixed_precision=args.mixed_precision)\n")
    assert fp16("accelerator = Accelerator()\n")
    assert not fp16('accelerator = accelerate.Accelerator(mixed_precision="bf16")\n')
    assert fp16(
        'a = Accelerator(mixed_precision="bf16")\nb = Accelerator(mixed_precision="fp16")\n'
    )
    assert not fp16("import deepspeed\naccelerator = Accelerator()\n")


def test_backwards_through_a_receiver_bound_to_an_accelerator() -> None:
    context = _context(
        """
        class Tez:
            def init_driver(self):
                self._driver = Accelerator(mixed_precision=precision)

            def backward(self, loss):
                self._driver.backward(loss)
                self._engine.backward(loss)

        driver = accelerate.Accelerator()
        driver.backward(loss)
        """
    )
    found = accelerate_backwards(module_index(context))
    assert [context.position(call).start.line for call in found] == [7, 11]
