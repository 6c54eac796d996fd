"""The shared index: the function around a node, asked again and again, and after a graft."""

from __future__ import annotations

import libcst as cst

from linter._parse import parse_module_anew
from linter.model.syntax._dotted_names import dotted_name
from linter.model.syntax._module_index import ModuleIndex
from linter.model.syntax._tree import walk

SOURCE = """\
x = f(1)

def outer(a):
    y = g(a.b)
    def inner():
        return h(y)
    class C:
        z = k()
    return inner

class D:
    def method(self):
        if self.m():
            return n()
"""


def _expected(index: ModuleIndex, node: cst.CSTNode) -> cst.FunctionDef | None:
    """The innermost FunctionDef among ``node``'s ancestors, found without any memory."""
    return next((a for a in index.ancestors(node) if isinstance(a, cst.FunctionDef)), None)


def test_every_node_gets_the_innermost_function_around_it_in_any_order() -> None:
    module = parse_module_anew(SOURCE)
    index = ModuleIndex(module)
    nodes = list(walk(module))
    for order in (nodes, nodes[::-1], nodes[::3] + nodes):
        fresh = ModuleIndex(module)
        for node in order:
            assert fresh.enclosing_function(node) is _expected(index, node)
    names = {
        dotted_name(call.func): (f.name.value if (f := index.enclosing_function(call)) else None)
        for call in index.nodes(cst.Call)
    }
    assert names == {"f": None, "g": "outer", "h": "inner", "k": "outer", "self.m": "method",
                     "n": "method"}  # fmt: skip


def test_a_graft_moved_under_another_function_answers_from_its_new_place() -> None:
    module = parse_module_anew(SOURCE)
    index = ModuleIndex(module)
    grafted = parse_module_anew("def helper():\n    return deep()\n").body[0]
    assert isinstance(grafted, cst.FunctionDef)
    (deep,) = [n for n in walk(grafted) if isinstance(n, cst.Call)]
    calls = {dotted_name(c.func): c for c in index.nodes(cst.Call)}
    index.attach(grafted, calls["g"])
    assert index.enclosing_function(grafted) is _expected(index, grafted)
    assert index.enclosing_function(grafted).name.value == "outer"  # type: ignore[union-attr]
    index.attach(grafted, calls["self.m"])
    assert index.enclosing_function(grafted).name.value == "method"  # type: ignore[union-attr]
    assert index.enclosing_function(deep) is grafted


def test_nodes_hung_elsewhere_forget_the_function_they_were_under() -> None:
    module = parse_module_anew(SOURCE)
    index = ModuleIndex(module)
    statement = parse_module_anew("value = deep(1)\n").body[0]
    (deep,) = [n for n in walk(statement) if isinstance(n, cst.Call)]
    calls = {dotted_name(c.func): c for c in index.nodes(cst.Call)}
    index.attach(statement, calls["g"])
    assert index.enclosing_function(deep).name.value == "outer"  # type: ignore[union-attr]
    index.attach(statement, calls["f"])
    assert index.enclosing_function(deep) is None


def test_a_dotted_name_is_read_only_from_names_and_attributes() -> None:
    expression = cst.parse_expression
    assert dotted_name(expression("a.b.c")) == "a.b.c"
    assert dotted_name(expression("a")) == "a"
    for text in ("a().b", "a[0].b", "'s'.join", "(a + b).c", "1"):
        assert dotted_name(expression(text)) is None
