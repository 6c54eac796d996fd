"""Per-step reasons through same-module callers (`PerStepAnalysis.function_reason`): the search
of a function's callers, its cycles, and the memo of searches that found nothing."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

import linter.model.steps._per_step as per_step
from linter._rule import ModuleContext
from linter.model.steps._per_step import PerStepAnalysis
from linter.model.syntax._module_index import module_index


def reasons(source: str, *, fresh: bool = False) -> dict[str, str | None]:
    """Each function's reason, asked of one analysis in source order (``fresh``: of a new
    analysis per function, so that no answer can lean on an earlier one)."""
    source = textwrap.dedent(source)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    index = module_index(context)

    def analysis() -> PerStepAnalysis:
        return PerStepAnalysis(context, index, lambda _node, _methods: False, use_project=False)

    shared = analysis()
    return {
        function.name.value: (analysis() if fresh else shared).function_reason(function)
        for function in index.nodes(cst.FunctionDef)
    }


def clique(size: int, tail: str) -> str:
    """``size`` functions that each call all the others, then ``tail``."""
    functions = [
        f"def load{i}(x):\n" + "".join(f"    load{j}(x)\n" for j in range(size) if j != i)
        for i in range(size)
    ]
    return "\n".join(functions) + "\n" + textwrap.dedent(tail)


CYCLE_REACHED_THROUGH_A_CALLER = """
    def a(batch):
        b(batch)

    def b(batch):
        if batch is None:
            a(batch)

    def c(batch):
        a(batch)

    for batch in loader:
        c(batch)
"""

CYCLE_AND_A_LOOP_BEHIND_IT = """
    def inner(batch):
        outer(batch)

    def outer(batch):
        inner(batch)

    def step(batch):
        inner(batch)

    def fit(loader):
        for batch in loader:
            step(batch)
"""


@pytest.mark.parametrize(
    "source",
    [
        CYCLE_REACHED_THROUGH_A_CALLER,
        CYCLE_AND_A_LOOP_BEHIND_IT,
        clique(6, "def train(data):\n    for x in data:\n        load0(x)\n"),
        clique(6, "def train(data):\n    load0(data)\n"),
    ],
)
def test_one_analysis_answers_as_fresh_ones_do(source: str) -> None:
    # The memo of fruitless searches must not change an answer, whatever was asked before.
    assert reasons(source) == reasons(source, fresh=True)


def test_a_cycle_reaches_the_loop_behind_it() -> None:
    found = reasons(CYCLE_REACHED_THROUGH_A_CALLER)
    assert (
        found["b"]
        == "in `b()`, called in `a()`, called in `c()`, called inside the loop at line 12"
    )
    assert found["a"] == "in `a()`, called in `c()`, called inside the loop at line 12"


def test_functions_calling_each_other_are_searched_once_per_depth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Shape of transformers' `modeling_auto.py` (every class's `from_pretrained` calls the
    # others'): a search per path was 160k `_reason` calls and 7 s for that one file.
    calls = 0
    original = PerStepAnalysis._reason

    def counted(self: PerStepAnalysis, *args: object) -> str | None:
        nonlocal calls
        calls += 1
        return original(self, *args)  # type: ignore[arg-type]  # the args it was given

    monkeypatch.setattr(per_step.PerStepAnalysis, "_reason", counted)
    found = reasons(clique(8, "def train(data):\n    load0(data)\n"))
    assert set(found.values()) == {None}
    # Each of the 8 functions' 7 callers, searched at each of the 4 depths, about once: a
    # search per path is 8 * 7 ** 4 (the unmemoised count measured 14,820).
    assert calls < 8 * 7 * 4 * 8
