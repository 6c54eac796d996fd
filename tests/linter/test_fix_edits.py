"""Node replacements fixes share (`linter._fix_edits`), applied and printed back."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._fix import Edit, apply_edits
from linter._fix_edits import Replacement, line_before, wrapped_in_call
from linter._rule import ModuleContext
from linter.model.syntax._module_index import module_index


def _applied(context: ModuleContext, replacement: Replacement) -> str:
    """The text after the replacement, spliced in as the engine does (by the old node's range)."""
    old, new = replacement
    where = context.position(old)
    start, end = where.start, where.end
    text = context.module.code_for_node(new)
    edit = Edit(start.line, start.column + 1, end.line, end.column + 1, text)
    return apply_edits(context.source, [edit])


def _clip_and_context(source: str) -> tuple[ModuleContext, cst.Call]:
    source = textwrap.dedent(source)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    (call,) = module_index(context).calls_named("clip")
    return context, call


def _inserted(source: str) -> str | None:
    context, call = _clip_and_context(source)
    replacement = line_before(context, module_index(context), call, "scaler.unscale_(opt)")
    if replacement is None:
        return None
    return _applied(context, replacement)


def test_a_line_goes_in_before_the_statement_at_its_indentation() -> None:
    assert _inserted(
        """\
        for x in loader:
            backward()
            norm = clip(params)
        """
    ) == textwrap.dedent(
        """\
        for x in loader:
            backward()
            scaler.unscale_(opt)
            norm = clip(params)
        """
    )


def test_a_line_goes_in_after_a_comment_line_and_first_in_a_block() -> None:
    assert _inserted(
        """\
        for x in loader:  # the loop
            clip(params)
        """
    ) == textwrap.dedent(
        """\
        for x in loader:  # the loop
            scaler.unscale_(opt)
            clip(params)
        """
    )
    assert _inserted(
        """\
        def f():
            step()
            # clip here
            clip(params)
        """
    ) == textwrap.dedent(
        """\
        def f():
            step()
            # clip here
            scaler.unscale_(opt)
            clip(params)
        """
    )


def test_no_line_for_an_expression_inside_another_or_sharing_its_line() -> None:
    assert _inserted("for x in y:\n    log(clip(params))\n") is None
    assert _inserted("for x in y:\n    a(); clip(params)\n") is None
    assert _inserted("clip(params)\n") is None  # first line of the module: no line above


def test_a_wrapped_expression_loses_its_parentheses_and_the_attribute_is_rewritten() -> None:
    call = cst.ensure_type(cst.parse_expression("(loss / n).backward()"), cst.Call)
    func = cst.ensure_type(call.func, cst.Attribute)
    scale = cst.parse_expression("scaler.scale")
    old, new = wrapped_in_call(func.value, scale, around=func)
    assert old is func
    assert cst.Module([]).code_for_node(new) == "scaler.scale(loss / n).backward"
    old, new = wrapped_in_call(cst.parse_expression("loss"), scale)
    assert cst.Module([]).code_for_node(new) == "scaler.scale(loss)"
