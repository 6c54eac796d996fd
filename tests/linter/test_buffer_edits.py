"""The edits the language server offers, on text: a ``# noqa`` for a line (read back by the
engine as intended, or not offered), the changed lines between two texts, the code under the
cursor in a ``# noqa:`` comment."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linter._buffer_edits import line_edits, noqa_code_at, noqa_edit, split_lines
from linter._engine import noqa_directives
from linter._fix import apply_edits


def suppressed(text: str, line: int, code: str) -> str | None:
    edit = noqa_edit(text, line, code)
    return None if edit is None else apply_edits(text, [edit])


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("s = scaler.get_scale()", "s = scaler.get_scale()  # noqa: AMP001"),
        ("s = scaler.get_scale()   ", "s = scaler.get_scale()  # noqa: AMP001"),
        ("s = scaler.get_scale()  # why", "s = scaler.get_scale()  # why  # noqa: AMP001"),
        ("s = scaler.get_scale()  # noqa: F841", "s = scaler.get_scale()  # noqa: F841, AMP001"),
        (
            "s = scaler.get_scale()  # NOQA:F841,E501 -- keep",
            "s = scaler.get_scale()  # NOQA:F841,E501, AMP001 -- keep",
        ),
    ],
)
def test_noqa_is_added_or_extended(line: str, expected: str):
    text = f"x = 1\n{line}\ny = 2\n"
    assert suppressed(text, 2, "AMP001") == f"x = 1\n{expected}\ny = 2\n"
    assert "AMP001" in (noqa_directives(f"x = 1\n{expected}\n")[2] or ())


@pytest.mark.parametrize("ending", ["\n", "\r\n", ""])
def test_noqa_keeps_the_line_break(ending: str):
    assert suppressed(f"a = b{ending}", 1, "AMP001") == f"a = b  # noqa: AMP001{ending}"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        # A comment after a backslash would break the statement.
        ("total = first + \\\n    second\n", 1),
        # The line ends inside a string: what is added there is text, not a comment.
        ('doc = """start\nscaler.get_scale()\n"""\n', 1),
        # Already suppressed, by code or by a bare noqa.
        ("s = scaler.get_scale()  # noqa: AMP001\n", 1),
        ("s = scaler.get_scale()  # noqa\n", 1),
        # No such line.
        ("x = 1\n", 3),
    ],
)
def test_noqa_is_not_offered_where_it_cannot_work(text: str, line: int):
    assert noqa_edit(text, line, "AMP001") is None


def test_the_code_under_the_cursor_in_a_noqa_comment():
    text = "s = 1\nt = scaler.get_scale()  # noqa: AMP001, F841  # AMP004 is not named\n"
    body = split_lines(text)[1]
    start = body.index("AMP001") + 1
    assert [noqa_code_at(text, 2, column) for column in range(start, start + 7)] == ["AMP001"] * 7
    assert noqa_code_at(text, 2, body.index("F841") + 1) == "F841"
    # A code the comment does not name, words that are not codes, another line.
    assert noqa_code_at(text, 2, body.index("AMP004") + 1) is None
    assert noqa_code_at(text, 2, body.index("get_scale") + 1) is None
    assert noqa_code_at(text, 1, 1) is None
    # A code before the comment is no code of the comment's.
    assert noqa_code_at("AMP001 = 1  # noqa: AMP001\n", 1, 1) is None


def test_line_edits_touch_only_the_changed_lines():
    before = "a\nb\nc\nd\n"
    edits = line_edits(before, "a\nB\nc\nd\ne\n")
    assert [(e.line, e.end_line, e.content) for e in edits] == [(2, 3, "B\n"), (5, 5, "e\n")]


#: Lines made of a few distinct pieces, so that texts share lines and differ in some.
LINES = st.lists(
    st.sampled_from(["a", "b", "", "  x = 1", "é😀"]).flatmap(
        lambda body: st.sampled_from([body + "\n", body + "\r\n", body])
    ),
    max_size=8,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(LINES, LINES)
def test_line_edits_turn_one_text_into_the_other(before: str, after: str):
    assert apply_edits(before, line_edits(before, after)) == after
