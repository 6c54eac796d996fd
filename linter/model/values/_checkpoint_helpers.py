"""The functions of other modules a module calls to save or load its checkpoints.

A trainer often writes its checkpoint through a helper in a utils module: ``save_checkpoint(model,
optimizer, epoch)``, or ``misc.save_model(model="G", ..., states=g_states)`` after building
``g_states`` itself. AMP011 reads such a helper's saves and loads as if they were written at the
call, so it grafts the helper under the call: a call that hands it the optimizer, a dict the
calling function builds, or whose callee's name says it saves, loads or resumes. Only a helper
whose source mentions ``state_dict`` or a save is grafted; anything else stays unread.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from linter.model.project import ModuleContext
from linter.model.syntax import ModuleIndex, dotted_name, last_part

#: Callee names of checkpoint helpers (``save_checkpoint``, ``load_ckpt``, ``resume_from``).
_HELPER_NAME = re.compile(r"save|load|checkpoint|ckpt|resume|restore", re.IGNORECASE)
#: What a helper's source mentions when it may save or load a checkpoint.
_HELPER_WORDS = ("state_dict", "save")


def checkpoint_helpers(
    context: ModuleContext, index: ModuleIndex, is_optimizer: Callable[[str], bool]
) -> list[cst.FunctionDef]:
    """Functions of other modules this one calls to save or load checkpoints, grafted under
    their calls (see the module docstring)."""
    project = context.project
    if project is None:
        return []
    dicts = _dict_names(index)
    dict_names = {name for _function, name in dicts}
    found = []
    for call in index.nodes(cst.Call):
        callee = dotted_name(call.func) or ""
        passes_optimizer = any(
            (name := dotted_name(arg.value)) is not None and is_optimizer(name) for arg in call.args
        )
        handed = [
            arg.value.value
            for arg in call.args
            if isinstance(arg.value, cst.Name) and arg.value.value in dict_names
        ]
        hands_a_dict = bool(handed) and any(
            (index.enclosing_function(call), name) in dicts for name in handed
        )
        if passes_optimizer or hands_a_dict or _HELPER_NAME.search(last_part(callee)):
            grafted = project.graft(context, call, _HELPER_WORDS)
            if grafted is not None:
                found.append(grafted)
    return found


def _dict_names(index: ModuleIndex) -> set[tuple[cst.CSTNode | None, str]]:
    """(function, name) of every name a function binds to a dict literal (``g_states =
    {...}``): a dict it may hand a helper to save."""
    return {
        (index.enclosing_function(assign), target.target.value)
        for assign in index.nodes(cst.Assign)
        if isinstance(assign.value, cst.Dict)
        for target in assign.targets
        if isinstance(target.target, cst.Name)
    }
