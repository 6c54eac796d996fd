"""The result record every output format and the Python API share."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import total_ordering

from linter._fix import Fix


def one_line(text: str) -> str:
    """Messages and error reasons stay one line, whatever an exception's message holds."""
    return " ".join(text.split())


@dataclass(frozen=True, slots=True, order=True)
class RelatedLocation:
    """A second site a diagnostic refers to (e.g. where a model became bf16)."""

    #: 1-based line number.
    line: int
    #: 1-based column number.
    column: int
    #: What happens at this site, in a few words.
    message: str
    #: The notebook cell holding the site (``0``: not a notebook).
    cell: int = 0
    #: The file holding the site when it is another file (``""``: the diagnostic's own file),
    #: as the command line names files: relative to the current folder when under it, else
    #: absolute.
    path: str = ""


@total_ordering
@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding in one file; sorting orders by path, cell, line, column, code."""

    #: Path as given on the command line (or the stdin filename).
    path: str
    #: 1-based line number of the reported node's start.
    line: int
    #: 1-based column number of the reported node's start.
    column: int
    #: Stable rule code, e.g. ``AMP001``.
    code: str
    #: Human-readable explanation, one line.
    message: str
    #: The rule's kebab-case name, e.g. ``get-scale-every-step``.
    name: str = field(default="", compare=False)
    #: 1-based end line of the reported node.
    end_line: int = field(default=0, compare=False)
    #: 1-based end column (exclusive) of the reported node.
    end_column: int = field(default=0, compare=False)
    #: Other sites the finding refers to.
    related: tuple[RelatedLocation, ...] = field(default=(), compare=False)
    #: In a notebook, Jupyter's 1-based number of the cell (lines count within it); else ``0``.
    cell: int = 0
    #: How to fix the finding, when the rule knows (see `Fix.applicability`).
    fix: Fix | None = field(default=None, compare=False)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Diagnostic):
            return NotImplemented
        return self.sort_key < other.sort_key

    @property
    def sort_key(self) -> tuple[str, int, int, int, str, str]:
        """Path, cell, line, column, code, message: the order of every output."""
        return (self.path, self.cell, self.line, self.column, self.code, self.message)


@dataclass(frozen=True, slots=True, order=True)
class FileError:
    """A file (or folder) that could not be linted, or a rule that failed on it."""

    #: Path as given on the command line (or the stdin filename).
    path: str
    #: Why, in one line, e.g. ``cannot parse: ... at line 3, column 5``.
    message: str
