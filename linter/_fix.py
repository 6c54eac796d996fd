"""Fixes as data: what a rule proposes (CST nodes to replace) and what the engine reports and
applies (text edits at 1-based positions, as ruff's JSON gives them).

A rule works on the syntax tree, so it proposes a fix as node replacements — a libcst
transformation — and never computes text offsets itself. The engine turns each replacement into
an `Edit` of the file's text, which every output format can show and which composes with other
fixes by position.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

#: A fix that keeps the program's meaning: ``--fix`` applies it.
SAFE = "safe"
#: A fix that changes behaviour in a way the user must review: only ``--unsafe-fixes`` applies it.
UNSAFE = "unsafe"
#: The applicabilities, in the order a run widens to them.
APPLICABILITIES = (SAFE, UNSAFE)

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class NodeFix:
    """A rule's proposed fix: replace each node with another, e.g. rename a method call.

    >>> call = cst.parse_expression("scaler.get_scale()")
    >>> rename = ((call.func.attr, cst.Name("peek_scale")),)
    >>> NodeFix("use peek_scale()", rename, UNSAFE).applicability
    'unsafe'
    """

    #: What the fix does, in a few words (shown by ``--show-fixes`` and in JSON).
    message: str
    #: (node in the parsed module, node to put in its place) pairs.
    replacements: tuple[tuple[cst.CSTNode, cst.CSTNode], ...]
    #: `SAFE` or `UNSAFE`.
    applicability: str = SAFE

    def __post_init__(self) -> None:
        if self.applicability not in APPLICABILITIES:
            raise ValueError(f"applicability must be one of {APPLICABILITIES}")


@dataclass(frozen=True, slots=True, order=True)
class Edit:
    """Replace the text between two 1-based positions (end exclusive) with ``content``."""

    #: 1-based line of the first replaced character.
    line: int
    #: 1-based column of the first replaced character.
    column: int
    #: 1-based line of the end position.
    end_line: int
    #: 1-based column just past the last replaced character.
    end_column: int
    #: The new text; empty to delete.
    content: str


@dataclass(frozen=True, slots=True)
class Fix:
    """A fix attached to a diagnostic: its edits, and whether ``--fix`` alone may apply it."""

    #: `SAFE` or `UNSAFE`.
    applicability: str
    #: What the fix does, in a few words.
    message: str
    #: Non-overlapping edits, in position order.
    edits: tuple[Edit, ...]

    def applies(self, unsafe_fixes: bool) -> bool:
        """Whether a run with (or without) ``--unsafe-fixes`` applies this fix."""
        return self.applicability == SAFE or unsafe_fixes


class LineIndex:
    """Offsets of line starts, so a 1-based (line, column) becomes a string index in O(1)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0, *(match.end() for match in _LINE_BREAK.finditer(text))]

    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column - 1

    def position(self, offset: int) -> tuple[int, int]:
        """The 1-based (line, column) of a string index."""
        from bisect import bisect_right

        line = bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1


def edit_spans(index: LineIndex, edits: Sequence[Edit]) -> list[tuple[int, int, str]]:
    """``(start, end, content)`` string ranges of ``edits``."""
    return [
        (index.offset(e.line, e.column), index.offset(e.end_line, e.end_column), e.content)
        for e in edits
    ]


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with non-overlapping ``edits`` applied (in one pass, linear in the text)."""
    spans = sorted(edit_spans(LineIndex(text), edits))
    pieces: list[str] = []
    cursor = 0
    for start, end, content in spans:
        if start < cursor:
            raise ValueError("overlapping edits")
        pieces += (text[cursor:start], content)
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def overlaps(first: Fix, second: Fix) -> bool:
    """Whether two fixes touch the same text (two insertions at one spot count as touching)."""
    return any(
        (a.line, a.column) <= (b.end_line, b.end_column)
        and (b.line, b.column) <= (a.end_line, a.end_column)
        for a in first.edits
        for b in second.edits
    )


def shifted_offset(offset: int, spans: Sequence[tuple[int, int, str]]) -> int:
    """Where a position before the edits is after them (edits at or past it do not move it)."""
    return offset + sum(
        len(content) - (end - start)
        for start, end, content in spans
        if end <= offset and start < offset
    )
