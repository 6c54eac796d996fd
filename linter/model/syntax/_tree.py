"""A node's children in source order, without libcst's visitor machinery.

``CSTNode.children`` runs a visitor over the node, which rebuilds and re-validates a copy of it
to collect what it visits: profiled on 11 real repositories that was most of a cold run (two
thirds of the time under ``visit``/``_visit_and_replace_children``). The order libcst visits a
node type's fields in is written in that type's ``_visit_and_replace_children`` as
``visit_*(self, "field", ...)``; read once per type, it gives the same children, in the same
order, from plain attribute reads. A type whose method cannot be read falls back to
``node.children``.
"""

from __future__ import annotations

import collections.abc
import inspect
import operator
import re
import types
import typing
from collections.abc import Callable, Iterator

import libcst as cst

_VISITED_FIELD = re.compile(r'visit_\w+\(\s*self,\s*"(\w+)"')

#: node type -> the names of its fields libcst visits, in its visiting order (None: unreadable).
_FIELDS: dict[type[cst.CSTNode], tuple[str, ...] | None] = {}

#: Node types that are only layout: whitespace, parentheses, brackets, braces, separators. Two
#: thirds of a module's nodes are these (whitespace alone 42% of 73,045 nodes of 20 real
#: files), and no analysis asks about them. Comments stay reachable (statement lines' trailing
#: whitespace, empty lines) except those inside parenthesised whitespace.
_LAYOUT = frozenset(
    {
        cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline, cst.Comma, cst.Dot,
        cst.AssignEqual, cst.Colon, cst.Semicolon, cst.LeftParen, cst.RightParen,
        cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace,
    }
)  # fmt: skip
_LAYOUT_NAMES = frozenset(kind.__name__ for kind in _LAYOUT)


def _visited_fields(kind: type[cst.CSTNode]) -> tuple[str, ...] | None:
    try:
        source = inspect.getsource(kind._visit_and_replace_children)
    except (OSError, TypeError):
        return None
    # dict.fromkeys: a field visited in two arms of a conditional (ImportFrom's names) once.
    return tuple(dict.fromkeys(_VISITED_FIELD.findall(source)))


_NODE, _LAYOUT_NODE, _MANY, _OTHER = "node", "layout", "many", "other"
#: Shapes `children` keeps; `code_children` keeps the first only.
_ANY_NODE = frozenset({_NODE, _LAYOUT_NODE})
_CODE = frozenset({_NODE})


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """What ``node.children`` gives, in the same order, at a fraction of its cost."""
    return _nodes(node, _ANY_NODE)


def code_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """`children` without layout nodes (whitespace, parentheses, separators: `_LAYOUT`): what
    the index and `descendants` walk, as no analysis asks about layout."""
    try:
        read = _CODE_READERS[type(node)]
    except KeyError:
        read = _reader(type(node), code=True)
    if read is None:
        return [c for c in node.children if type(c) not in _LAYOUT]
    return _values(read(node), _CODE)


def _nodes(node: cst.CSTNode, kept: frozenset[str]) -> list[cst.CSTNode]:
    try:
        read = _READERS[type(node)]
    except KeyError:
        read = _reader(type(node))
    if read is None:
        return [c for c in node.children if kept is _ANY_NODE or type(c) not in _LAYOUT]
    return _values(read(node), kept)


#: node type -> a getter of its visited fields' values, as a tuple (None: unreadable).
_READERS: dict[type[cst.CSTNode], Callable[[cst.CSTNode], tuple[object, ...]] | None] = {}
#: ...of the fields whose declared type allows a code node (see `_layout_only`).
_CODE_READERS: dict[type[cst.CSTNode], Callable[[cst.CSTNode], tuple[object, ...]] | None] = {}


def _layout_only(annotation: object) -> bool:
    """Whether a field declared with ``annotation`` can hold nothing but layout nodes, sentinels
    and plain data (``lpar: Sequence[LeftParen]``, ``whitespace_after_func:
    BaseParenthesizableWhitespace``): `code_children` need not read it. Unsure means no."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return all(_layout_only(a) for a in typing.get_args(annotation))
    if origin in (collections.abc.Sequence, list, tuple):
        return all(_layout_only(a) for a in typing.get_args(annotation) if a is not Ellipsis)
    if annotation in (cst.MaybeSentinel, type(None), str):
        return True
    if isinstance(annotation, type) and issubclass(annotation, cst.CSTNode):
        kinds = _concrete(annotation)
        # By name: libcst's slotted dataclasses leave their unslotted twins among subclasses.
        return bool(kinds) and all(kind.__name__ in _LAYOUT_NAMES for kind in kinds)
    return False


def _concrete(kind: type) -> list[type]:
    found = [] if inspect.isabstract(kind) else [kind]
    sub: type
    for sub in kind.__subclasses__():
        found.extend(_concrete(sub))
    return found


def _reader(
    kind: type[cst.CSTNode], *, code: bool = False
) -> Callable[[cst.CSTNode], tuple[object, ...]] | None:
    fields = _FIELDS[kind] = _visited_fields(kind)
    if code and fields is not None:
        try:
            hints = typing.get_type_hints(kind)
        except Exception:  # an annotation that does not resolve: read every field
            hints = {}
        fields = tuple(f for f in fields if f not in hints or not _layout_only(hints[f]))
    read: Callable[[cst.CSTNode], tuple[object, ...]] | None
    if fields is None:
        read = None
    elif len(fields) == 1:
        # One attrgetter call reads every field; with one name it returns the bare value.
        one = operator.attrgetter(fields[0])
        read = lambda node: (one(node),)  # noqa: E731  # a getter, kept in a table
    elif fields:
        read = operator.attrgetter(*fields)
    else:
        read = lambda node: ()  # noqa: E731
    (_CODE_READERS if code else _READERS)[kind] = read
    return read


def _values(values: tuple[object, ...], kept: frozenset[str]) -> list[cst.CSTNode]:
    """The nodes among field values, sequences flattened, of the shapes in ``kept``."""
    found: list[cst.CSTNode] = []
    for value in values:
        # By the value's exact type, from a table: isinstance against CSTNode, an ABC, was
        # most of this function's time.
        shape = _SHAPES.get(type(value))
        if shape is None:
            shape = _shape(type(value))
        if shape in kept:
            found.append(value)  # type: ignore[arg-type]  # its shape says it is a node
        elif shape is _MANY:
            found.extend(
                item
                for item in value  # type: ignore[attr-defined]  # its shape says it is a sequence
                if (_SHAPES.get(type(item)) or _shape(type(item))) in kept
            )
    return found


#: value type -> whether it is a node, a sequence of nodes or neither.
_SHAPES: dict[type, str] = {}


def _shape(kind: type) -> str:
    if issubclass(kind, cst.CSTNode):
        shape = _LAYOUT_NODE if kind in _LAYOUT else _NODE
    elif issubclass(kind, (tuple, list)):
        shape = _MANY
    else:
        shape = _OTHER
    _SHAPES[kind] = shape
    return shape


def walk(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``root``, ``root`` included, in no particular order: for the rare
    question the index does not collect for (what ``libcst.matchers.findall`` does, without
    importing the matchers, which costs more than linting a small project)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes under ``node`` (not ``node`` itself) in source order, layout left out (see
    `code_children`)."""
    stack = code_children(node)
    stack.reverse()
    while stack:
        current = stack.pop()
        yield current
        below = code_children(current)
        below.reverse()
        stack.extend(below)
