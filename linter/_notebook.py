"""Jupyter notebooks as one Python module: code cells joined in order, IPython syntax masked.

A scaler made in cell 2 is the same scaler in cell 5, so the code cells are linted together, as
the kernel runs them. IPython's own syntax (``%pip``, ``!nvidia-smi``, ``x = !ls``, ``obj?``,
``%%bash`` cells) is masked character for character — each masked line keeps its length and a
statement where there was one — so positions need no translation and a magic alone in an ``if``
body still parses. Findings are mapped back to ``cell N`` (every cell counts, markdown included,
from 1, as Jupyter numbers them) and a line within the cell.

Only the standard library's ``json`` is used: the linter needs the cells' text, nothing that
nbformat validates or upgrades. Writing back replaces code cells' ``source`` and keeps every
other field, the key order and the file's indentation, so a fix's diff shows only fixed lines.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import warnings
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from linter._diagnostic import Diagnostic, RelatedLocation
from linter._fix import Edit, Fix, apply_edits

#: The suffix that makes a file a notebook.
NOTEBOOK_SUFFIX = ".ipynb"

#: Cell magics whose body is Python (run, timed or captured); any other (``%%bash``,
#: ``%%writefile``, ``%%html``...) makes the whole cell foreign text.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3"})

#: A line magic or shell escape at the start of a line: ``%pip``, ``%%time``, ``!ls``, ``?obj``.
#: ``%`` and ``!`` need a name or command right after them, so that a continuation line
#: starting with Python's ``% b)`` or ``!= 3`` is left alone.
_MAGIC = re.compile(r"%%?[A-Za-z_]|![^\s=]|\?")
#: ``name = !cmd`` / ``name = %magic``: IPython's assignment forms.
_ASSIGNED_MAGIC = re.compile(r"^(\s*[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*)((?:%%?[A-Za-z_]|![^\s=]).*)$")
#: How rules' messages name another line of the module ("the loop at line 14").
_LINE_IN_MESSAGE = re.compile(r"\bline (\d+)\b")
#: One line and its line break, as Python counts lines (``str.splitlines`` also breaks at form
#: feeds and U+2028, which would shift every position after them).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
#: ``obj?`` / ``obj.attr??``: help requests.
_HELP = re.compile(r"^\s*[\w.]+\?\??\s*$")


class NotebookError(ValueError):
    """The file is not a notebook this linter can read; the message says why, in one line."""


@dataclass(frozen=True, slots=True)
class CodeCell:
    """One code cell's text and where it sits in the joined module."""

    #: Jupyter's 1-based number of the cell among all cells.
    number: int
    #: The cell's text (``source`` joined), ending in a line break when not empty.
    text: str
    #: Whether the line break at the end was added here (and must not be written back).
    added_newline: bool
    #: 1-based line of the joined module where the cell starts.
    first_line: int
    #: 1-based lines of the cell (its own numbering) that were masked.
    masked: frozenset[int]


def mask_cell(text: str) -> tuple[str, frozenset[int]]:
    """The cell with IPython syntax masked (same length per line), and the masked lines."""
    lines = _LINE.findall(text)
    masked: set[int] = set()
    out: list[str] = []
    first = lines[0].strip() if lines else ""
    foreign_cell = first.startswith("%%") and first[2:].split(" ")[0] not in PYTHON_CELL_MAGICS
    continued = False
    for number, line in enumerate(lines, start=1):
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        stripped = body.lstrip()
        indent = body[: len(body) - len(stripped)]
        if continued or foreign_cell or (number == 1 and first.startswith("%%")):
            new = indent + "#" + stripped[1:] if stripped else body
        elif _MAGIC.match(stripped) or _HELP.match(body):
            new = indent + _statement_mask(stripped)
        elif assigned := _ASSIGNED_MAGIC.match(body):
            new = assigned[1] + _statement_mask(assigned[2])
        else:
            out.append(line)
            continued = False
            continue
        masked.add(number)
        out.append(new + ending)
        continued = body.endswith("\\")
    return "".join(out), frozenset(masked)


def _statement_mask(magic: str) -> str:
    """``0`` then a comment, as long as ``magic``: still a statement (or a value) in place."""
    return "0" if len(magic) < 2 else "0#" + magic[2:]


