"""Summaries made from libcst's parse of a module, with every analysis the model has.

A summary is plain data (`linter.model.project._summary`); making one asks the steps and values
layers: each function's per-step reason (`linter.model.steps._per_step`), the call sites that run
every step, the scalers, autocasts and engines other modules reach
(`linter.model.values._exported_values`). That is why the making lives here, above the analyses,
while the project below reads summaries without knowing how they were made.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import libcst as cst

from linter.model.project import (
    CONSTANT_CHARS,
    STAR,
    CallRecord,
    ClassRecord,
    FunctionRecord,
    ImportRecord,
    ModuleContext,
    ModuleSummary,
    constructed_receivers,
    graft_words,
    qualified_name,
    receiver_type,
    sys_path_folders,
    written_callee,
)
from linter.model.steps import PerStepAnalysis
from linter.model.syntax import dotted_name, function_source, module_index
from linter.model.values import scaler_receivers, value_records

__all__ = ["summarize"]


def summarize(context: ModuleContext, path: str, *, has_amp: bool) -> ModuleSummary:
    """The summary of one parsed module; ``path`` is its absolute path."""
    index = module_index(context)
    receivers = scaler_receivers(index)
    analysis = PerStepAnalysis(context, index, receivers.is_scaler_method_call, use_project=False)
    functions = []
    for function in index.nodes(cst.FunctionDef):
        qualname = qualified_name(index, function)
        if qualname is None:
            continue
        line, column = context.line_and_column(function)
        functions.append(
            FunctionRecord(
                qualname,
                line,
                column,
                analysis.function_reason(function),
                source := function_source(context.source, index, function)
                or _dedented_source(context.module, function),
                graft_words(source),
            )
        )
    calls = []
    constructed = constructed_receivers(index)
    for call in index.nodes(cst.Call):
        callee = written_callee(call)
        if callee is None:
            continue
        enclosing = index.enclosing_function(call)
        caller = qualified_name(index, enclosing) if enclosing is not None else ""
        if caller is None:
            continue
        reason, open_site = analysis.call_site(call)
        cls = index.enclosing_class(call)
        line, column = context.line_and_column(call)
        calls.append(
            CallRecord(
                callee,
                line,
                column,
                reason,
                open_site,
                caller,
                cls.name.value if cls is not None else None,
                receiver_type(index, constructed, call, enclosing, cls),
            )
        )
    return ModuleSummary(
        path=path,
        imports=tuple(_imports(index)),
        # Read from CPython's tree, as the outline reads it: one reading of a script's paths.
        sys_path=sys_path_folders(index.module.code),
        functions=tuple(functions),
        classes=tuple(_classes(index)),
        calls=tuple(calls),
        constants=tuple(_constants(index)),
        has_amp=has_amp,
        values=tuple(value_records(context, index)),
    )


def _dedented_source(module: cst.Module, function: cst.FunctionDef) -> str:
    # Decorators are left out: the body and the signature are what callers need.
    return module.code_for_node(function.with_changes(decorators=(), leading_lines=()))


def _imports(index: Any) -> Iterator[ImportRecord]:
    for statement in index.nodes(cst.Import):
        for alias in statement.names:
            full = dotted_name(alias.name) or ""
            if alias.asname is not None:
                local = dotted_name(alias.asname.name) or full
                yield ImportRecord(local, full, None)
            else:
                yield ImportRecord(full.partition(".")[0], full.partition(".")[0], None)
                if "." in full:
                    yield ImportRecord(full, full, None)
    for statement in index.nodes(cst.ImportFrom):
        module = dotted_name(statement.module) if statement.module is not None else ""
        level = len(statement.relative)
        if isinstance(statement.names, cst.ImportStar):
            yield ImportRecord(STAR, module or "", STAR, level)
            continue
        for alias in statement.names:
            imported = dotted_name(alias.name) or ""
            bound = dotted_name(alias.asname.name) if alias.asname is not None else imported
            yield ImportRecord(bound or imported, module or "", imported, level)


def _constants(index: Any) -> Iterator[tuple[str, str]]:
    counts: dict[str, int] = {}
    values: dict[str, cst.BaseExpression] = {}
    for assign in index.nodes(cst.Assign):
        module_level = isinstance(index.parent.get(index.parent.get(assign)), cst.Module)
        for target in assign.targets:
            name = dotted_name(target.target) if isinstance(target.target, cst.Name) else None
            if name is None:
                continue
            counts[name] = counts.get(name, 0) + 1
            if module_level:
                values[name] = assign.value
    for name, value in values.items():
        text = index.module.code_for_node(value).strip()
        if counts[name] == 1 and len(text) <= CONSTANT_CHARS:
            yield name, text


def _classes(index: Any) -> Iterator[ClassRecord]:
    for cls in index.nodes(cst.ClassDef):
        if any(isinstance(a, cst.FunctionDef | cst.ClassDef) for a in index.ancestors(cls)):
            continue
        bases = tuple(name for base in cls.bases if (name := dotted_name(base.value)) is not None)
        methods = tuple(
            statement.name.value
            for statement in cls.body.body
            if isinstance(statement, cst.FunctionDef)
        )
        yield ClassRecord(cls.name.value, bases, methods)
