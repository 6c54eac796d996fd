"""`linter._noqa`: what a comment suppresses, and the edits that add or remove codes."""

from __future__ import annotations

import pytest

from linter._diagnostic import Diagnostic
from linter._fix import apply_edits
from linter._noqa import (
    FileDirective,
    Suppressions,
    add_codes,
    comment_without_codes,
    file_directive,
    noqa_comments,
    noqa_edits,
)


def finding(line: int, code: str = "AMP001") -> Diagnostic:
    return Diagnostic("t.py", line, 1, code, "m")


class TestFileDirective:
    def test_bare_directive_suppresses_every_code_in_the_file(self) -> None:
        text = "# amp-lint: noqa\nx = 1\n"
        assert file_directive(text) == FileDirective(everything=True)
        assert Suppressions.of(text).suppresses(finding(2, "AMP009"))

    def test_directive_with_codes_suppresses_only_those(self) -> None:
        text = "x = 1\n# amp-lint: noqa: AMP001, amp004\ny = 2\n"
        suppressions = Suppressions.of(text)
        assert suppressions.file == FileDirective(codes=frozenset({"AMP001", "AMP004"}))
        assert suppressions.suppresses(finding(3, "AMP004"))
        assert suppressions.suppresses(finding(1, "AMP001"))
        assert not suppressions.suppresses(finding(1, "AMP002"))

    def test_trailing_directive_is_not_a_file_directive(self) -> None:
        # After code it reads as meant for that line: silencing the file would be an accident.
        assert file_directive("x = 1  # amp-lint: noqa\n") == FileDirective()

    def test_directive_in_a_string_is_not_one(self) -> None:
        assert file_directive('s = """\n# amp-lint: noqa\n"""\n') == FileDirective()

    def test_ruff_file_directive_is_not_ours(self) -> None:
        assert file_directive("# ruff: noqa\n# flake8: noqa\n") == FileDirective()

    def test_file_directive_is_not_a_line_directive(self) -> None:
        suppressions = Suppressions.of("# amp-lint: noqa: AMP001\n")
        assert suppressions.lines == {}


class TestAddCodes:
    def test_a_line_without_comment_gets_one(self) -> None:
        text = "a = 1\nb = 2   \n"
        edits, refused = noqa_edits(text, [finding(2), finding(2, "AMP009")])
        assert refused == []
        assert apply_edits(text, edits) == "a = 1\nb = 2  # noqa: AMP001, AMP009\n"

    def test_existing_codes_are_extended_not_repeated(self) -> None:
        text = "b = 2  # noqa: F841, AMP001  # why\n"
        edits, _ = add_codes(text, {1: ["AMP001", "AMP002"]})
        assert apply_edits(text, edits) == "b = 2  # noqa: F841, AMP001, AMP002  # why\n"

    def test_bare_noqa_needs_nothing(self) -> None:
        assert add_codes("b = 2  # noqa\n", {1: ["AMP001"]}) == ([], [])

    def test_an_existing_comment_is_kept_before_the_directive(self) -> None:
        text = "x = f()  # type: ignore[attr-defined]\r\n"
        edits, _ = add_codes(text, {1: ["AMP004"]})
        assert (
            apply_edits(text, edits) == "x = f()  # type: ignore[attr-defined]  # noqa: AMP004\r\n"
        )

    @pytest.mark.parametrize(
        "text", ['x = f("""a\nb""")\n', "x = 1 + \\\n    2\n"], ids=["string", "backslash"]
    )
    def test_a_line_that_cannot_end_in_a_comment_is_refused(self, text: str) -> None:
        assert add_codes(text, {1: ["AMP001"]}) == ([], [1])

    def test_the_last_line_of_a_multiline_string_can_carry_one(self) -> None:
        text = 'x = f("""a\nb""")\n'
        edits, refused = add_codes(text, {2: ["AMP001"]})
        assert refused == []
        assert apply_edits(text, edits) == 'x = f("""a\nb""")  # noqa: AMP001\n'


class TestRemoveCodes:
    @pytest.mark.parametrize(
        ("comment", "drop", "expected"),
        [
            ("# noqa: AMP001, F841", ["AMP001"], "# noqa: F841"),
            ("# noqa:AMP001 AMP002", ["AMP002"], "# noqa:AMP001"),
            ("# noqa: AMP001", ["AMP001"], None),
            ("# type: ignore  # noqa: AMP001", ["AMP001"], "# type: ignore"),
            ("# noqa: AMP001  # the read is once", ["AMP001"], "# the read is once"),
            ("# noqa: AMP001 -- read once", ["AMP001"], "# read once"),
        ],
    )
    def test_only_the_dropped_codes_go(
        self, comment: str, drop: list[str], expected: str | None
    ) -> None:
        (noqa,) = noqa_comments(f"x = 1  {comment}\n").values()
        assert comment_without_codes(noqa, drop) == expected


def test_a_file_directive_may_carry_a_comment_after_its_codes() -> None:
    text = "# amp-lint: noqa: AMP001  # until the trainer is rewritten\nx = 1\n"
    assert file_directive(text) == FileDirective(codes=frozenset({"AMP001"}))
