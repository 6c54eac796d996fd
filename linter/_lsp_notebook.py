"""LSP notebook documents as the linter reads notebooks: the cells as ``.ipynb`` JSON, and
where each code cell sits in the module the code cells make, to put a fix's edits in their cells.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lsprotocol import types
from pygls.workspace import TextDocument

from linter._buffer_edits import split_lines
from linter._fix import Edit


@dataclass(frozen=True, slots=True)
class CellLayout:
    """Where each code cell starts in the module a notebook's code cells make.

    A finding's fix comes positioned from the start of the finding's cell; an edit past that
    cell's end (or before its start) belongs to another cell, found here.
    """

    #: (first line in the module, cell URI), in order; markdown cells take no lines.
    starts: tuple[tuple[int, str], ...]

    @classmethod
    def of(cls, cells: Sequence[tuple[types.NotebookCell, TextDocument]]) -> CellLayout:
        starts, line = [], 1
        for cell, document in cells:
            if is_python_code(cell, document):
                starts.append((line, cell.document))
                line += len(split_lines(document.source))
        return cls(tuple(starts))

    def split(
        self, cell_uri: str, edits: Sequence[Edit]
    ) -> tuple[tuple[str, tuple[Edit, ...]], ...]:
        """``edits`` (counted from ``cell_uri``'s first line) as edits of each cell they touch."""
        shift = {uri: first for first, uri in self.starts}[cell_uri] - 1
        firsts = [first for first, _ in self.starts]
        by_cell: dict[str, list[Edit]] = {}
        for edit in edits:
            index = bisect.bisect_right(firsts, edit.line + shift) - 1
            first, uri = self.starts[index]
            local = edit.line + shift - first + 1, edit.end_line + shift - first + 1
            by_cell.setdefault(uri, []).append(replace(edit, line=local[0], end_line=local[1]))
        return tuple((uri, tuple(cell_edits)) for uri, cell_edits in by_cell.items())


def is_python_code(cell: types.NotebookCell, document: TextDocument) -> bool:
    return cell.kind == types.NotebookCellKind.Code and document.language_id in ("python", None)


def as_ipynb(cells: Sequence[tuple[types.NotebookCell, TextDocument]]) -> str:
    """A notebook's cells as the ``.ipynb`` JSON the linter reads (code cells in Python only)."""
    out: list[dict[str, object]] = []
    for cell, document in cells:
        kind = "code" if is_python_code(cell, document) else "markdown"
        out.append({"cell_type": kind, "metadata": {}, "source": document.source})
    return json.dumps(
        {
            "cells": out,
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )
