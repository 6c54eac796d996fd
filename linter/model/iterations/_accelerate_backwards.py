"""Accelerate's ``accelerator.backward(loss)`` calls, and whether the module may run them in fp16.

Under fp16 mixed precision Accelerate's ``backward`` scales the loss with its own GradScaler and
the prepared optimizer's ``step()`` unscales just before stepping, so between the two the
gradients carry the loss scale, as after ``scaler.scale(loss).backward()``. Not so where every
``Accelerator(...)`` of the module pins another precision (``mixed_precision="bf16"``), nor with
DeepSpeed, whose engine scales and clips by itself. A precision the module does not pin (a
variable, a config file, no argument) may be fp16.
"""

from __future__ import annotations

import re

import libcst as cst

from linter.model.project import ModuleContext
from linter.model.syntax import ModuleIndex, dotted_name, last_part

#: Receivers of Accelerate's ``backward(loss)``: ``accelerator``, ``self._accelerator``.
ACCELERATOR = re.compile(r"^_*accelerator$", re.IGNORECASE)


def accelerate_backwards(index: ModuleIndex) -> list[cst.Call]:
    """The module's ``<accelerator>.backward(loss)`` calls, in source order: through a receiver
    named like one or bound in the module to an ``Accelerator(...)`` (tez keeps it in
    ``self._driver``)."""
    bound = bound_accelerators(index)
    return [
        call
        for call in index.calls_named(".backward")
        if call.args
        and isinstance(call.func, cst.Attribute)
        and (receiver := dotted_name(call.func.value)) is not None
        and (ACCELERATOR.search(last_part(receiver)) or receiver in bound)
    ]


def _accelerator_calls(index: ModuleIndex) -> list[cst.Call]:
    """The module's ``Accelerator(...)`` / ``accelerate.Accelerator(...)`` calls."""
    return index.calls_named("Accelerator") + index.calls_named(".Accelerator")


def bound_accelerators(index: ModuleIndex) -> set[str]:
    """Names and attributes the module assigns an ``Accelerator(...)``: wrappers that clip,
    step and backpropagate by the AMP recipe themselves, whatever they are called."""
    bound: set[str] = set()
    for call in _accelerator_calls(index):
        assign = index.parent.get(call)
        if isinstance(assign, cst.Assign) and assign.value is call:
            bound.update(name for target in assign.targets if (name := dotted_name(target.target)))
    return bound


def may_scale_fp16(context: ModuleContext, index: ModuleIndex) -> bool:
    """Whether Accelerate may run fp16 mixed precision here: no DeepSpeed in the module, and
    not every ``Accelerator(...)`` pins another precision with a literal."""
    return "deepspeed" not in context.source.lower() and not _never_fp16(index)


def _never_fp16(index: ModuleIndex) -> bool:
    """Every ``Accelerator(...)`` of the module pins a precision other than fp16."""
    pinned = []
    for call in _accelerator_calls(index):
        value = next(
            (a.value for a in call.args if a.keyword and a.keyword.value == "mixed_precision"),
            None,
        )
        if not isinstance(value, cst.SimpleString):
            return False
        pinned.append(value.evaluated_value)
    return bool(pinned) and "fp16" not in pinned
