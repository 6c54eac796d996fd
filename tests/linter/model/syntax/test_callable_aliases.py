"""alias_calls: a callable reached through a name and the calls of that name."""

from __future__ import annotations

import libcst as cst

from linter._rule import ModuleContext
from linter.model.syntax._callable_aliases import alias_calls
from linter.model.syntax._module_index import ModuleIndex


def _reference(source: str) -> tuple[ModuleIndex, cst.BaseExpression]:
    module = cst.parse_module(source)
    index = ModuleIndex(ModuleContext("s.py", source, module).module)
    (reference,) = [
        node
        for node in index.parent
        if isinstance(node, cst.Attribute) and node.attr.value == "target"
    ]
    return index, reference


def test_a_plain_alias_and_its_calls() -> None:
    index, ref = _reference("ac = lib.target\nwith ac():\n    ac(1)\nother()\n")
    found = alias_calls(index, ref)
    assert found is not None
    assert found.name == "ac"
    assert not found.partial
    assert len(found.calls) == 2


def test_an_attribute_alias_a_conditional_and_a_partial() -> None:
    index, ref = _reference("self.ctx = lib.target if c else null\nself.ctx()\nctx()\n")
    found = alias_calls(index, ref)
    assert found is not None
    assert found.name == "self.ctx"
    assert len(found.calls) == 1
    index, ref = _reference("p = functools.partial(lib.target, dtype=d)\np()\n")
    found = alias_calls(index, ref)
    assert found is not None
    assert found.partial
    assert len(found.calls) == 1


def test_no_binding_is_no_alias() -> None:
    index, ref = _reference("ok = f is lib.target\n")
    assert alias_calls(index, ref) is None
    index, ref = _reference("a = b = lib.target\n")
    assert alias_calls(index, ref) is None
