"""CPython's call lines paired with libcst's calls (`call_lines`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter.model.syntax._line_numbers import call_lines, function_source
from linter.model.syntax._module_index import ModuleIndex
from linter.model.syntax._tree import descendants


def _calls(module: cst.Module) -> list[cst.Call]:
    return [node for node in descendants(module) if isinstance(node, cst.Call)]


def test_each_call_gets_the_line_its_callee_starts_on() -> None:
    text = textwrap.dedent(
        """\
        def f(x):
            a = outer(
                inner(x),
            )
            b = (
                wrapped(x)
            )
            return g(x).h(y)
        """
    )
    module = cst.parse_module(text)
    calls = _calls(module)
    names = [cst.Module([]).code_for_node(call.func) for call in calls]
    assert names == ["outer", "inner", "wrapped", "g(x).h", "g"]
    assert call_lines(text, calls) == [2, 3, 6, 8, 8]


def test_calls_the_parsers_count_differently_get_no_lines() -> None:
    text = "f(x)\ng(y)\n"
    module = cst.parse_module(text)
    assert call_lines(text, _calls(module)[:1]) is None
    assert call_lines("def (:\n", []) is None


def test_pairing_calls_keeps_the_module_line_map() -> None:
    text = "def f(x):\n    return x\n"
    index = ModuleIndex(cst.parse_module(text))
    [function] = index.nodes(cst.FunctionDef)
    assert function_source(text, index, function) == text
    other = "g(1)\n"
    assert call_lines(other, _calls(cst.parse_module(other))) == [1]
    assert function_source(text, index, function) == text
