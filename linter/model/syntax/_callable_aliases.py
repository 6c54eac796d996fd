"""Where a callable reached through a name is called: ``ac = torch.cuda.amp.autocast`` then
``with ac():``; ``autocast = torch.cuda.amp.autocast if cond else nullcontext``;
``ctx = functools.partial(torch.cuda.amp.autocast, dtype=torch.float16)`` then ``ctx()``.

A rule that reports a call (AMP004: the deprecated class warns when it is called) asks this of a
reference that is not called where it is written, to report the call that runs it instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from linter.model.syntax._dotted_names import dotted_name, last_part
from linter.model.syntax._module_index import ModuleIndex

#: Wrappers whose result calls the wrapped callable: ``functools.partial(f, ...)``.
_BINDERS = frozenset({"partial"})


@dataclass(frozen=True, slots=True)
class AliasCalls:
    """The name a reference is bound to and the calls of that name in the module."""

    #: ``ac``, ``self.autocast``: the bound name.
    name: str
    #: The binding statement's value (the reference, a conditional expression, a partial).
    binding: cst.BaseExpression
    #: ``ac()``, ``self.autocast(...)`` in source order (empty when the name is never called).
    calls: tuple[cst.Call, ...]
    #: The reference is wrapped in ``partial(...)``: calling the bound name calls it.
    partial: bool


def alias_calls(index: ModuleIndex, reference: cst.BaseExpression) -> AliasCalls | None:
    """How ``reference`` is called through a name, or None when it is not bound to one by a
    plain assignment (``x = ref``, ``x = ref if c else other``, ``x = partial(ref, ...)``)."""
    value: cst.CSTNode = reference
    parent = index.parent.get(value)
    partial = False
    if isinstance(parent, cst.IfExp) and value in (parent.body, parent.orelse):
        value, parent = parent, index.parent.get(parent)
    elif isinstance(parent, cst.Arg) and parent.keyword is None:
        call = index.parent.get(parent)
        if (
            isinstance(call, cst.Call)
            and call.args
            and call.args[0] is parent
            and last_part(dotted_name(call.func) or "") in _BINDERS
        ):
            value, parent, partial = call, index.parent.get(call), True
    if not isinstance(parent, cst.Assign | cst.AnnAssign) or parent.value is not value:
        return None
    targets = (
        [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
    )
    names = [name for target in targets if (name := dotted_name(target)) is not None]
    if len(names) != 1:
        return None
    name = names[0]
    key = name if "." not in name else "." + last_part(name)
    calls = tuple(call for call in index.calls_named(key) if dotted_name(call.func) == name)
    return AliasCalls(name, value, calls, partial)
