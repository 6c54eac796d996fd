"""PathFacts: which statements can run on one path, in which order (shared by the AMP rules)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.syntax._module_index import ModuleIndex
from linter.model.syntax._path_facts import Fact, PathFacts


def facts_of(source: str) -> tuple[PathFacts, dict[str, cst.Call]]:
    """PathFacts of ``source`` and its calls ``a()``, ``b()``... by callee name."""
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    index = ModuleIndex(ModuleContext("s.py", source, module).module)
    calls = {
        call.func.value: call  # type: ignore[attr-defined]
        for call in index.nodes(cst.Call)
        if isinstance(call.func, cst.Name) and len(call.func.value) == 1  # type: ignore[attr-defined]
    }
    return PathFacts(index), calls


@pytest.mark.parametrize(
    ("source", "exclusive"),
    [
        ("if x:\n    a()\nelif y:\n    b()\n", True),
        ("if x:\n    a()\nelse:\n    b()\n", True),
        ("if x:\n    a()\nif y:\n    b()\n", False),
        # Tests that give no facts: only the arms of one if/elif/else say they are exclusive.
        ("if x > 3:\n    a()\nelse:\n    b()\n", True),
        ("if n >= k:\n    a()\nelif n < 0:\n    pass\nelse:\n    b()\n", True),
        ("if x > 3:\n    a()\nif x > 3:\n    b()\n", False),
        ("if p == 'bf16':\n    a()\nif p == 'fp16':\n    b()\n", True),
        ("if p == 'bf16':\n    a()\nif p != 'bf16':\n    b()\n", True),
        ("if p in ('bf16', 'fp16'):\n    a()\nif p == 'fp16':\n    b()\n", False),
        ("if p in ('bf16',):\n    a()\nif p == 'fp16':\n    b()\n", True),
        ("if args.bf16:\n    a()\nif args.fp16:\n    b()\n", True),
        ("if args.bf16:\n    a()\nif self.args.fp16_full_eval:\n    b()\n", True),
        ("if args.bf16:\n    a()\nif args.deepspeed:\n    b()\n", False),
        ("if not x:\n    a()\nif x and y:\n    b()\n", True),
        # Flags read from a dict of options, in either quoting, are flags like attributes.
        ("if args['fp16']:\n    a()\nif not args[\"fp16\"]:\n    b()\n", True),
        ("if cfg['bf16']:\n    a()\nif cfg['fp16']:\n    b()\n", True),
        ("if cfg['fp16']:\n    a()\nif not cfg['amp']:\n    b()\n", False),
        ("if cfg[key]:\n    a()\nif not cfg[key]:\n    b()\n", False),
        ("if not (x or y):\n    a()\nif y:\n    b()\n", True),
        ("if x or y:\n    a()\nif not y:\n    b()\n", False),
        ("assert not (u and v)\nif u:\n    a()\nif v:\n    b()\n", True),
        ("assert u + v <= 1\nif u:\n    a()\nif v:\n    b()\n", True),
        ("assert not (u and w)\nif u:\n    a()\nif v:\n    b()\n", False),
        (
            "g = parser.add_mutually_exclusive_group()\n"
            "g.add_argument('--use-x')\ng.add_argument('--use-y')\n"
            "if args.use_x:\n    a()\nif args.use_y:\n    b()\n",
            True,
        ),
        # Two ifs of one test that breaks into no facts when it fails (VL-T5's `if fp16 and
        # native:` around the scaled backward, and in a second `if` whose `else` clips).
        ("if x and y:\n    a()\nif x and y:\n    pass\nelse:\n    b()\n", True),
        ("if (x and y):\n    a()\nif not (x  and y):\n    b()\n", True),
        ("if x and y:\n    a()\nif x and z:\n    pass\nelse:\n    b()\n", False),
        ("if x and y:\n    a()\nif x and y:\n    b()\n", False),
        # Complementary flags: each set true only where the other is set false, in the two
        # arms of one `if` (a GAN's `step_gen`/`step_dis`), as statements or one tuple.
        (
            "if i % 2:\n    g = False\n    d = True\nelse:\n    g = True\n    d = False\n"
            "if g:\n    a()\nif d:\n    b()\n",
            True,
        ),
        (
            "if i % 2:\n    g, d = False, True\nelse:\n    g, d = True, False\n"
            "if g:\n    a()\nif d:\n    b()\n",
            True,
        ),
        # ...not when an arm leaves the other flag as it was (true from an earlier pass),
        (
            "if i % 2:\n    d = True\nelse:\n    g = True\n    d = False\n"
            "if g:\n    a()\nif d:\n    b()\n",
            False,
        ),
        # ...nor when both are set true in one arm, or one is bound to something unknown.
        (
            "if i % 2:\n    g = d = True\nelse:\n    g = False\nif g:\n    a()\nif d:\n    b()\n",
            False,
        ),
        (
            "if i % 2:\n    g, d = False, True\nelse:\n    g, d = True, other\n"
            "if g:\n    a()\nif d:\n    b()\n",
            False,
        ),
    ],
)
def test_exclusive(source: str, exclusive: bool) -> None:
    paths, calls = facts_of(source)
    assert paths.exclusive(calls["a"], calls["b"]) is exclusive
    assert paths.exclusive(calls["b"], calls["a"]) is exclusive


def test_complementary_flags_beside_a_compound_statement_in_an_arm() -> None:
    # VL-T5's trainers: an arm that sets the two flags also holds an `if` (whose body is a
    # block, not a list of statements); reading it raised a TypeError and failed AMP003 on 10
    # files of the repository.
    paths, calls = facts_of(
        "if i % 2:\n    g = False\n    d = True\n    if verbose:\n        log()\n"
        "else:\n    for p in ps:\n        p.x = 1\n    g = True\n    d = False\n"
        "if g:\n    a()\nif d:\n    b()\n"
    )
    assert paths.exclusive(calls["a"], calls["b"])


def test_conditions_of_an_elif_arm() -> None:
    paths, calls = facts_of("if x:\n    pass\nelif p == 'fp16':\n    a()\n")
    assert paths.conditions(calls["a"]) == {Fact("x", "is", False), Fact("p", "==", "fp16")}


def test_a_dict_flag_is_one_subject_whatever_the_quotes() -> None:
    paths, calls = facts_of('if not opts["use_amp"]:\n    a()\n')
    assert paths.conditions(calls["a"]) == {Fact("opts['use_amp']", "is", False)}


def test_extra_facts_of_a_switch_contradict_a_branch() -> None:
    paths, calls = facts_of("if torch.cuda.is_bf16_supported():\n    a()\nb()\n")
    off = Fact("torch.cuda.is_bf16_supported()", "is", False)
    assert paths.exclusive(calls["a"], calls["b"], also_b={off})
    assert not paths.exclusive(calls["a"], calls["b"])


@pytest.mark.parametrize(
    ("source", "a_then_b", "b_then_a"),
    [
        ("def f():\n    a()\n    b()\n", True, False),
        ("def f():\n    for x in y:\n        b()\n        a()\n", True, True),
        ("def f():\n    if x:\n        a()\n        return\n    b()\n", False, False),
        ("def f():\n    if x:\n        a()\n        raise E\n    b()\n", False, False),
        ("def f():\n    if x:\n        a()\n    b()\n", True, False),
        ("def f():\n    if x:\n        a()\n    else:\n        b()\n", False, False),
        ("def f():\n    a()\ndef g():\n    b()\n", True, True),
    ],
)
def test_may_precede(source: str, a_then_b: bool, b_then_a: bool) -> None:
    paths, calls = facts_of(source)
    assert paths.may_precede(calls["a"], calls["b"]) is a_then_b
    assert paths.may_precede(calls["b"], calls["a"]) is b_then_a


@pytest.mark.parametrize(
    ("setter", "exclusive"),
    [
        ("if args.fp16:\n    self.use_amp = True\n", True),
        ("if args.fp16 and x:\n    self.use_amp = True\n", True),
        ("self.use_amp = args.fp16 or args.amp\n", False),
        ("if args.fp16:\n    self.use_amp = True\nif args.amp:\n    self.use_amp = True\n", False),
    ],
)
def test_a_derived_flag_implies_the_conditions_it_was_set_under(
    setter: str, exclusive: bool
) -> None:
    source = (
        "self.use_amp = False\n" + setter + "if args.bf16:\n    a()\nif self.use_amp:\n    b()\n"
    )
    paths, calls = facts_of(source)
    assert paths.exclusive(calls["a"], calls["b"]) is exclusive


def test_only_the_arms_of_one_if_are_exclusive_arms() -> None:
    paths, calls = facts_of(
        """
        if n > limit:
            a()
        else:
            b()
            if m > limit:
                c()
            else:
                d()
        """
    )
    assert paths.in_exclusive_arms(calls["a"], calls["b"])
    assert paths.in_exclusive_arms(calls["a"], calls["d"])
    assert paths.in_exclusive_arms(calls["c"], calls["d"])
    assert not paths.in_exclusive_arms(calls["b"], calls["c"])
