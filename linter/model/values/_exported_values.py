"""AMP values a module holds where other modules reach them, and what a module imports of them.

A module's summary lists (`value_records`): its globals bound to a GradScaler, to an autocast
context (``autocast_ctx = torch.autocast("cuda", dtype=torch.bfloat16)``) or to an autocast
factory (``amp = functools.partial(torch.autocast, "cuda", dtype=torch.float16)``, entered as
``with amp():``); the ``self.`` attributes a class's methods bind to those
(``self.scaler = GradScaler()`` in a trainer base class); the GradScalers its functions return,
alone or in a tuple (``return optimizer, scaler, scheduler``); and the precision engines its
functions return or its classes keep (``build_engine()`` returning ``deepspeed.initialize(...)``
with a bf16 config dict). Each is evaluated in the module that builds it — an autocast's dtype
under that module's own imports and constants — and kept as plain data.

The module being linted asks (`ImportedValues`) through the project's import resolution and
class hierarchy, never by reading the other file: ``from utils import scaler``, ``from .amp
import autocast_ctx as ctx``, ``self.scaler`` in a subclass of a class of another module. A name
rebound in the module that exports it (no longer a constant), an attribute bound to something
else as well, or an engine whose setting is in a config file is not exported: unknown stays
unknown.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import cast

import libcst as cst

from linter.model.project import (
    AUTOCAST,
    AUTOCAST_FACTORY,
    ENGINE,
    ENGINE_TEXT,
    SCALER,
    ModuleContext,
    ValueRecord,
    qualified_name,
)
from linter.model.syntax import (
    ImportAliases,
    ModuleIndex,
    dotted_name,
    import_aliases,
    keyword,
    path_facts,
    walk,
)
from linter.model.values._autocasts import AUTOCAST_SIGNATURES, ModuleAutocasts
from linter.model.values._bound_contexts import unpartial
from linter.model.values._precision_engines import PrecisionEngine, precision_engines
from linter.model.values._scaler_precision import for_another_precision
from linter.model.values._scaler_receivers import ScalerReceivers, scaler_receivers


def value_records(context: ModuleContext, index: ModuleIndex) -> list[ValueRecord]:
    """The values of one module that other modules may reach (see the module docstring)."""
    aliases = import_aliases(index)
    receivers = scaler_receivers(index)
    autocasts: ModuleAutocasts | None = None
    found: dict[str, ValueRecord | None] = {}
    for assign in index.nodes(cst.Assign):
        holder = _holder(index, assign)
        if holder is None:
            continue
        record = None
        if receivers.is_scaler_value(assign.value):
            record = ValueRecord(holder, SCALER, 0)
        elif isinstance(assign.value, cst.Call) and "autocast" in aliases.qualify(
            _callee_text(assign.value)
        ):
            autocasts = autocasts or ModuleAutocasts(index, aliases)
            record = _autocast(holder, assign.value, 0, autocasts, aliases)
        # The line only for a record: a module's line map is most of the time of a summary
        # of values alone when it has none (2.4 of 3.8 profiled CPU s beside the parse on the
        # sample).
        if record is not None and isinstance(assign.value, cst.Call):
            record = replace(record, line=context.line_and_column(assign.value)[0])
        # A holder bound twice to different things holds neither for certain.
        found[holder] = record if found.get(holder, record) == record else None
    records = [record for record in found.values() if record is not None]
    records += _returned_scalers(context, index, receivers, aliases)
    if ENGINE_TEXT.search(context.source) is not None:
        records += _engines(context, index)
    return records


def _returned_scalers(
    context: ModuleContext, index: ModuleIndex, receivers: ScalerReceivers, aliases: ImportAliases
) -> Iterator[ValueRecord]:
    """The GradScalers module-level functions return, alone (``build_scaler()``) or at one
    place of the tuple every return gives (``init_opt()[1]`` for ``return opt, scaler``).
    ``precision`` is ``"other"`` when the scaler is on only for a precision other than bf16
    (`for_another_precision`, decided here, where its switch is)."""

    returns: dict[cst.FunctionDef, list[cst.BaseExpression]] = {}
    for node in index.nodes(cst.Return):
        function = index.enclosing_function(node)
        if function is not None and node.value is not None:
            returns.setdefault(function, []).append(node.value)
    for function, values in returns.items():
        if any(isinstance(a, cst.ClassDef | cst.FunctionDef) for a in index.ancestors(function)):
            continue  # a method or a nested function: no call of another module names it
        shapes = {len(v.elements) if isinstance(v, cst.Tuple) else -1 for v in values}
        if len(shapes) != 1:
            continue
        width = shapes.pop()
        for place in range(width) if width >= 0 else (None,):
            parts = [
                v if place is None else cast("cst.Tuple", v).elements[place].value for v in values
            ]
            constructor = _scaler_constructor(index, receivers, function, parts)
            if constructor is None:
                continue
            other = for_another_precision(index, aliases, path_facts(index), constructor)
            holder = f"{function.name.value}()" + ("" if place is None else f"[{place}]")
            line = context.line_and_column(constructor)[0]
            yield ValueRecord(holder, SCALER, line, precision="other" if other else "")


def _scaler_constructor(
    index: ModuleIndex,
    receivers: ScalerReceivers,
    function: cst.FunctionDef,
    parts: list[cst.BaseExpression],
) -> cst.Call | None:
    """The ``GradScaler(...)`` call each of ``parts`` (what the returns give at one place)
    evaluates to, directly or through a name the function binds to it; None when one of them
    may be something else (``None`` aside: ``GradScaler() if amp else None``)."""
    found: cst.Call | None = None
    for part in parts:
        if isinstance(part, cst.Name) and part.value == "None":
            continue
        value = part
        if isinstance(part, cst.Name):
            bindings = [
                a.value
                for a in index.nodes(cst.Assign)
                if index.enclosing_function(a) is function
                and any(dotted_name(t.target) == part.value for t in a.targets)
            ]
            if len(bindings) != 1:
                return None
            value = bindings[0]
        if not receivers.is_scaler_value(value):
            return None
        calls = [n for n in walk(value) if receivers.is_constructor_call(n)]
        if len(calls) != 1:
            return None
        found = found or cast("cst.Call", calls[0])
    return found


def _holder(index: ModuleIndex, assign: cst.Assign) -> str | None:
    """``name`` for a module-level ``name = ...``; ``C.self.x`` for ``self.x = ...`` in a
    method of module-level class ``C``; None otherwise (a tuple, a local, a nested class)."""
    if len(assign.targets) != 1:
        return None
    name = dotted_name(assign.targets[0].target)
    if name is None:
        return None
    function = index.enclosing_function(assign)
    if function is None:
        return name if "." not in name and index.enclosing_class(assign) is None else None
    cls = index.enclosing_class(assign)
    if cls is None or not name.startswith("self.") or name.count(".") != 1:
        return None
    if any(isinstance(a, cst.ClassDef | cst.FunctionDef) for a in index.ancestors(cls)):
        return None
    return f"{cls.name.value}.{name}"


def _callee_text(call: cst.Call) -> str:
    """The callee, or for ``partial(f, ...)`` the wrapped ``f``, as dotted text."""
    inner = unpartial(call)
    return dotted_name((inner or call).func) or ""


def _autocast(
    holder: str, call: cst.Call, line: int, autocasts: ModuleAutocasts, aliases: ImportAliases
) -> ValueRecord | None:
    """An autocast (or a factory of one) bound as one call, its dtype evaluated here; an
    ``enabled=`` switch leaves the dtype unknown (whether it is on is the caller's run)."""
    kind = AUTOCAST
    inner = unpartial(call)
    if inner is not None:
        call, kind = inner, AUTOCAST_FACTORY
    name = dotted_name(call.func)
    if name is None or aliases.qualify(name) not in AUTOCAST_SIGNATURES:
        return None
    evaluated = autocasts.evaluate(call)
    enabled = keyword(call, "enabled")
    switched = enabled is not None and not (
        isinstance(enabled.value, cst.Name) and enabled.value.value == "True"
    )
    dtype = "" if evaluated is None or switched or evaluated.dtype is None else evaluated.dtype
    return ValueRecord(holder, kind, line, dtype)


def _engines(context: ModuleContext, index: ModuleIndex) -> Iterator[ValueRecord]:
    """Engines whose setting is in this module (not in a config file), held where another
    module reaches them: returned by a function, kept in ``self.``, or a module global."""

    returns: dict[cst.FunctionDef, list[cst.Return]] = {}
    for statement in index.nodes(cst.Return):
        owner = index.enclosing_function(statement)
        if owner is not None:
            returns.setdefault(owner, []).append(statement)
    for engine in precision_engines(context):
        if engine.config_path is not None:
            continue
        line = context.line_and_column(engine.node)[0]
        for name in _held_as(index, engine):
            yield _engine_record(name, line, engine)
        function = index.enclosing_function(engine.node)
        qualname = qualified_name(index, function) if function is not None else None
        if function is None or qualname is None:
            continue
        for statement in returns.get(function, []):
            value = statement.value
            if isinstance(value, cst.Tuple) and value.elements:
                value = value.elements[0].value
            if isinstance(value, cst.Subscript):
                value = value.value  # `return deepspeed.initialize(...)[0]`
            if value is engine.node or (value is not None and dotted_name(value) in engine.names):
                yield _engine_record(f"{qualname}()", line, engine)
                break


def _held_as(index: ModuleIndex, engine: PrecisionEngine) -> Iterator[str]:
    """``C.self.accelerator`` / ``accelerator`` for the names an engine is bound to."""
    parent = index.parent.get(engine.node)
    if isinstance(parent, cst.Subscript):
        parent = index.parent.get(parent)
    if not isinstance(parent, cst.Assign):
        return
    names = set(engine.names)
    if not names and len(parent.targets) == 1:
        names = {dotted_name(parent.targets[0].target) or ""}
    function = index.enclosing_function(engine.node)
    cls = index.enclosing_class(engine.node)
    for name in sorted(names):
        if function is None and name and "." not in name and cls is None:
            yield name
        elif cls is not None and name.startswith("self.") and name.count(".") == 1:
            yield f"{cls.name.value}.{name}"


def _engine_record(holder: str, line: int, engine: PrecisionEngine) -> ValueRecord:
    return ValueRecord(
        holder,
        ENGINE,
        line,
        engine.framework,
        engine.precision,
        engine.source,
        engine.scales,
        engine.torch_autocast,
    )
