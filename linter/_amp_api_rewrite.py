"""The rewrite of a deprecated ``torch.cuda.amp`` / ``torch.cpu.amp`` use into ``torch.amp``'s
signature: AMP004's fix, as node replacements.

``torch.cuda.amp.autocast(False)`` must become ``torch.amp.autocast("cuda", enabled=False)``,
not ``torch.amp.autocast("cuda", False)``: ``torch.amp`` takes the device first, so positional
arguments become keywords (`linter.model.values._deprecated_amp_api.DEPRECATED` lists each
callable's
parameters). An import is pointed at ``torch.amp`` and keeps the names it binds, and every use
of those names is rewritten in the same fix, or none is: half a rename breaks the other half.
"""

from __future__ import annotations

import libcst as cst

from linter._fix import SAFE, UNSAFE, NodeFix
from linter.model.syntax import Bindings, dotted_name, last_part
from linter.model.values import (
    DEPRECATED,
    DEVICE_FIRST,
    DEVICE_KEYWORD,
    MODULES,
    PARENTS,
    Replacement,
    Use,
    head_name,
    local_name,
    new_spelling,
)

_NO_SPACE = cst.AssignEqual(
    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
)
_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _keyword(name: str, value: cst.BaseExpression, comma: object) -> cst.Arg:
    return cst.Arg(value=value, keyword=cst.Name(name), equal=_NO_SPACE, comma=comma)  # type: ignore[arg-type]  # comma is the call's own Comma or MaybeSentinel


def _new_args(call: cst.Call | None, spec: Replacement) -> tuple[cst.Arg, ...] | None:
    """The arguments of the ``torch.amp`` call; None when they cannot be mapped for sure."""
    args = call.args if call is not None else ()
    if any(arg.star == "*" for arg in args):
        return None
    positional = [arg for arg in args if arg.keyword is None and not arg.star]
    if len(positional) > len(spec.parameters) or args[: len(positional)] != tuple(positional):
        return None
    device = cst.SimpleString(f'"{spec.device}"')
    if spec.style == DEVICE_FIRST:
        converted = [
            _keyword(name, arg.value, arg.comma)
            for name, arg in zip(spec.parameters, positional, strict=False)
        ]
        rest = list(args[len(positional) :])
        if not converted and not rest:
            return (cst.Arg(device),)
        comma = _COMMA
        if call is not None and isinstance(
            call.whitespace_before_args, cst.ParenthesizedWhitespace
        ):
            comma = cst.Comma(whitespace_after=call.whitespace_before_args)
        return (cst.Arg(device, comma=comma), *converted, *rest)
    keyword = _keyword("device_type", device, cst.MaybeSentinel.DEFAULT)
    head = list(positional)
    rest = list(args[len(positional) :])
    if rest:
        keyword = keyword.with_changes(comma=_COMMA)
    elif head and head[-1].comma == cst.MaybeSentinel.DEFAULT:
        head[-1] = head[-1].with_changes(comma=_COMMA)
    return (*head, keyword, *rest)


def _without_device(expression: cst.BaseExpression) -> cst.BaseExpression:
    """``torch.cuda.amp.X`` (or ``torch.cuda.amp.grad_scaler.X``) -> ``torch.amp.X``: the
    ``.cuda``/``.cpu`` step and any submodule removed, the root spelling kept (``th.amp.X``)."""
    assert isinstance(expression, cst.Attribute)
    node = expression.value
    while isinstance(node, cst.Attribute) and node.attr.value not in ("cuda", "cpu"):
        node = node.value
    assert isinstance(node, cst.Attribute)
    amp = cst.Attribute(value=node.value, attr=cst.Name("amp"))
    return expression.with_changes(value=amp)


def _replacement(use: Use, func: cst.BaseExpression) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """(old node, new node) for one use, calling ``func``; None for a plain reference."""
    spec = DEPRECATED[use.qualified]
    if use.call is not None:
        args = _new_args(use.call, spec)
        if args is None:
            return None
        return use.call, use.call.with_changes(func=func, args=args)
    if use.decorator is not None and spec.style == DEVICE_KEYWORD:
        args = _new_args(None, spec)
        assert args is not None
        return use.expression, cst.Call(func=func, args=args)
    return None


#: One import edit and the local names whose uses it changes the meaning of.
_ImportEdit = tuple[tuple[cst.CSTNode, cst.CSTNode], tuple[str, ...]]


def _import_edits(statement: cst.Import | cst.ImportFrom) -> list[_ImportEdit] | None:
    """Point an import of deprecated names at ``torch.amp`` (its bound names unchanged)."""
    if isinstance(statement, cst.ImportFrom):
        if statement.module is None or isinstance(statement.names, cst.ImportStar):
            return None
        module = dotted_name(statement.module)
        imported = [dotted_name(alias.name) for alias in statement.names]
        bound = tuple(local_name(alias) for alias in statement.names)
        if module in MODULES and all(f"{module}.{name}" in DEPRECATED for name in imported):
            return [((statement.module, cst.parse_expression("torch.amp")), bound)]
        if module in PARENTS and imported == ["amp"]:
            return [((statement.module, cst.Name("torch")), bound)]
        return None
    edits: list[_ImportEdit] = [
        ((alias.name, cst.parse_expression("torch.amp")), (local_name(alias),))
        for alias in statement.names
        if alias.asname is not None and dotted_name(alias.name) in MODULES
    ]
    return edits or None


def applicability(use: Use, default: str) -> str:
    """``default`` for an autocast (unsafe where the file sets the autocast dtype), else safe."""
    return default if last_part(use.qualified) == "autocast" else SAFE


def direct_fix(use: Use, default: str) -> NodeFix | None:
    """The rewrite of a spelled-out ``torch.cuda.amp.X(...)`` use; None for a plain reference
    or arguments that cannot be mapped for sure."""
    pair = _replacement(use, _without_device(use.expression))
    if pair is None:
        return None
    return NodeFix(f"use `{new_spelling(use.qualified)}`", (pair,), applicability(use, default))


def import_fix(
    statement: cst.Import | cst.ImportFrom, group: list[Use], scopes: Bindings, default: str
) -> NodeFix | None:
    """One fix for an import and every use of the names it binds (never half of them)."""
    edits = _import_edits(statement)
    if edits is None:
        return None
    by_head = {id(head_name(use.expression)): use for use in group}
    replacements = [pair for pair, _names in edits]
    names = {name for _pair, bound in edits for name in bound}
    for name in sorted(names):
        if scopes.binding_count(statement, name) != 1:
            return None
        for read in scopes.references(statement, name):
            use = by_head.get(id(read))
            if use is None or len(scopes.visible(read)) != 1:
                return None
            pair = _replacement(use, use.expression)
            if pair is None:
                return None
            replacements.append(pair)
    strictest = UNSAFE if any(applicability(u, default) == UNSAFE for u in group) else SAFE
    return NodeFix("import from `torch.amp` and pass the device", tuple(replacements), strictest)
