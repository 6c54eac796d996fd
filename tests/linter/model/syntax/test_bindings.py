"""The shared scope pass: which bindings a name read may mean, and which reads a binding has."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from linter.model.syntax._bindings import Bindings
from linter.model.syntax._module_index import ModuleIndex


def reads(source: str) -> tuple[Bindings, dict[int, cst.Name], cst.Module]:
    """Bindings of ``source`` and its reads of ``x``, by line."""
    module = cst.parse_module(textwrap.dedent(source))
    index = ModuleIndex(module)
    found = Bindings(index)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    by_line = {
        positions[name].start.line: name
        for name, _scope in found._reads.items()
        if name.value == "x"
    }
    return found, by_line, module


def kinds(nodes: list[cst.CSTNode]) -> list[str]:
    return [type(node).__name__ for node in nodes]


def test_a_function_reads_the_module_binding_unless_it_binds_the_name() -> None:
    found, x, _ = reads(
        """
        from torch.cuda.amp import autocast as x
        def f():
            return x
        def g():
            x = 1
            return x
        """
    )
    assert kinds(found.visible(x[4])) == ["ImportFrom"]
    assert kinds(found.visible(x[7])) == ["Assign"]


def test_a_class_body_is_not_an_enclosing_scope_for_its_methods() -> None:
    found, x, _ = reads(
        """
        x = 0
        class C:
            x = 1
            y = x
            def m(self):
                return x
        """
    )
    assert len(found.visible(x[5])) == 1
    assert found.visible(x[5]) != found.visible(x[7])
    module_binding = found.module_scope.bindings["x"]
    assert found.visible(x[7]) == module_binding


def test_global_and_nonlocal_move_the_binding() -> None:
    found, x, _ = reads(
        """
        def f():
            global x
            x = 2
        def g():
            return x
        """
    )
    assert kinds(found.visible(x[6])) == ["Assign"]
    assert kinds(found.module_scope.bindings["x"]) == ["Assign"]


def test_references_of_an_import_skip_shadowed_reads() -> None:
    found, x, module = reads(
        """
        import torch.cuda.amp as x
        a = x.autocast()
        def f(x):
            return x
        b = [x for x in range(3)]
        """
    )
    statement = module.body[0].body[0]
    refs = found.references(statement, "x")
    assert refs == [x[3]]
    assert found.binding_count(statement, "x") == 1


def test_attribute_names_and_keywords_are_not_reads() -> None:
    _, x, _ = reads("import x\nobj.x\nf(x=1)\nx.y\n")
    assert sorted(x) == [4]
