"""Node replacements that fixes need: a new statement on its own line, a tensor wrapped in a
call, an entry added to a dict literal.

A `linter._fix.NodeFix` replaces nodes, never text. To add a line, a fix replaces the node that
ends the line above (a statement's newline, a comment line, a block's header) with an
``IndentedBlock`` whose header prints that same line end and whose body is the new statement at
the indentation of the line below: the text before and after stays byte for byte the same.
"""

from __future__ import annotations

import libcst as cst

from linter._rule import ModuleContext
from linter.model.syntax import ModuleIndex, children

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


def with_dict_entry(literal: cst.Dict, key: str, value: str, index: ModuleIndex) -> cst.Dict:
    """``literal`` with ``key: value`` (source text) after its last element, laid out as its
    elements are, each comment left on the line it was on, to be rendered in the literal's
    place (its line breaks' indentation written out)."""
    elements = list(literal.elements)
    last = elements[-1]
    # The last element takes the line break of the element before it (the next line starts
    # where the elements do) and the comment that ended its line (in its comma, or before the
    # closing brace: libcst's choice); the added one takes the last one's comma, without a
    # comment. Copying commas whole moved or doubled comments (yolov9's `'git': GIT_INFO,  #
    # {remote, branch, commit} ...` came back on the line after it).
    between = elements[-2].comma if len(elements) > 1 else cst.MaybeSentinel.DEFAULT
    if not isinstance(between, cst.Comma):
        between = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    closing = literal.rbrace.whitespace_before
    own = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
    ended = own if isinstance(own, cst.ParenthesizedWhitespace) else closing
    added = cst.DictElement(
        cst.parse_expression(key),
        cst.parse_expression(value),
        comma=_with_comment_of(last.comma, None),
    )
    elements[-1] = last.with_changes(comma=_with_comment_of(between, ended))
    rbrace = literal.rbrace
    if ended is closing and isinstance(closing, cst.ParenthesizedWhitespace):
        rbrace = rbrace.with_changes(
            whitespace_before=closing.with_changes(
                first_line=cst.TrailingWhitespace(), empty_lines=()
            )
        )
    replacement = literal.with_changes(elements=[*elements, added], rbrace=rbrace)
    # Rendered alone, outside its block: its line breaks' indentation is spelled out, so a
    # multi-line literal keeps its layout.
    return cst.ensure_type(replacement.visit(_Dedented(_block_indent(literal, index))), cst.Dict)


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


def _with_comment_of(
    comma: cst.Comma | cst.MaybeSentinel, source: cst.BaseParenthesizableWhitespace | None
) -> cst.Comma | cst.MaybeSentinel:
    """``comma`` (one that ends its line) with the comment, and the comment lines after it,
    that end the line of ``source``; with none when ``source`` is None or ends no line."""
    if not isinstance(comma, cst.Comma) or not isinstance(
        comma.whitespace_after, cst.ParenthesizedWhitespace
    ):
        return comma
    line = cst.TrailingWhitespace()
    empty: tuple[cst.EmptyLine, ...] = ()
    if isinstance(source, cst.ParenthesizedWhitespace):
        line, empty = source.first_line, tuple(source.empty_lines)
    return comma.with_changes(
        whitespace_after=comma.whitespace_after.with_changes(first_line=line, empty_lines=empty)
    )


class _Dedented(cst.CSTTransformer):
    """Line breaks that indent by the enclosing block's indentation, with it written out."""

    def __init__(self, indent: str) -> None:
        self._indent = indent

    def leave_ParenthesizedWhitespace(
        self, original_node: cst.ParenthesizedWhitespace, updated_node: cst.ParenthesizedWhitespace
    ) -> cst.ParenthesizedWhitespace:
        if not updated_node.indent:
            return updated_node
        last = cst.SimpleWhitespace(self._indent + updated_node.last_line.value)
        return updated_node.with_changes(indent=False, last_line=last)

    def leave_EmptyLine(
        self, original_node: cst.EmptyLine, updated_node: cst.EmptyLine
    ) -> cst.EmptyLine:
        # A comment line between the elements, as a line break's indentation.
        if not updated_node.indent:
            return updated_node
        whitespace = cst.SimpleWhitespace(self._indent + updated_node.whitespace.value)
        return updated_node.with_changes(indent=False, whitespace=whitespace)


def _block_indent(node: cst.CSTNode, index: ModuleIndex) -> str:
    blocks = [a for a in index.ancestors(node) if isinstance(a, cst.IndentedBlock)]
    default = index.module.default_indent
    return "".join(block.indent if block.indent is not None else default for block in blocks)
