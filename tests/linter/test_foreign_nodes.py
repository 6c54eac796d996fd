"""A grafted function attached again moves to its new site, nodes and all."""

from __future__ import annotations

import libcst as cst

from linter.model.project._module_context import ForeignNodes, ForeignSite
from linter.model.syntax._tree import descendants


def _site(module: cst.Module, via: cst.CSTNode, line: int) -> ForeignSite:
    return ForeignSite(via, "engine.py", "train", line, module)


def test_every_node_of_a_grafted_function_stands_for_its_latest_site() -> None:
    module = cst.parse_module("def train(model):\n    model.step()\n")
    root = module.body[0]
    inner = [n for n in descendants(root) if isinstance(n, cst.Call)]
    first, second = cst.Name("a"), cst.Name("b")
    foreign = ForeignNodes()

    foreign.attach(root, _site(module, first, 3), None)
    assert foreign[inner[0]].via is first
    count = len(foreign)
    foreign.attach(root, _site(module, second, 9), None)

    assert foreign[inner[0]].via is second
    assert foreign[root].first_line == 9
    assert len(foreign) == count
    assert cst.Name("x") not in foreign


def test_only_the_given_nodes_are_registered_when_the_caller_walked_them() -> None:
    module = cst.parse_module("def train(model):\n    model.step()\n")
    root = module.body[0]
    call = next(n for n in descendants(root) if isinstance(n, cst.Call))
    foreign = ForeignNodes()

    foreign.attach(root, _site(module, cst.Name("a"), 1), [root, call])

    assert set(foreign) == {root, call}
    assert call.func not in foreign
