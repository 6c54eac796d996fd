"""Which scaler an event touches: one scaler under two spellings, and scalers built disabled.

A trainer spells one scaler several ways (``self.scaler`` in one method, ``scaler =
self.scaler`` in another), while two scalers of one file have different names (``scaler_d``,
``scaler_g``): the last part of the dotted name tells them apart well enough.
"""

from __future__ import annotations

import libcst as cst

from linter.model.syntax import ModuleIndex, dotted_name, last_part
from linter.model.values._scaler_receivers import GRAD_SCALER_CLASS_NAMES


def same_scaler(first: str | None, second: str | None) -> bool:
    """``first`` and ``second`` are spellings of one scaler (``self.scaler`` and ``scaler``)."""
    if first is None or second is None:
        return False
    return first == second or last_part(first) == last_part(second)


def _disabled(value: cst.BaseExpression) -> bool | None:
    """True for ``GradScaler(..., enabled=False)``, False for another GradScaler call, None for
    anything else."""
    if not isinstance(value, cst.Call):
        return None
    name = dotted_name(value.func)
    if name is None or last_part(name) not in GRAD_SCALER_CLASS_NAMES:
        return None
    return any(
        arg.keyword is not None
        and arg.keyword.value == "enabled"
        and isinstance(arg.value, cst.Name)
        and arg.value.value == "False"
        for arg in value.args
    )


def _build(index: ModuleIndex) -> frozenset[str]:
    disabled: set[str] = set()
    enabled: set[str] = set()
    for assign in index.nodes(cst.Assign):
        state = _disabled(assign.value)
        if state is None:
            continue
        for target in assign.targets:
            name = dotted_name(target.target)
            if name is not None:
                (disabled if state else enabled).add(last_part(name))
    return frozenset(disabled - enabled)


def is_disabled(index: ModuleIndex, scaler: str | None) -> bool:
    """``scaler`` is only ever built ``GradScaler(enabled=False)`` in this module: its
    ``scale()`` returns the loss unchanged and its ``step()`` is a plain ``optimizer.step()``."""
    if scaler is None:
        return False
    return last_part(scaler) in index.shared(_build, lambda: _build(index))
