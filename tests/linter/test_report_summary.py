"""The summary line and --statistics, from hand-made results."""

from __future__ import annotations

from linter._diagnostic import Diagnostic, FileError
from linter.api import LintResult
from linter.report import format_statistics, summary_line


def finding(code: str, line: int = 1, path: str = "a.py") -> Diagnostic:
    return Diagnostic(path, line, 1, code, "message", name=f"rule-{code.lower()}")


def test_summary_singular_and_plural() -> None:
    assert summary_line(LintResult((finding("AMP001"),), (), 1, 1)) == "Found 1 error."
    two = (finding("AMP001"), finding("AMP001", 2))
    assert summary_line(LintResult(two, (), 1, 1)) == "Found 2 errors."
    assert summary_line(LintResult((), (), 1, 1)) == "All checks passed!"


def test_summary_counts_failed_files_once_each() -> None:
    errors = (FileError("a.py", "rule X failed"), FileError("a.py", "rule Y failed"))
    assert summary_line(LintResult((), errors, 1, 1)) == "No findings; 1 file could not be checked."


def test_statistics_most_frequent_first_then_by_code() -> None:
    diagnostics = (
        finding("AMP003"),
        finding("AMP005"),
        finding("AMP005", 2),
        finding("AMP002"),
        finding("AMP005", 3),
        finding("AMP002", 2),
    )
    assert format_statistics(LintResult(diagnostics, (), 1, 1)) == (
        "3\tAMP005\trule-amp005\n2\tAMP002\trule-amp002\n1\tAMP003\trule-amp003\n"
    )


def test_statistics_pads_counts_to_one_width() -> None:
    diagnostics = (*(finding("AMP001", line) for line in range(1, 11)), finding("AMP002"))
    assert format_statistics(LintResult(diagnostics, (), 1, 1)) == (
        "10\tAMP001\trule-amp001\n 1\tAMP002\trule-amp002\n"
    )
