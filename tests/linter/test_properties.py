"""Property tests: the engine never raises, every position it reports lies inside the file, and
on generated training programs the checkpoint and scheduler rules report what the programs were
built to have."""

from __future__ import annotations

import re

import hypothesmith
import pytest
from checkpoints_and_schedulers import PREDICTED, TrainingProgram, disabled_scaler_program
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from lint_dummies import EveryName, PrintCall
from training_programs import training_program

from linter._diagnostic import Diagnostic
from linter._engine import lint_bytes, lint_text
from linter.rules import ALL_RULES

#: The rules the generated training programs are built to reach: all of them.
GENERATED_FOR = ALL_RULES
#: The rules whose findings each program predicts from its own construction.
PREDICTING = tuple(rule for rule in ALL_RULES if rule.code in PREDICTED)

# hypothesmith compiles what it generates, and CPython warns about calls like `1()` in it.
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")

LINE_BREAK = re.compile(r"\r\n|\r|\n")
# Bounded (hypothesmith's generators are slow) and derandomized, so CI runs the same cases every
# time; hypothesmith filters many of its own drafts, which is not a problem of the test.
BOUNDED = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
    derandomize=True,
)
FEW = settings(BOUNDED, max_examples=12)
MANY = settings(BOUNDED, max_examples=200)


def assert_inside(text: str, diagnostic: Diagnostic) -> None:
    lines = LINE_BREAK.split(text)
    sites = [(diagnostic.line, diagnostic.column), (diagnostic.end_line, diagnostic.end_column)]
    sites += [(related.line, related.column) for related in diagnostic.related]
    for line, column in sites:
        assert 1 <= line <= len(lines), (line, len(lines))
        assert 1 <= column <= len(lines[line - 1]) + 1, (line, column, lines[line - 1])


def all_rules() -> list:
    return [EveryName(), PrintCall(), *(rule() for rule in ALL_RULES)]


@MANY
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    report = lint_bytes("fuzz.py", data, all_rules())
    assert report.path == "fuzz.py"
    assert all(error.path == "fuzz.py" for error in report.errors)


@MANY
@given(
    st.text(alphabet=st.sampled_from("print(x)\n\r\t #:'\"\\é=[]{}.,0123456789ifdef"), max_size=200)
)
def test_python_looking_text_never_raises_and_positions_are_inside(text: str) -> None:
    report = lint_text("fuzz.py", text, all_rules())
    for diagnostic in report.diagnostics:
        assert_inside(text, diagnostic)


@BOUNDED
@given(hypothesmith.from_grammar())
def test_generated_programs_lint_cleanly_with_positions_inside(source: str) -> None:
    report = lint_text("generated.py", source, all_rules())
    assert report.errors == ()
    for diagnostic in report.diagnostics:
        assert_inside(source, diagnostic)


@FEW
@given(hypothesmith.from_node())
def test_generated_syntax_trees_lint_cleanly_with_positions_inside(source: str) -> None:
    report = lint_text("generated.py", source, all_rules())
    assert report.errors == ()
    for diagnostic in report.diagnostics:
        assert_inside(source, diagnostic)


@settings(BOUNDED, max_examples=80)
@given(training_program())
def test_training_loop_programs_run_the_real_rules_without_errors(
    program: TrainingProgram,
) -> None:
    source = program.source
    rules = [rule() for rule in GENERATED_FOR]
    # The point of these programs: they pass the pre-filters, so the rules really run.
    assert [type(rule).wants(source) for rule in rules] == [True] * len(rules)
    report = lint_text("train.py", source, rules)
    assert report.parsed
    assert report.errors == ()
    for diagnostic in report.diagnostics:
        assert_inside(source, diagnostic)


@pytest.mark.parametrize("rule", GENERATED_FOR, ids=lambda rule: rule.code)
def test_the_generated_programs_reach_findings_of_every_rule(rule) -> None:
    # Guards the fuzzing above against a generator that only ever makes clean programs.
    def has_finding(program: TrainingProgram) -> bool:
        report = lint_text("t.py", program.source, [rule()])
        return any(d.code == rule.code for d in report.diagnostics)

    # Generation only: shrinking the example found would cost more than finding it.
    find(
        training_program(),
        has_finding,
        settings=settings(BOUNDED, max_examples=300, phases=[Phase.generate]),
    )


def predicted_findings(program: TrainingProgram, rules: tuple[type, ...]) -> set[tuple[str, int]]:
    report = lint_text("train.py", program.source, [rule() for rule in rules])
    assert report.errors == ()
    return {(d.code, d.line) for d in report.diagnostics}


@BOUNDED
@given(training_program())
def test_checkpoint_and_scheduler_findings_are_those_the_program_was_built_with(
    program: TrainingProgram,
) -> None:
    # Each save, resume and scheduler step knows from how it was drawn whether AMP011/AMP015
    # must report it: a miss and a false alarm fail alike.
    assert predicted_findings(program, PREDICTING) == program.expected


@settings(BOUNDED, max_examples=10)
@given(disabled_scaler_program())
def test_checkpoints_beside_a_disabled_scaler_are_never_reported(program: TrainingProgram) -> None:
    amp011 = tuple(rule for rule in ALL_RULES if rule.code == "AMP011")
    assert predicted_findings(program, amp011) == set()
