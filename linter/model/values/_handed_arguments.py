"""What a call hands a function for one of its parameters.

A training function of another module (``train(model, loader, optimizer)``) works on what its
caller passes; the caller's analyses ask which of their expressions a parameter stands for.
"""

from __future__ import annotations

import libcst as cst

from linter.model.syntax import parameter_position


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
