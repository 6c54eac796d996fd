"""Guards that reach an ``if`` through a flag
(`linter.model.steps._per_step.PerStepAnalysis.guard`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.steps._per_step import PerStepAnalysis
from linter.model.steps._step_guards import Guard
from linter.model.syntax._module_index import module_index


def guards(source: str) -> list[Guard | None]:
    """The guard of every ``if`` of ``source``, in source order."""
    source = textwrap.dedent(source)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    index = module_index(context)
    analysis = PerStepAnalysis(context, index, lambda _node, _methods: False)
    ifs = [node for node in index.parent if isinstance(node, cst.If)]
    return [
        analysis.guard(node.test) for node in sorted(ifs, key=lambda n: context.line_and_column(n))
    ]


def test_a_flag_bound_to_a_modulo_test_is_periodic() -> None:
    assert guards("""
        for batch in loader:
            regularise = steps % 4 == 0
            if regularise:
                pass
    """) == [Guard("periodic", True)]


def test_a_negated_flag_fires_off_the_period() -> None:
    assert guards("""
        for batch in loader:
            regularise = steps % 4 == 0
            if not regularise:
                continue
    """) == [Guard("periodic", False)]


def test_a_flag_bound_to_configuration_is_no_guard() -> None:
    assert guards("""
        for batch in loader:
            regularise = args.penalty > 0
            if regularise:
                pass
    """) == [None]


def test_a_flag_bound_twice_is_unknown() -> None:
    assert guards("""
        def train(loader, args):
            regularise = steps % 4 == 0
            if args.always:
                regularise = True
            for batch in loader:
                if regularise:
                    pass
    """) == [None, None]
