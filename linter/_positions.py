"""Positions of a few nodes without generating the code of the whole module.

libcst's ``PositionProvider`` records every node's range while it generates the module's code:
for transformers' ``trainer.py`` (3,800 lines) that pass costs as much as parsing the file twice,
and a lint needs it only for the handful of nodes its findings name. Generating the code of the
one statement around such a node gives the same ranges, shifted: the statement starts its own
line, so only the line it starts on and the indentation of the blocks around it must be known.
CPython's parser gives the line: its statements, sorted by position with the outer first, are
libcst's simple and compound statements in pre-order, paired one to one. Every answer is checked
against that line (the statement's recorded start must be the line CPython gives it); a module
whose statements do not pair, or a node outside any statement (a module header's comment), gets
``None`` and the caller falls back to the whole module's metadata.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Mapping
from typing import cast

import libcst as cst
from libcst._position import CodeRange
from libcst.metadata import PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

__all__ = ["StatementPositions"]

#: Statements that hold a block of statements, and the fields holding them.
_BLOCKS: dict[type[cst.CSTNode], tuple[str, ...]] = {
    cst.If: ("body", "orelse"),
    cst.Else: ("body",),
    cst.For: ("body", "orelse"),
    cst.While: ("body", "orelse"),
    cst.With: ("body",),
    cst.FunctionDef: ("body",),
    cst.ClassDef: ("body",),
    cst.Try: ("body", "handlers", "orelse", "finalbody"),
    cst.TryStar: ("body", "handlers", "orelse", "finalbody"),
    cst.ExceptHandler: ("body",),
    cst.ExceptStarHandler: ("body",),
    cst.Finally: ("body",),
    cst.Match: ("cases",),
    cst.MatchCase: ("body",),
    cst.IndentedBlock: ("body",),
    cst.SimpleStatementSuite: ("body",),
    cst.SimpleStatementLine: ("body",),
}

#: libcst statement class names that CPython spells otherwise (``async`` forms aside).
_KINDS = {"Del": "Delete"}

#: A statement's block: what the statement's own line starts (libcst places it; CPython names
#: the line).
_Line = cst.SimpleStatementLine | cst.BaseCompoundStatement


class StatementPositions:
    """Ranges of nodes of one module, each computed from the code of its statement alone."""

    def __init__(
        self, module: cst.Module, source: str, parent: Mapping[cst.CSTNode, cst.CSTNode]
    ) -> None:
        self._module = module
        self._source = source
        self._parent = parent
        self._lines: dict[cst.CSTNode, tuple[int, int]] | None = None
        self._paired = True
        self._found: dict[cst.CSTNode, CodeRange] = {}

    def get(self, node: cst.CSTNode) -> CodeRange | None:
        """The range ``PositionProvider`` gives ``node``, or None when it cannot be told here."""
        found = self._found.get(node)
        if found is not None:
            return found
        statement = self._statement(node)
        if statement is None:
            return None
        lines = self._statement_lines()
        if lines is None:
            return None
        first = _first(statement)
        known = lines.get(first)
        if known is None:
            return None
        computed = self._generate(statement, *known)
        if computed is None:
            return None
        self._found.update(computed)
        return computed.get(node)

    def _statement(self, node: cst.CSTNode) -> _Line | None:
        """The innermost statement line or compound statement holding ``node`` (an ``elif``:
        its ``if``, whose code writes the keyword)."""
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(current, _Line):
            current = self._parent.get(current)
        while isinstance(current, cst.If) and isinstance(self._parent.get(current), cst.If):
            current = self._parent[current]
        return cast("_Line | None", current)

    def _generate(
        self, statement: _Line, first_line: int, line: int
    ) -> dict[cst.CSTNode, CodeRange] | None:
        """The ranges of ``statement``'s nodes: its code starts on ``first_line`` (a first
        decorator's), its statement proper on ``line``."""
        indents: list[str] = []
        default = self._module.default_indent
        above = self._parent.get(statement)
        while above is not None:
            if isinstance(above, cst.IndentedBlock):
                indents.append(default if above.indent is None else above.indent)
            above = self._parent.get(above)
        provider = PositionProvider()
        state = PositionProvidingCodegenState(
            default_indent=self._module.default_indent,
            default_newline=self._module.default_newline,
            provider=provider,
        )
        state.indent_tokens = indents[::-1]
        state.line = first_line - _lines_before_code(statement)
        try:
            statement._codegen(state)
        except Exception:  # a tree codegen cannot write is no tree to place
            return None
        # PositionProvider's code generation records plain CodeRanges (no lazy values).
        computed = cast("dict[cst.CSTNode, CodeRange]", provider._computed)
        first = _first(statement)
        lines = self._lines or {}
        # The check that keeps this honest: every statement the code places starts on the
        # line CPython gives it.
        if first not in computed or any(
            computed[node].start.line != lines[node][1] for node in computed if node in lines
        ):
            self._paired = False
            return None
        return computed

    def _statement_lines(self) -> dict[cst.CSTNode, tuple[int, int]] | None:
        """libcst statement -> (its first decorator's line, else its own; its own line), as
        CPython gives them, or None when the two parsers' statements do not pair."""
        if self._lines is not None or not self._paired:
            return self._lines
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # A byte order mark is no character of the first line for libcst either.
                tree = ast.parse(self._source.removeprefix("\ufeff"))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            self._paired = False
            return None
        theirs = sorted(
            (node for node in ast.walk(tree) if isinstance(node, ast.stmt)),
            key=lambda node: (node.lineno, node.col_offset),
        )
        ours = _statements(self._module)
        if len(ours) != len(theirs):
            self._paired = False
            return None
        lines: dict[cst.CSTNode, tuple[int, int]] = {}
        for mine, other in zip(ours, theirs, strict=True):
            if _KINDS.get(type(mine).__name__, type(mine).__name__) != type(
                other
            ).__name__.removeprefix("Async"):
                self._paired = False
                return None
            decorators = getattr(other, "decorator_list", None)
            lines[mine] = (decorators[0].lineno if decorators else other.lineno, other.lineno)
        self._lines = lines
        return lines


def _statements(module: cst.Module) -> list[cst.CSTNode]:
    """The module's small and compound statements, in pre-order."""
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = list(reversed(module.body))
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BaseSmallStatement | cst.BaseCompoundStatement):
            found.append(node)
        below: list[cst.CSTNode] = []
        for name in _BLOCKS.get(type(node), ()):
            value = getattr(node, name)
            if value is None:
                continue
            if isinstance(value, cst.CSTNode):
                below.append(value)
            else:
                below.extend(value)
        stack.extend(reversed(below))
    return found


def _lines_before_code(statement: _Line) -> int:
    """Lines a statement's code generation writes before its first decorator or keyword: the
    empty and comment lines it owns."""
    count = len(statement.leading_lines)
    decorators = getattr(statement, "decorators", ())
    if decorators:
        count += len(decorators[0].leading_lines)
    return count


def _first(statement: _Line) -> cst.CSTNode:
    """The statement CPython names for a statement line (its first small statement)."""
    return statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else statement
