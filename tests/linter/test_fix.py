"""Fixes: applied safe-only by default, verified, convergent, suppressed by noqa, configurable."""

from __future__ import annotations

from fix_dummies import FIX_RULES, BrokenFix, Growing, PrintToLog, Shout, StubbornFix, WholeCall

from linter import Settings, fix_source, lint_source
from linter._engine import MAX_FIX_ROUNDS
from linter._fix import Edit, apply_edits


def test_lint_source_with_fix_returns_the_fixed_text() -> None:
    assert lint_source("print(1)\nx = 2\n", rules=[PrintToLog], fix=True) == "log(1)\nx = 2\n"


def test_diagnostics_carry_the_fix_as_edits() -> None:
    (diagnostic,) = lint_source("if x:\n    print(1)\n", rules=[PrintToLog])
    assert diagnostic.fix is not None
    assert diagnostic.fix.applicability == "safe"
    assert diagnostic.fix.edits == (Edit(2, 5, 2, 10, "log"),)


def test_fixed_findings_are_reported_as_fixed_not_remaining() -> None:
    result = fix_source("print(1)\nshout\n", rules=[PrintToLog, Shout])
    assert [d.code for d in result.fixed] == ["TST101"]
    assert [d.code for d in result.diagnostics] == ["TST103"]


def test_unsafe_fix_needs_unsafe_fixes() -> None:
    assert lint_source("shout\n", rules=[Shout], fix=True) == "shout\n"
    assert lint_source("shout\n", rules=[Shout], fix=True, unsafe_fixes=True) == "SHOUT\n"


def test_noqa_suppresses_the_fix_too() -> None:
    source = "print(1)  # noqa: TST101\nprint(2)\n"
    assert lint_source(source, rules=[PrintToLog], fix=True) == (
        "print(1)  # noqa: TST101\nlog(2)\n"
    )


def test_unfixable_setting_keeps_the_finding_unfixed() -> None:
    settings = Settings(unfixable=("TST101",))
    assert lint_source("print(1)\n", rules=[PrintToLog], settings=settings, fix=True) == (
        "print(1)\n"
    )


def test_fixable_setting_limits_fixes_to_the_rules_it_names() -> None:
    settings = Settings(fixable=("TST102",))
    fixed = lint_source("print(1)\nshow(2)\n", rules=FIX_RULES, settings=settings, fix=True)
    assert fixed == "print(1)\nlog(2)\n"


def test_a_fix_whose_result_does_not_parse_is_dropped_with_a_note() -> None:
    source = "breakme = 1\nprint(breakme)\n"
    result = fix_source(source, "m.py", rules=[BrokenFix, PrintToLog])
    # The print fix verifies on its own and is kept; the broken one is not applied.
    assert result.text == "breakme = 1\nlog(breakme)\n"
    assert result.notes[0] == "m.py:1:1: TST104 fix not applied: the fixed code does not parse"
    assert {d.code for d in result.diagnostics} == {"TST104"}


def test_a_fix_that_leaves_its_finding_is_dropped_with_a_note() -> None:
    result = fix_source("stubborn\n", "m.py", rules=[StubbornFix])
    assert result.text == "stubborn\n"
    assert result.notes == (
        "m.py:1:1: TST105 fix not applied: the finding is still reported after the fix",
    )


def test_overlapping_fixes_apply_one_round_after_another() -> None:
    # The outer call's replacement contains the inner call: the two edits overlap, so the inner
    # one waits for the next round instead of being merged blindly.
    result = fix_source("show(show(1))\n", rules=[WholeCall])
    assert result.text == "log(log(1))\n"
    assert len(result.fixed) == 2
    assert result.diagnostics == ()


def test_fixing_stops_after_the_round_limit() -> None:
    result = fix_source("grow\n", rules=[Growing])
    assert result.text == "(0, " * MAX_FIX_ROUNDS + "grow" + ")" * MAX_FIX_ROUNDS + "\n"
    assert [d.code for d in result.diagnostics] == ["TST106"]


def test_fixes_keep_crlf_line_endings() -> None:
    fixed = lint_source(b"x = 1\r\nif x:\r\n    print(x)\r\n", rules=[PrintToLog], fix=True)
    assert fixed == "x = 1\r\nif x:\r\n    log(x)\r\n"


def test_apply_edits_is_position_based() -> None:
    text = "ab\r\ncd\nef"
    assert apply_edits(text, [Edit(2, 2, 3, 1, "X"), Edit(1, 1, 1, 2, "")]) == "b\r\ncXef"
