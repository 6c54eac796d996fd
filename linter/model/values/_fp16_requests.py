"""Does a module ask for fp16 anywhere, by any spelling?

``torch.float16``/``torch.half`` under any import alias, a ``.half()`` cast, an ``fp16=``
switch that is not ``False``, or a string that names fp16 (``"fp16"``, ``"16-mixed"``): a
GradScaler in such a module may serve that fp16 path, so it is not merely redundant.
"""

from __future__ import annotations

import libcst as cst

from linter.model.syntax._call_arguments import keyword, string_value
from linter.model.syntax._dotted_names import ImportAliases, dotted_name
from linter.model.syntax._module_index import ModuleIndex, walk

#: Strings that ask for fp16 somewhere else in the file (a Trainer, Accelerate, Lightning).
FP16_STRINGS = frozenset({"fp16", "float16", "half", "16-mixed", "16-true"})
FP16_NAMES = frozenset({"torch.float16", "torch.half"})


def asks_for_fp16(index: ModuleIndex, aliases: ImportAliases, ruled_out: set[cst.CSTNode]) -> bool:
    """fp16 requested another way: ``torch.float16``, ``.half()``, ``fp16=...``, ``"16-mixed"``
    (``ruled_out``: the alternatives of a dtype that every shipped config decides)."""
    for call in index.nodes(cst.Call):
        if call in ruled_out:
            continue
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "half" and not call.args:
            return True
        fp16 = keyword(call, "fp16")
        if fp16 is not None and not (
            isinstance(fp16.value, cst.Name) and fp16.value.value == "False"
        ):
            return True
        for arg in call.args:
            if string_value(arg.value) in FP16_STRINGS:
                return True
    for node in walk(index.module):
        if node in ruled_out:
            continue
        if isinstance(node, cst.Attribute | cst.Name):
            name = dotted_name(node)
            if name is not None and aliases.qualify(name) in FP16_NAMES:
                return True
        elif isinstance(node, cst.SimpleString) and string_value(node) in FP16_STRINGS:
            return True
    return False
