"""Line numbers without libcst's position metadata, for the nodes summaries and messages name.

Resolving ``PositionProvider`` costs more than parsing (7.5 s against 5.1 s for transformers'
``trainer.py``, measured under load on this machine), and summaries need the lines of every
function, loop and call of every summarised file, while a lint needs positions only when it has
a finding. CPython's own parser gives the same lines in a fraction of that time: its calls, loops
and function definitions, sorted by position with the outer node first, are the same nodes in
the same order as libcst's pre-order lists, so they are matched one to one. A file where the
counts differ (an f-string quirk, syntax only one parser accepts) gets no map, and callers fall
back to the metadata.
"""

from __future__ import annotations

import ast
import textwrap
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TypeVar, cast

import libcst as cst

from linter.model.syntax._module_index import ModuleIndex

_Positioned = TypeVar("_Positioned", bound="ast.stmt | ast.expr")

#: libcst node type -> the CPython node types that are the same construct.
_PAIRS: tuple[tuple[type[cst.CSTNode], tuple[type[ast.AST], ...]], ...] = (
    (cst.Call, (ast.Call,)),
    (cst.For, (ast.For, ast.AsyncFor)),
    (cst.While, (ast.While,)),
    (cst.FunctionDef, (ast.FunctionDef, ast.AsyncFunctionDef)),
)


def line_numbers(text: str, index: ModuleIndex) -> Mapping[cst.CSTNode, tuple[int, int]] | None:
    """(1-based line, 1-based column) of the index's calls, loops and functions (a function's
    ``def`` line), or None when the two parsers disagree about them."""
    tree = _parsed(text)
    if tree is None:
        return None
    found: dict[type[ast.AST], list[ast.AST]] = {}
    for node in ast.walk(tree):
        found.setdefault(type(node), []).append(node)
    lines = text.splitlines()
    positions: dict[cst.CSTNode, tuple[int, int]] = {}
    # Only the last index's ends are kept (`line_numbers_cached` holds one index at a time).
    _ENDS.clear()
    _LINES.clear()
    ends = _ENDS.setdefault(id(index), {})
    _LINES[id(index)] = lines
    for cst_type, ast_types in _PAIRS:
        ours = index.nodes(cst_type)
        # Every paired kind is an ast.stmt or ast.expr, the node classes that carry positions.
        theirs = _in_order(
            node
            for kind in ast_types
            for node in cast("list[ast.stmt | ast.expr]", found.get(kind, []))
        )
        if len(ours) != len(theirs):
            return None
        for mine, other in zip(ours, theirs, strict=True):
            line = other.lineno
            positions[mine] = (line, column_of(lines, line, other.col_offset) + 1)
            if cst_type is cst.FunctionDef:
                ends[mine] = other.end_lineno or line
    return positions


def call_lines(text: str, calls: Sequence[cst.Call]) -> list[int] | None:
    """The 1-based start line of each of ``calls``, all of the calls of ``text``'s parse in
    source order (pre-order), paired as `line_numbers` pairs them; None when the parsers
    disagree. It leaves `line_numbers_cached`'s state alone."""
    tree = _parsed(text)
    if tree is None:
        return None
    theirs = _in_order(node for node in ast.walk(tree) if isinstance(node, ast.Call))
    if len(theirs) != len(calls):
        return None
    return [node.lineno for node in theirs]


def _parsed(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _in_order(nodes: Iterable[_Positioned]) -> list[_Positioned]:
    """CPython nodes in libcst's pre-order: by start, the outer (longer) node first."""
    return sorted(
        nodes,
        key=lambda n: (n.lineno, n.col_offset, -(n.end_lineno or 0), -(n.end_col_offset or 0)),
    )


#: id(index) -> function -> its last line, filled by `line_numbers` (see `function_source`).
_ENDS: dict[int, dict[cst.CSTNode, int]] = {}
#: id(index) -> the text's lines, kept with `_ENDS`.
_LINES: dict[int, list[str]] = {}


def function_source(text: str, index: ModuleIndex, function: cst.FunctionDef) -> str | None:
    """The function's lines from ``def`` to its end, dedented (decorators left out), when the
    line map has it: slicing the text costs nothing next to rendering the node."""
    positions = line_numbers_cached(text, index)
    ends = _ENDS.get(id(index), {})
    if positions is None or function not in ends:
        return None
    start = positions[function][0]
    # The text's lines as `line_numbers` split them: splitting again per function made a file
    # of many functions quadratic.
    lines = _LINES[id(index)]
    return textwrap.dedent("\n".join(lines[start - 1 : ends[function]])) + "\n"


_CACHE: dict[int, tuple[ModuleIndex, Mapping[cst.CSTNode, tuple[int, int]] | None]] = {}


def line_numbers_cached(
    text: str, index: ModuleIndex
) -> Mapping[cst.CSTNode, tuple[int, int]] | None:
    """`line_numbers` of ``index``, computed once while that index is the last one asked."""
    found = _CACHE.get(0)
    if found is None or found[0] is not index:
        _CACHE[0] = (index, line_numbers(text, index))
        found = _CACHE[0]
    return found[1]


@contextmanager
def lines_aside() -> Iterator[None]:
    """Number the lines of another module meanwhile (see `index_aside`) and keep the last line
    map, its function ends and its lines where they were."""
    cache, ends, lines = dict(_CACHE), dict(_ENDS), dict(_LINES)
    try:
        yield
    finally:
        _CACHE.clear()
        _CACHE.update(cache)
        _ENDS.clear()
        _ENDS.update(ends)
        _LINES.clear()
        _LINES.update(lines)


def column_of(lines: list[str], line: int, offset: int) -> int:
    """CPython's byte offset on ``line`` as a character count (libcst counts characters)."""
    if line - 1 >= len(lines):
        return offset
    text = lines[line - 1]
    if text.isascii():
        return offset
    return len(text.encode("utf-8")[:offset].decode("utf-8", errors="ignore"))
