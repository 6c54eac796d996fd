"""Parameters that stand for a GradScaler wrapper because every caller hands them one.

``train_one_epoch(model, ..., loss_scaler)`` in an engine module never says what ``loss_scaler``
is; its callers, in the scripts that build it, do: ``loss_scaler = NativeScaler()`` with a class
of the project whose ``__init__`` builds a GradScaler and whose ``state_dict`` hands that
scaler's state on (BEiT's, LaBraM's ``NativeScalerWithGradNormCount``). A read of
``loss_scaler.state_dict()["scale"]`` is then a read of a GradScaler's scale, as it is on a scaler
the module builds itself. One caller passing something else, a caller of this module or one at a
module's top level leaves the parameter unknown.
"""

from __future__ import annotations

import libcst as cst

from linter.model.project import ModuleContext
from linter.model.syntax import ModuleIndex

#: What a wrapper's ``__init__`` says when it builds a GradScaler.
_BUILDS_A_SCALER = "GradScaler("


def passed_scaler_wrapper(
    context: ModuleContext, index: ModuleIndex, receiver: cst.BaseExpression
) -> bool:
    """``receiver`` is a parameter of its function to which every caller (in other modules)
    passes an object of one project class that builds a GradScaler and defines ``state_dict``."""
    project = context.project
    function = index.enclosing_function(receiver)
    if project is None or function is None or not isinstance(receiver, cst.Name):
        return False
    passed = project.passed_class(context, function, receiver.value)
    if passed is None:
        return False
    init = project.method_source(*passed, "__init__")
    hands_on = project.method_source(*passed, "state_dict")
    return init is not None and hands_on is not None and _BUILDS_A_SCALER in init