def _commented(text: str) -> tuple[str, frozenset[int]]:
    """Every line of a cell turned into a comment of the same length (a cell left out)."""
    out: list[str] = []
    for line in _LINE.findall(text):
        body = line.rstrip("\r\n")
        stripped = body.lstrip()
        indent = body[: len(body) - len(stripped)]
        out.append((indent + "#" + stripped[1:] if stripped else body) + line[len(body) :])
    return "".join(out), frozenset(range(1, len(out) + 1))


def _syntax_problem(text: str) -> str | None:
    """Why CPython's parser rejects a cell on its own (``None``: it parses); nothing is run."""
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<cell>", "exec", flags=flags, dont_inherit=True)
    except SyntaxError as error:
        return f"{error.msg} at line {error.lineno}, column {error.offset}"
    except (RecursionError, MemoryError, ValueError) as error:
        return type(error).__name__
    return None


class Notebook:
    """A parsed ``.ipynb`` file whose code cells form one module."""

    def __init__(
        self, document: dict[str, Any], data: bytes, skipped: frozenset[int] = frozenset()
    ) -> None:
        self.document = document
        self.data = data
        #: Numbers of the code cells left out of the module (each line a comment).
        self.skipped = skipped
        self.cells: list[CodeCell] = []
        self._starts: list[int] = []
        pieces: list[str] = []
        line = 1
        for number, cell in enumerate(document["cells"], start=1):
            if cell.get("cell_type") != "code" or not _is_python(document):
                continue
            source = cell["source"]
            text = "".join(source) if isinstance(source, list) else source
            added = bool(text) and not text.endswith(("\n", "\r"))
            text += "\n" if added else ""
            masked_text, masked = _commented(text) if number in skipped else mask_cell(text)
            self.cells.append(CodeCell(number, text, added, line, masked))
            self._starts.append(line)
            pieces.append(masked_text)
            line += len(_LINE.findall(text))
        #: The joined, masked module the rules see.
        self.text = "".join(pieces)

    @classmethod
    def from_bytes(cls, data: bytes) -> Notebook:
        """Parse a notebook; `NotebookError` names what is wrong."""
        try:
            document = json.loads(data.decode("utf-8-sig"))
        except UnicodeDecodeError as error:
            raise NotebookError(
                f"not a Jupyter notebook: not UTF-8 ({error.reason} at byte {error.start})"
            ) from None
        except json.JSONDecodeError as error:
            raise NotebookError(
                f"not a Jupyter notebook: invalid JSON: {error.msg} at line {error.lineno}, "
                f"column {error.colno}"
            ) from None
        except RecursionError:
            raise NotebookError("not a Jupyter notebook: JSON nested too deeply") from None
        problem = _shape_problem(document)
        if problem:
            raise NotebookError(f"not a Jupyter notebook: {problem}")
        return cls(document, data)

    def broken_cells(self) -> dict[int, str]:
        """Code cells that do not parse even alone (say, pasted shell output), with why."""
        broken = {}
        module_lines = _LINE.findall(self.text)
        for cell in self.cells:
            start = cell.first_line - 1
            lines = module_lines[start : start + len(_LINE.findall(cell.text))]
            problem = _syntax_problem("".join(lines))
            if problem is not None and cell.number not in self.skipped:
                broken[cell.number] = problem
        return broken

    def without_cells(self, numbers: frozenset[int]) -> Notebook:
        """The notebook with those code cells left out of the module (written back untouched)."""
        return Notebook(self.document, self.data, self.skipped | numbers)

    def cell_at(self, line: int) -> CodeCell:
        """The code cell holding a 1-based line of the joined module."""
        return self.cells[bisect_right(self._starts, line) - 1]

    def present(self, diagnostic: Diagnostic) -> Diagnostic:
        """The diagnostic with lines counted within its cell, and the cell's number."""
        cell = self.cell_at(diagnostic.line)
        shift = cell.first_line - 1
        fix = diagnostic.fix
        if fix is not None:
            fix = replace(
                fix,
                edits=tuple(
                    replace(edit, line=edit.line - shift, end_line=edit.end_line - shift)
                    for edit in fix.edits
                ),
            )
        return replace(
            diagnostic,
            message=_LINE_IN_MESSAGE.sub(self._cell_line, diagnostic.message),
            cell=cell.number,
            line=diagnostic.line - shift,
            end_line=max(diagnostic.end_line - shift, 0),
            related=tuple(
                replace(
                    r, line=r.line - (own := self.cell_at(r.line)).first_line + 1, cell=own.number
                )
                for r in diagnostic.related
            ),
            fix=fix,
        )

    def _cell_line(self, match: re.Match[str]) -> str:
        """ "line 14" of the joined module, as "cell 5, line 2" (what Jupyter shows)."""
        line = int(match[1])
        if not self.cells or line < 1:
            return match[0]
        cell = self.cell_at(line)
        return f"cell {cell.number}, line {line - cell.first_line + 1}"

    def _located(self, related: RelatedLocation) -> RelatedLocation:
        cell = self.cell_at(related.line)
        return replace(related, line=related.line - cell.first_line + 1, cell=cell.number)

    def fix_fits(self, fix: Fix) -> bool:
        """Whether every edit stays inside one cell and off the masked IPython lines."""
        for edit in fix.edits:
            cell = self.cell_at(edit.line)
            if self.cell_at(edit.end_line) is not cell:
                return False
            local = range(edit.line - cell.first_line + 1, edit.end_line - cell.first_line + 2)
            if any(number in cell.masked for number in local):
                return False
        return True

    def apply(self, edits: Sequence[Edit]) -> Notebook:
        """A new notebook with ``edits`` (joined-module positions) applied to the cells' source."""
        by_cell: dict[int, list[Edit]] = {}
        for edit in edits:
            cell = self.cell_at(edit.line)
            shift = cell.first_line - 1
            by_cell.setdefault(cell.number, []).append(
                replace(edit, line=edit.line - shift, end_line=edit.end_line - shift)
            )
        document = copy.copy(self.document)
        document["cells"] = list(document["cells"])
        for cell in self.cells:
            if cell.number not in by_cell:
                continue
            text = apply_edits(cell.text, by_cell[cell.number])
            if cell.added_newline and text.endswith("\n"):
                text = text[:-1]
            original = document["cells"][cell.number - 1]
            source = (
                text.splitlines(keepends=True) if isinstance(original["source"], list) else text
            )
            document["cells"][cell.number - 1] = {**original, "source": source}
        return Notebook(document, self.data, self.skipped)

    def file_text(self, data: bytes) -> str:
        """What bytes of this file read as, for a diff."""
        return data.decode("utf-8-sig")

    def encode(self) -> bytes:
        """The notebook as JSON, written the way the original file was (nbformat's defaults:
        a one-space indent, non-ASCII kept as is, a closing line break)."""
        text = self.data.decode("utf-8-sig")
        indent_match = re.search(r"\n( +)\S", text)
        ascii_only = text.isascii() and "\\u" in text
        if indent_match:
            dumped = json.dumps(self.document, indent=len(indent_match[1]), ensure_ascii=ascii_only)
        else:
            dumped = json.dumps(self.document, ensure_ascii=ascii_only, separators=(",", ":"))
        if text.endswith("\n"):
            dumped += "\n"
        bom = "\ufeff" if text != self.data.decode("utf-8") else ""
        return (bom + dumped).encode("utf-8")


def _is_python(document: dict[str, Any]) -> bool:
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        info = metadata.get(key)
        if isinstance(info, dict) and isinstance(info.get(field), str):
            language: str = info[field]
            return language.lower() == "python"
    return True


def _shape_problem(document: Any) -> str | None:
    if not isinstance(document, dict):
        return f"the top level is a JSON {type(document).__name__}, not an object"
    cells = document.get("cells")
    if not isinstance(cells, list):
        if "worksheets" in document:
            return "nbformat 3 is not supported (save it with Jupyter 4 or later)"
        return 'no "cells" list'
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            return f"cell {number} has no cell_type"
        source = cell.get("source")
        if not (
            isinstance(source, str)
            or (isinstance(source, list) and all(isinstance(piece, str) for piece in source))
        ):
            return f"cell {number} has no source text"
    return None
