"""What a ``with`` statement enters when its item is a name, not a call.

Training scripts often build the context once and enter it in the loop: ``ctx = torch.autocast(
"cuda", dtype=torch.float16) if args.fp16 else nullcontext()`` (nanoGPT's shape), an ``if``/
``else`` that binds ``ctx`` in each arm, ``self.autocast = torch.autocast(...)`` in
``__init__`` entered by ``with self.autocast:`` in the step, or ``amp = functools.partial(
torch.autocast, "cuda", dtype=torch.float16)`` entered by ``with amp():``. Each arm that binds a
call is one candidate, with the facts under which the name holds it (the arm of a conditional
expression; the arm of an ``if`` statement is already the call's own branch condition).

A name bound where this module cannot see the value (a parameter, a loop target, another
module) gives no candidate: unknown stays unknown. `linter.model.values._exported_values` answers
for
names imported from another module of the project.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from linter.model.syntax import Fact, Facts, ModuleIndex, dotted_name, last_part

#: Wrappers whose result, when called, calls the wrapped callable with the arguments bound
#: (``functools.partial`` under any import spelling), by their last name part.
PARTIAL_BINDERS = frozenset({"partial"})


@dataclass(frozen=True, slots=True)
class BoundContext:
    """One context a ``with`` item may enter."""

    #: Where the context is built (the call, or the ``partial(...)`` call), reported as the site.
    node: cst.Call
    #: The call that builds it, as if written directly: ``torch.autocast("cuda", dtype=...)``
    #: for ``partial(torch.autocast, "cuda", dtype=...)`` (then a node of no module: read its
    #: arguments, never its position).
    call: cst.Call
    #: Facts that hold when the name holds this context.
    facts: frozenset[Fact] = frozenset()


def unpartial(call: cst.Call) -> cst.Call | None:
    """``f(a, k=v)`` for ``partial(f, a, k=v)``; None for any other call."""
    name = dotted_name(call.func)
    if name is None or last_part(name) not in PARTIAL_BINDERS:
        return None
    if not call.args or call.args[0].keyword is not None or call.args[0].star:
        return None
    return cst.Call(func=call.args[0].value, args=tuple(call.args[1:]))


def arms(value: cst.BaseExpression, facts: Facts) -> list[tuple[cst.Call, frozenset[Fact]]]:
    """The calls a bound value may be, each with the facts of its arm: ``a() if c else b()``
    gives ``a()`` where ``c`` holds and ``b()`` where it does not."""
    if isinstance(value, cst.Call):
        return [(value, frozenset())]
    if isinstance(value, cst.IfExp):
        found = []
        for arm, holds in ((value.body, True), (value.orelse, False)):
            test = facts.of_test(value.test, holds)
            found += [(call, test | more) for call, more in arms(arm, facts)]
        return found
    return []


def bound_contexts(index: ModuleIndex, facts: Facts, item: cst.WithItem) -> list[BoundContext]:
    """The contexts ``with <item>:`` may enter, from this module's own bindings of the name:
    ``with ctx:`` (a name or ``self.`` attribute bound to a call), ``with ctx():`` (a name bound
    to ``partial(...)``). Empty for a call written in place or a name this module does not
    bind."""
    expression = item.item
    called = False
    if isinstance(expression, cst.Call) and not expression.args:
        expression, called = expression.func, True
    name = dotted_name(expression)
    if name is None or (isinstance(item.item, cst.Call) and not called):
        return []
    found = []
    for assign in _bindings_seen_from(index, name, item):
        for call, arm_facts in arms(assign.value, facts):
            inner = unpartial(call)
            if called and inner is not None:
                found.append(BoundContext(call, inner, arm_facts))
            elif not called and inner is None:
                found.append(BoundContext(call, call, arm_facts))
    return found


def _bindings_seen_from(index: ModuleIndex, name: str, at: cst.CSTNode) -> list[cst.Assign]:
    """The assignments of ``name`` a read at ``at`` may see: in its function (or, for
    ``self.x``, anywhere in its class); failing those, at module level."""
    function = index.enclosing_function(at)
    cls = index.enclosing_class(at) if name.startswith("self.") else None
    if function is not None and cls is None and _is_parameter(function, name):
        return []  # the caller decides what it holds
    local: list[cst.Assign] = []
    module_level: list[cst.Assign] = []
    for assign in index.nodes(cst.Assign):
        if not any(dotted_name(target.target) == name for target in assign.targets):
            continue
        owner = index.enclosing_function(assign)
        if cls is not None:
            if index.enclosing_class(assign) is cls:
                local.append(assign)
        elif owner is function and function is not None:
            local.append(assign)
        elif owner is None and index.enclosing_class(assign) is None:
            module_level.append(assign)
    return local or module_level


def _is_parameter(function: cst.FunctionDef, name: str) -> bool:
    params = function.params
    every = (*params.posonly_params, *params.params, *params.kwonly_params)
    stars = [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
    return any(param.name.value == name for param in (*every, *stars))
