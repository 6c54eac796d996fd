"""Node replacements that several fixes need: a new statement on its own line, a tensor wrapped
in a call.

A `linter._fix.NodeFix` replaces nodes, never text. To add a line, a fix replaces the node that
ends the line above (a statement's newline, a comment line, a block's header) with an
``IndentedBlock`` whose header prints that same line end and whose body is the new statement at
the indentation of the line below: the text before and after stays byte for byte the same.
"""

from __future__ import annotations

import libcst as cst

from linter._rule import ModuleContext
from linter.model._module_index import ModuleIndex
from linter.model._tree import children

#: One node replacement of a fix: (node in the parsed module, node to put in its place).
Replacement = tuple[cst.CSTNode, cst.CSTNode]


def line_before(
    context: ModuleContext, index: ModuleIndex, expression: cst.BaseExpression, statement: str
) -> Replacement | None:
    """``statement`` (one line of code) on its own line just above the plain statement made of
    ``expression`` (``expression`` or ``name = expression``, alone on its line), indented like
    it; None when ``expression`` is no such statement or the line above cannot carry it."""
    line, block = _statement_line(index, expression)
    if line is None or block is None:
        return None
    old = _line_end_before(line, block)
    if old is None:
        return None
    header = _as_header(context, old)
    if header is None:
        return None
    indent = _leading_whitespace(_source_line(context, context.position(line).start.line))
    body = [cst.parse_statement(f"{statement}\n")]
    return old, cst.IndentedBlock(body=body, header=header, indent=indent)


def wrapped_in_call(
    expression: cst.BaseExpression, func: cst.BaseExpression, around: cst.CSTNode | None = None
) -> Replacement:
    """``func(expression)`` in place of ``expression``, its own parentheses dropped (``(loss /
    n)`` -> ``scaler.scale(loss / n)``). With ``around`` an attribute whose value is
    ``expression`` (``(loss / n).backward``), that attribute is replaced instead: the
    parentheses lie outside the expression's own range."""
    wrapped = cst.Call(func=func, args=(cst.Arg(without_parentheses(expression)),))
    if isinstance(around, cst.Attribute) and around.value is expression:
        return around, around.with_changes(value=wrapped)
    return expression, wrapped


def without_parentheses(expression: cst.BaseExpression) -> cst.BaseExpression:
    """``expression`` without its own parentheses: ``loss / n`` of ``(loss / n)``."""
    return expression.with_changes(lpar=(), rpar=()) if expression.lpar else expression


def _statement_line(
    index: ModuleIndex, expression: cst.BaseExpression
) -> tuple[cst.SimpleStatementLine | None, cst.IndentedBlock | cst.Module | None]:
    """The line and block of a plain statement made of ``expression``."""
    statement = index.parent.get(expression)
    if isinstance(statement, cst.Assign | cst.AnnAssign) and statement.value is expression:
        pass
    elif not (isinstance(statement, cst.Expr) and statement.value is expression):
        return None, None
    line = index.parent.get(statement)
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None, None
    block = index.parent.get(line)
    if not isinstance(block, cst.IndentedBlock | cst.Module):
        return None, None
    return line, block


def _line_end_before(
    line: cst.SimpleStatementLine, block: cst.IndentedBlock | cst.Module
) -> cst.TrailingWhitespace | cst.EmptyLine | None:
    """The node that ends the source line just above ``line``: its last comment or blank
    line, the previous statement's newline, or the block's header."""
    if line.leading_lines:
        return line.leading_lines[-1]
    position = next(i for i, statement in enumerate(block.body) if statement is line)
    if position == 0:
        return block.header if isinstance(block, cst.IndentedBlock) else None
    node: cst.CSTNode = block.body[position - 1]
    while not isinstance(node, cst.TrailingWhitespace | cst.EmptyLine):
        if not children(node):
            return None
        node = children(node)[-1]
    return node


def _as_header(
    context: ModuleContext, old: cst.TrailingWhitespace | cst.EmptyLine
) -> cst.TrailingWhitespace | None:
    """The end of a line as an ``IndentedBlock`` header that prints the same text."""
    if isinstance(old, cst.TrailingWhitespace):
        return old
    text = _source_line(context, context.position(old).start.line)
    comment = old.comment.value if old.comment is not None else ""
    whitespace = text[: len(text) - len(comment)] if comment else text
    if whitespace.strip(" \t\f"):
        return None
    return cst.TrailingWhitespace(cst.SimpleWhitespace(whitespace), old.comment, old.newline)


def _source_line(context: ModuleContext, number: int) -> str:
    lines = context.source.splitlines()
    return lines[number - 1] if 0 < number <= len(lines) else ""


def _leading_whitespace(text: str) -> str:
    return text[: len(text) - len(text.lstrip(" \t"))]
