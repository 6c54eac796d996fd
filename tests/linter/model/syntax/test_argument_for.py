"""Tests for `linter.model.syntax.argument_for`: what a call hands a function for a parameter."""

from __future__ import annotations

import libcst as cst

from linter.model.syntax import argument_for


def _call_and_function(source: str) -> tuple[cst.Call, cst.FunctionDef]:
    module = cst.parse_module(source)
    function = next(s for s in module.body if isinstance(s, cst.FunctionDef))
    statement = module.body[-1]
    assert isinstance(statement, cst.SimpleStatementLine)
    expression = statement.body[0]
    assert isinstance(expression, cst.Expr)
    assert isinstance(expression.value, cst.Call)
    return expression.value, function


def _code(node: cst.BaseExpression | None) -> str | None:
    return None if node is None else cst.Module([]).code_for_node(node)


def test_positional_argument_stands_for_the_parameter_at_its_place() -> None:
    call, function = _call_and_function("def train(model, loader, opt): ...\ntrain(m, dl, o)\n")
    assert _code(argument_for(call, function, "opt")) == "o"


def test_keyword_argument_stands_for_the_parameter_it_names() -> None:
    call, function = _call_and_function("def train(model, opt=None): ...\ntrain(m, opt=o)\n")
    assert _code(argument_for(call, function, "opt")) == "o"


def test_method_call_skips_self() -> None:
    call, function = _call_and_function("def fit(self, model, opt): ...\ntrainer.fit(m, o)\n")
    assert _code(argument_for(call, function, "opt")) == "o"


def test_parameter_left_to_its_default_has_no_argument() -> None:
    call, function = _call_and_function("def train(model, opt=None): ...\ntrain(m)\n")
    assert argument_for(call, function, "opt") is None


def test_positions_after_a_starred_argument_are_unknown() -> None:
    call, function = _call_and_function("def train(model, opt): ...\ntrain(*parts, o)\n")
    assert argument_for(call, function, "opt") is None
