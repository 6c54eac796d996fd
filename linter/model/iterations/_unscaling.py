"""Calls that may unscale the gradients without being a ``<scaler>.unscale_(...)`` event.

A trainer's own ``unscale_gradients()``, Accelerate's ``accelerator.unscale_gradients()``, or a
function of another module handed the scaler (``unscale_and_clip(scaler, optimizer)``,
``hooks.before_clip(scaler)``) may unscale before a clip or a gradient read. AMP003 and AMP012
both ask whether one may run first; unknown counts as "it may".
"""

from __future__ import annotations

import re

import libcst as cst

from linter.model.iterations._iteration import TrainingIterations
from linter.model.iterations._iteration_events import Event
from linter.model.syntax import MAX_CALL_DEPTH, ModuleIndex, dotted_name, last_part

#: Calls named like an unscale: ``unscale_gradients()``, ``_unscale_grads()``...
UNSCALES_BY_NAME = re.compile(r"unscale", re.IGNORECASE)


def unscaling_calls(model: TrainingIterations, index: ModuleIndex) -> list[cst.Call]:
    """Calls that may unscale without being ``<scaler>.unscale_(...)`` events: one named like an
    unscale, or a call the model does not follow that is handed a scaler."""
    events = {event.call for event in model.events}
    calls = []
    for call in index.nodes(cst.Call):
        if call in events:
            continue
        name = dotted_name(call.func)
        named = name is not None and UNSCALES_BY_NAME.search(last_part(name)) is not None
        handed = any(_is_scaler(model, arg.value) for arg in call.args)
        if named or (handed and model.callee(call) is None):
            calls.append(call)
    return calls


def _is_scaler(model: TrainingIterations, value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Name | cst.Attribute) and model.receivers.looks_like(value)


def may_run_before(
    model: TrainingIterations, index: ModuleIndex, call: cst.Call, event: Event
) -> bool:
    """``call`` is in the function of ``event`` (or of the call that brings it) and may run
    before it in one iteration: written above it on a path that reaches it (not below it,
    which runs before the next iteration's ``event`` only). A ``call`` inside a function of
    this module counts at the calls of that function, a few calls up (tez's
    ``self._backward(loss)`` runs ``self._driver.backward(loss)``)."""
    sites: list[cst.Call] = [call]
    seen: set[cst.CSTNode] = set()
    for _ in range(MAX_CALL_DEPTH):
        for site in sites:
            if any(
                index.enclosing_function(site) is index.enclosing_function(target)
                and model.facts.precedes_in_source(site, target)
                and model.facts.may_precede(site, target)
                for target in (event.call, event.site)
            ):
                return True
        functions = {
            function
            for site in sites
            if (function := index.enclosing_function(site)) is not None and function not in seen
        }
        seen |= functions
        callers = _callers(model, index)
        sites = [caller for function in functions for caller in callers.get(function, [])]
    return False


def _callers(model: TrainingIterations, index: ModuleIndex) -> dict[cst.CSTNode, list[cst.Call]]:
    """Function of this module -> the calls of this module that run it."""

    def build() -> dict[cst.CSTNode, list[cst.Call]]:
        found: dict[cst.CSTNode, list[cst.Call]] = {}
        for call in index.nodes(cst.Call):
            callee = model.callee(call)
            if callee is not None:
                found.setdefault(callee, []).append(call)
        return found

    return index.shared(_callers, build)
