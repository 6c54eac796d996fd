"""What changes from one pass of a loop to the next, and whether a loop runs more than once.

AMP013 asks whether a call written once runs again before something else does: a loop around it
repeats it unless the loop ``break``s, the call's argument follows the loop variable (``for opt in
optimizers: scaler.unscale_(opt)``, or a name bound from it, ``opt = opts[name]``), or a
condition guarding the other call holds on every pass.
A condition that mentions the loop variable or a name the body rebinds (``(idx + 1) % accum ==
0``, ``accum_step % k == 0`` after ``accum_step += 1``) may change from pass to pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from linter.model.syntax import ModuleIndex, children, dotted_name, walk

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


def follows_the_target(index: ModuleIndex, loop: cst.CSTNode) -> set[str]:
    """The loop targets and the names the body binds from them (``optimizer =
    self.optimizers[group]`` in ``for group in groups:``): a different value on each pass."""
    found = loop_targets(loop)
    assigns = [
        node
        for node in index.nodes(cst.Assign)
        if loop in set(index.ancestors(node))
        and not any(
            isinstance(a, cst.FunctionDef | cst.Lambda)
            for a in index.ancestors(node)
            if a is not loop and loop in set(index.ancestors(a))
        )
    ]
    grown = True
    while grown:
        grown = False
        for assign in assigns:
            if not variables_read(assign.value) & found:
                continue
            for target in assign.targets:
                name = dotted_name(target.target)
                if name is not None and name not in found:
                    found.add(name)
                    grown = True
    return found


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
    stack = children(loop.body)  # type: ignore[attr-defined]  # callers pass For or While loops
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Break):
            return True
        if not isinstance(node, _OWN_SCOPE):
            stack.extend(children(node))
    return False


def variables_read(node: cst.CSTNode) -> set[str]:
    """Variables ``node`` reads: ``opts`` and ``k`` of ``opts[k].step``, not the attribute
    ``step``."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.add(current.value)
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)
        else:
            stack.extend(children(current))
    return found


def _has_modulo(node: cst.CSTNode) -> bool:
    """``(i + 1) % accum == 0``: a gradient-accumulation guard, true on many passes."""
    return any(
        isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
        for n in walk(node)
    )


def on_one_pass_only(index: ModuleIndex, node: cst.CSTNode, loop: cst.CSTNode) -> bool:
    """``node`` runs on one pass of ``loop`` only: under ``if micro == accum - 1:`` or ``if
    is_last_batch:`` (an equality with the loop's variable, not a ``%`` guard, or a name that
    says last or final)."""
    targets = variables_read(loop.target) if isinstance(loop, cst.For) else set()
    for ancestor in index.ancestors(node):
        if ancestor is loop:
            return False
        if not isinstance(ancestor, cst.If):
            continue
        names = variables_read(ancestor.test)
        if any("last" in name.lower() or "final" in name.lower() for name in names):
            return True
        equality = any(
            isinstance(test, cst.Comparison)
            and any(isinstance(c.operator, cst.Equal) for c in test.comparisons)
            and not _has_modulo(test)
            for test in walk(ancestor.test)
        )
        if equality and names & targets:
            return True
    return False


def skips_passes(node: cst.CSTNode) -> bool:
    """A ``continue`` in ``node`` of the loop around it (not of a nested loop): some passes end
    early (``if iopt != optim_idx: continue``)."""
    if isinstance(node, cst.Continue):
        return True
    if isinstance(node, _OWN_SCOPE):
        return False
    return any(skips_passes(child) for child in children(node))


def assigned_in(index: ModuleIndex, loop: cst.CSTNode) -> set[str]:
    """Dotted names an ``=`` inside ``loop`` binds (``scaler = GradScaler()`` in ``for case in
    cases:``): a fresh value on each pass."""
    return {
        name
        for assign in index.nodes(cst.Assign)
        if loop in set(index.ancestors(assign))
        for target in assign.targets
        if (name := dotted_name(target.target))
    }
