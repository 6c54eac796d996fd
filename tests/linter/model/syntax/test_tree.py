"""The tree primitives the model walks with agree with libcst's own, node for node."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from linter._rule import positions_of
from linter.model.syntax._tree import children, code_children, descendants, walk

ROOT = Path(__file__).resolve().parents[4]

#: Every construct of the grammar, in source shapes where libcst's field order and its visiting
#: order differ (decorators before the name, the test of a conditional expression after its
#: body, parenthesised and star imports, f-strings, match statements, type parameters).
GRAMMAR = '''\
from __future__ import annotations
from . import (a as b, c)
from .x import *
import os.path as p, sys
@decorator(1)
@other
async def f[T](x: int, /, y=2, *args: T, z, **kw) -> "R":
    """Doc."""
    global g
    nonlocal_ = lambda q, *r, s=1: (q, r, s)
    v = a if b else c
    w: list[int] = [i for i in range(3) if i for j in (1, 2)]
    d = {k: v for k, v in x.items()} | {**y, 1: 2}
    s = {1, *t}
    t = f"{x!r:>{w}} {y=}" "plain", rb"bytes"
    u = x[1:2, ::3, ...]
    async with a as (b, c), d:
        async for e in f:
            await g
            yield h
            yield from i
    try:
        raise E from F
    except (A, B) as e:
        pass
    else:
        del x[0], y.z
    finally:
        assert x, "m"
    try:
        pass
    except* C:
        pass
    while not (a and b or c):
        break
    else:
        continue
    match command:
        case [1, *rest] if rest:
            pass
        case {"k": v, **kw} | Point(x=0, y=_) as pt:
            pass
    x += 1; y @= m; z = w = ~-+n ** 2 // 3 % 4 << 5 >> 6 & 7 ^ 8
    return (n := 10) <= 11 < 12 != 13 is not None not in ()
class K(Base, metaclass=M):
    type Alias[U] = list[U]
    def method(self): ...
if __name__ == "__main__":
    print(*args, sep="", **kw)
'''


def _sources() -> list[tuple[str, str]]:
    files = sorted(ROOT.glob("linter/**/*.py")) + sorted(
        ROOT.glob("tests/linter/rules/fixtures/**/*.py")
    )
    return [("grammar", GRAMMAR), *((str(f.relative_to(ROOT)), f.read_text()) for f in files)]


@pytest.fixture(scope="module")
def modules() -> list[tuple[str, cst.Module]]:
    parsed = []
    for name, text in _sources():
        try:
            parsed.append((name, cst.parse_module(text)))
        except cst.ParserSyntaxError:
            continue  # a fixture that is broken on purpose
    return parsed


def test_children_are_libcsts_in_its_order(modules: list[tuple[str, cst.Module]]) -> None:
    kinds = set()
    for name, module in modules:
        stack: list[cst.CSTNode] = [module]
        while stack:
            node = stack.pop()
            expected = list(node.children)
            got = children(node)
            assert len(got) == len(expected), (name, type(node).__name__)
            assert all(a is b for a, b in zip(got, expected, strict=True)), (name, node)
            kinds.add(type(node))
            stack.extend(expected)
    # The sample reaches most of the grammar, the awkward nodes included.
    for kind in (cst.IfExp, cst.Decorator, cst.ImportStar, cst.MatchOr, cst.FormattedString):
        assert kind in kinds
    assert len(kinds) > 120


def test_the_grammar_sample_parses() -> None:
    assert cst.parse_module(GRAMMAR).code == GRAMMAR


def test_descendants_are_in_source_order_and_walk_reaches_them_all() -> None:
    module = cst.parse_module(GRAMMAR)
    names = [node.value for node in descendants(module) if isinstance(node, cst.Name)]
    assert names[:4] == ["__future__", "annotations", "a", "b"]
    assert names.index("decorator") < names.index("f") < names.index("T")
    # A conditional expression's body comes before its test, as in the source.
    assert names.index("a", names.index("v")) < names.index("b", names.index("v"))
    everything = list(walk(module))
    assert everything[0] is module
    assert len(everything) == len(set(map(id, everything))) == 1 + len(_full_preorder(module)[1:])
    # walk keeps layout (the noqa comments' whitespace); descendants leave it out.
    assert set(map(id, descendants(module))) < set(map(id, everything))


def test_positions_are_the_providers(modules: list[tuple[str, cst.Module]]) -> None:
    for _name, module in modules[:15]:
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        got = positions_of(module)
        assert dict(got) == dict(expected)


#: What `code_children` leaves out, with everything under it.
_LAYOUT = (
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline, cst.Comma, cst.Dot,
    cst.AssignEqual, cst.Colon, cst.Semicolon, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket,
    cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace,
)  # fmt: skip


def _full_preorder(node: cst.CSTNode) -> list[cst.CSTNode]:
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(reversed(current.children))
    return found


def _code_preorder(node: cst.CSTNode) -> list[cst.CSTNode]:
    """libcst's pre-order without layout nodes and what they hold."""
    found = []
    stack = [node]
    while stack:
        current = stack.pop()
        found.append(current)
        kept = [child for child in current.children if not isinstance(child, _LAYOUT)]
        stack.extend(reversed(kept))
    return found


def test_code_children_leave_out_layout_only(modules: list[tuple[str, cst.Module]]) -> None:
    comments = 0
    for name, module in modules:
        expected = _code_preorder(module)
        got = [module, *descendants(module)]
        assert len(got) == len(expected), name
        assert all(a is b for a, b in zip(got, expected, strict=True)), name
        comments += sum(isinstance(node, cst.Comment) for node in got)
        for node in got:
            assert code_children(node) == [c for c in children(node) if not isinstance(c, _LAYOUT)]
    assert comments > 0  # statement comments stay: noqa directives live there


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "tests/linter/fixtures").rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT / "tests/linter/fixtures")),
)
def test_code_children_are_libcsts_less_layout_on_every_project_fixture(path: Path) -> None:
    # `code_children` reads only the fields whose declared type allows a code node.
    try:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
    except cst.ParserSyntaxError:
        pytest.skip("a fixture that is broken on purpose")
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        every = list(node.children)
        assert code_children(node) == [c for c in every if not isinstance(c, _LAYOUT)]
        stack.extend(every)
