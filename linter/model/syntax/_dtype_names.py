"""Dtypes as code spells them: ``torch.bfloat16`` under any import alias, ``"bf16"``, ``"half"``.

Every analysis that reasons about precision compares these short names (`BF16`, `FP16`, `FP32`,
`AUTO`); here they are read off the syntax alone, before any question of which model or switch
they belong to.
"""

from __future__ import annotations

import libcst as cst

from linter.model.syntax._call_arguments import string_value
from linter.model.syntax._dotted_names import ImportAliases, dotted_name

__all__ = ["AUTO", "BF16", "FP16", "FP32", "dtype_named", "literal_dtype"]

BF16 = "bf16"
FP16 = "fp16"
FP32 = "fp32"
AUTO = "auto"

_DTYPE_NAMES = {
    "torch.bfloat16": BF16,
    "torch.float16": FP16,
    "torch.half": FP16,
    "torch.float32": FP32,
    "torch.float": FP32,
}
_DTYPE_STRINGS = {
    "bfloat16": BF16,
    "bf16": BF16,
    "torch.bfloat16": BF16,
    "float16": FP16,
    "fp16": FP16,
    "half": FP16,
    "torch.float16": FP16,
    "float32": FP32,
    "fp32": FP32,
    "float": FP32,
    "auto": AUTO,
}


def dtype_named(text: str) -> str | None:
    """``bf16``/``fp16``/``fp32``/``auto`` for a dtype's name (``"bfloat16"``, ``"fp16"``)."""
    return _DTYPE_STRINGS.get(text.lower())


def literal_dtype(node: cst.BaseExpression, aliases: ImportAliases) -> str | None:
    """``bf16``/``fp16``/``fp32``/``auto`` for a dtype spelled out (``torch.bfloat16`` under any
    import alias, ``"bfloat16"``), else None."""
    text = string_value(node)
    if text is not None:
        return _DTYPE_STRINGS.get(text.lower())
    name = dotted_name(node)
    if name is None:
        return None
    return _DTYPE_NAMES.get(aliases.qualify(name))
