"""Indentation that mixes tabs and spaces, made readable for libcst.

CPython's tokenizer measures a tab as a move to the next multiple of 8 columns (and rejects a
file whose indentation means different things with tabs of 8 and of 1: ``TabError``), so a file
it parses has one consistent reading. libcst measures differently and rejects some such files
("no matching outer block for dedent"). Expanding the tabs of each line's indentation to stops of
8 gives libcst the block structure CPython sees; nothing else in the file changes, so positions
map back by the length each line's indentation gained. Lines that start inside a multi-line
string keep their text: there, whitespace is data.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

#: CPython's tab stops (``Parser/tokenizer.c``: ``TABSIZE``).
TAB_SIZE = 8

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@dataclass(frozen=True, slots=True)
class ExpandedIndentation:
    """A module's text with tabs in indentation expanded, and how to map columns back."""

    #: The text libcst is given.
    text: str
    #: 1-based line to (original indentation length, expanded indentation length).
    shifts: dict[int, tuple[int, int]]

    def original_column(self, line: int, column: int) -> int:
        """The 1-based column in the file of a 1-based column in `text`."""
        if line not in self.shifts:
            return column
        original, expanded = self.shifts[line]
        if column - 1 < expanded:
            return min(column, original + 1)
        return column - expanded + original


def expand_indentation(text: str) -> ExpandedIndentation | None:
    """The text with its indentation's tabs expanded, or ``None`` when no line needs it (or the
    file is not one tokenize reads)."""
    if "\t" not in text:
        return None
    inside = _lines_starting_inside_a_token(text)
    if inside is None:
        return None
    pieces: list[str] = []
    shifts: dict[int, tuple[int, int]] = {}
    for number, line in enumerate(_LINE.findall(text), start=1):
        body = line.lstrip(" \t\f")
        indentation = line[: len(line) - len(body)]
        if "\t" in indentation and number not in inside and body.strip():
            expanded = indentation.expandtabs(TAB_SIZE)
            shifts[number] = (len(indentation), len(expanded))
            line = expanded + body
        pieces.append(line)
    if not shifts:
        return None
    return ExpandedIndentation("".join(pieces), shifts)


def _lines_starting_inside_a_token(text: str) -> set[int] | None:
    lines: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            lines.update(range(token.start[0] + 1, token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        return None
    return lines
