"""A node's children without libcst's visitor: the same nodes, in the same order."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from linter.model._tree import _LAYOUT, children, code_children

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: str(p.relative_to(FIXTURES))
)
def test_code_children_are_libcsts_children_less_layout(path: Path) -> None:
    try:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
    except cst.ParserSyntaxError:
        pytest.skip("not Python libcst parses (a fixture of broken input)")
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        every = list(node.children)
        assert children(node) == every
        assert code_children(node) == [c for c in every if type(c) not in _LAYOUT]
        stack.extend(every)
