"""A call's arguments and a function's parameters, as call sites pass them.

``keyword(call, "dtype")``, ``positional(call, 0)``, the text of a string literal, where a
parameter sits among the arguments a call passes and what a call hands a function for one of its
parameters (a training function of another module works on what its caller passes): the small
questions every layer above asks of a call before it asks what the call means.
"""

from __future__ import annotations

import libcst as cst

__all__ = ["argument_for", "keyword", "parameter_position", "positional", "string_value"]


def parameter_position(function: cst.FunctionDef, name: str) -> int | None:
    """Position of parameter ``name`` as call sites pass it (``self`` excluded), else None."""
    params = function.params
    positional_params = [*params.posonly_params, *params.params]
    is_method = bool(positional_params) and positional_params[0].name.value in ("self", "cls")
    for position, param in enumerate(positional_params):
        if param.name.value == name:
            if is_method and position == 0:
                return None  # `self` itself: no caller passes it as an argument
            return position - 1 if is_method else position
    if any(param.name.value == name for param in params.kwonly_params):
        return 10**6  # keyword-only: never matched by position
    return None


def string_value(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call, position: int) -> cst.Arg | None:
    args = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return args[position] if 0 <= position < len(args) else None


def argument_for(call: cst.Call, function: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    """The expression ``call`` passes as parameter ``name`` of ``function``: by keyword, or by
    position (``self`` of a method is not passed); None when the call does not say (a default,
    ``*args``/``**kwargs``, a parameter of another name)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    position = parameter_position(function, name)
    if position is None:
        return None
    plain = []
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            break  # past a `*args`, positions are unknown
        plain.append(arg.value)
    return plain[position] if position < len(plain) else None
