"""bound_contexts: what a `with` statement enters when its item is a bound name."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter.model.syntax._module_index import ModuleIndex
from linter.model.syntax._path_facts import Fact, Facts
from linter.model.values._bound_contexts import bound_contexts


def entered(source: str) -> list[tuple[str, str, frozenset[Fact]]]:
    """(reported node, effective call, facts) for the last `with` item of ``source``."""
    module = cst.parse_module(textwrap.dedent(source))
    index = ModuleIndex(module)
    item = index.nodes(cst.With)[-1].items[0]
    return [
        (module.code_for_node(b.node), module.code_for_node(b.call), b.facts)
        for b in bound_contexts(index, Facts(module), item)
    ]


def test_each_arm_of_a_conditional_expression_is_a_candidate_with_its_facts() -> None:
    found = entered(
        """\
        ctx = torch.autocast("cuda") if args.fp16 else nullcontext()
        with ctx:
            pass
        """
    )
    assert found == [
        ('torch.autocast("cuda")', 'torch.autocast("cuda")', {Fact("args.fp16", "is", True)}),
        ("nullcontext()", "nullcontext()", {Fact("args.fp16", "is", False)}),
    ]


def test_both_arms_of_an_if_statement_bind_the_name() -> None:
    found = entered(
        """\
        def main():
            if fp16:
                ctx = torch.autocast("cuda")
            else:
                ctx = nullcontext()
            with ctx:
                pass
        """
    )
    assert [call for _node, call, _facts in found] == ['torch.autocast("cuda")', "nullcontext()"]


def test_a_partial_is_entered_by_calling_it_as_the_wrapped_call() -> None:
    found = entered(
        """\
        amp = functools.partial(torch.autocast, "cuda", dtype=torch.float16)
        with amp():
            pass
        """
    )
    assert found == [
        (
            'functools.partial(torch.autocast, "cuda", dtype=torch.float16)',
            'torch.autocast("cuda", dtype=torch.float16)',
            frozenset(),
        )
    ]


def test_a_partial_entered_uncalled_and_a_call_entered_by_calling_it_are_nothing() -> None:
    assert entered("amp = partial(torch.autocast, 'cuda')\nwith amp:\n    pass\n") == []
    assert entered("ctx = torch.autocast('cuda')\nwith ctx():\n    pass\n") == []


def test_a_self_attribute_is_read_from_any_method_of_its_class() -> None:
    found = entered(
        """\
        class Runner:
            def __init__(self):
                self.ctx = torch.autocast("cuda")

            def step(self):
                with self.ctx:
                    pass
        """
    )
    assert [call for _node, call, _facts in found] == ['torch.autocast("cuda")']


def test_a_parameter_shadows_the_module_binding() -> None:
    source = """\
        ctx = torch.autocast("cuda")

        def train(ctx):
            with ctx:
                pass
        """
    assert entered(source) == []


def test_a_module_binding_is_seen_from_a_function_that_does_not_bind_the_name() -> None:
    source = """\
        ctx = torch.autocast("cuda")

        def train():
            with ctx:
                pass
        """
    assert [call for _node, call, _facts in entered(source)] == ['torch.autocast("cuda")']


def test_a_call_written_in_place_is_left_to_the_caller() -> None:
    assert entered("with torch.autocast('cuda'):\n    pass\n") == []
