"""What changes from one pass of a loop to the next, and whether a loop runs more than once.

AMP013 asks whether a call written once runs again before something else does: a loop around it
repeats it unless the loop ``break``s, the call's argument follows the loop variable (``for opt in
optimizers: scaler.unscale_(opt)``), or a condition guarding the other call holds on every pass.
A condition that mentions the loop variable or a name the body rebinds (``(idx + 1) % accum ==
0``, ``accum_step % k == 0`` after ``accum_step += 1``) may change from pass to pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from linter.model._dotted_names import dotted_name
from linter.model._module_index import ModuleIndex, walk
from linter.model._tree import children

#: Nodes whose ``break`` belongs to another loop or function.
_OWN_SCOPE = (cst.For, cst.While, cst.FunctionDef, cst.Lambda, cst.ClassDef)


def loops_between(
    index: ModuleIndex, node: cst.CSTNode, scope: cst.CSTNode
) -> Iterator[cst.CSTNode]:
    """The ``for``/``while`` loops around ``node``, innermost first, inside ``scope`` and its
    function."""
    for ancestor in index.ancestors(node):
        if ancestor is scope or isinstance(ancestor, cst.FunctionDef | cst.Lambda):
            return
        if isinstance(ancestor, cst.For | cst.While):
            yield ancestor


def loop_targets(loop: cst.CSTNode) -> set[str]:
    """Names a ``for`` binds on each pass (``idx``, ``batch`` of ``for idx, batch in ...``)."""
    if not isinstance(loop, cst.For):
        return set()
    return {
        name
        for node in walk(loop.target)
        if isinstance(node, cst.Name | cst.Attribute) and (name := dotted_name(node))
    }


def rebound_in(index: ModuleIndex, loop: cst.CSTNode) -> set[str]:
    """Names the loop body assigns (``do_step = ...``, ``self.step += 1``): they may differ on
    each pass."""
    names = set()
    for node in index.nodes(cst.Assign) + index.nodes(cst.AugAssign):
        if loop not in set(index.ancestors(node)):
            continue
        if isinstance(node, cst.Assign):
            targets = [target.target for target in node.targets]
        else:
            targets = [node.target]
        names |= {name for target in targets if (name := dotted_name(target))}
    return names


def per_pass_names(index: ModuleIndex, loop: cst.CSTNode) -> set[str]:
    """Names whose value may change from one pass of ``loop`` to the next."""
    return loop_targets(loop) | rebound_in(index, loop)


def mentions(text: str, names: set[str]) -> bool:
    """``text`` mentions one of ``names`` as a whole dotted word (``idx`` in ``(idx + 1) % k``,
    not in ``self.idx_map``)."""
    return any(re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) for name in names)


def breaks(loop: cst.CSTNode) -> bool:
    """A ``break`` of this loop (not of a nested one): it may run only once."""
    stack = children(loop.body)  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Break):
            return True
        if not isinstance(node, _OWN_SCOPE):
            stack.extend(children(node))
    return False
