"""Positions from one statement's code: the ranges libcst's whole-module metadata gives, or none."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._parse import parse_module
from linter._positions import StatementPositions
from linter._rule import ModuleContext, positions_of
from linter.model.syntax._module_index import ModuleIndex

SHAPES = {
    "decorated": """
        # a comment before the decorators

        @first
        # between decorators
        @second(
            1,
        )

        # after them
        def f(x):
            return x + 1
        """,
    "elif chain": """
        def conv(dims):
            if dims == 1:
                return one()
            elif dims == 2:
                return two()
            elif dims == 3:
                return three()
            else:
                raise ValueError(dims)
        """,
    "nested blocks": """
        class Trainer:
            def step(self, batch):
                for x in batch:
                    with ctx:
                        try:
                            loss = self.model(x)
                        except RuntimeError:
                            pass
                        finally:
                            done()
                while True:
                    break
        """,
    "one-line suites and semicolons": """
        if ready: a = 1; b = 2
        for i in range(3): print(i)
        x = 1; y = f(x); z = [
            y,
        ]
        """,
    "tabs and odd indents": "def f():\n\tif x:\n\t   y = g(1)\n\treturn y\n",
    "continuation and strings": '''
        value = first + \\
            second(3)
        text = """a
        b"""; other = call(text)
        def g():
            """Doc
            string."""
            return h(
                1,
            )
        ''',
    "match and async": """
        async def run(command):
            async with lock:
                async for item in feed():
                    match item:
                        case {"kind": kind}:
                            await handle(kind)
                        case _:
                            pass
        """,
    "header comments": """
        #!/usr/bin/env python
        # header

        import os
        print(os.sep)
        """,
    "non-ascii": """
        def f():
            s = "héllo wörld"; t = g("日本語", s)
            return t
        """,
}


def _check(text: str) -> tuple[int, list[cst.CSTNode]]:
    module = parse_module(text)
    full = positions_of(module)
    index = ModuleIndex(module)
    positions = StatementPositions(module, text, index.parent)
    told, untold = 0, []
    for node in index.parent:
        found = positions.get(node)
        if found is None:
            untold.append(node)
            continue
        assert found == full[node], (type(node).__name__, found, full[node])
        told += 1
    header = {n for line in module.header for n in (line, line.comment) if n is not None}
    # Only a module header's empty lines and comments lie outside every statement.
    assert set(untold) <= header, untold
    return told, untold


@pytest.mark.parametrize("name", SHAPES)
def test_every_range_told_is_the_whole_module_metadata_range(name: str) -> None:
    told, _ = _check(textwrap.dedent(SHAPES[name]).lstrip("\n"))
    assert told > 0


def test_the_header_comments_are_left_to_the_metadata() -> None:
    text = "# header\nimport os\n"
    module = parse_module(text)
    index = ModuleIndex(module)
    positions = StatementPositions(module, text, index.parent)
    comment = module.header[0].comment
    assert comment is not None
    assert positions.get(comment) is None
    assert positions.get(module.body[0].body[0]) == positions_of(module)[module.body[0].body[0]]


def _second_statement_placed_against(source: str) -> object:
    """The range told for ``b = 2`` of the tree of ``a = 1; b = 2`` given ``source``."""
    module = parse_module("a = 1\nb = 2\n")
    positions = StatementPositions(module, source, ModuleIndex(module).parent)
    return positions.get(module.body[1].body[0])


def test_a_module_whose_statements_do_not_pair_tells_nothing() -> None:
    # Source CPython reads differently from the tree (here: the tree has a statement more)
    # must not be placed by pairing.
    assert _second_statement_placed_against("a = 1\n") is None


def test_statements_of_other_kinds_do_not_pair() -> None:
    # As many statements, of other kinds: pairing them would place nodes by chance.
    assert _second_statement_placed_against("a = 1\nf(b)\n") is None


def test_the_context_places_nodes_without_the_whole_module_metadata() -> None:
    text = "import os\n\ndef f():\n    return os.path.join('a', 'b')\n"
    module = parse_module(text)
    context = ModuleContext("m.py", text, module)
    call = next(n for n in ModuleIndex(module).nodes(cst.Call))
    where = context.position(call)
    assert (where.start.line, where.start.column) == (4, 11)
    assert context._resolved == {}
    assert where == positions_of(module)[call]
