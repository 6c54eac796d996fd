"""The engine: decoding, pre-filter, positions, noqa, and one file's failure staying its own."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from lint_dummies import EveryName, Exploding, PrintCall

import linter._engine as engine
import linter._source as source_module
from linter._engine import decode_source, lint_bytes, lint_file, lint_text, noqa_directives


def run(text: str, *rules: type) -> engine.FileReport:
    return lint_text("m.py", text, [rule() for rule in (rules or (PrintCall,))])


def test_positions_are_one_based_lines_and_columns() -> None:
    report = run("if x:\n    print(1)\n")
    (diagnostic,) = report.diagnostics
    assert (diagnostic.line, diagnostic.column) == (2, 5)
    assert (diagnostic.end_line, diagnostic.end_column) == (2, 13)
    assert (diagnostic.code, diagnostic.name, diagnostic.path) == ("TST001", "print-call", "m.py")


def test_related_locations_are_one_based() -> None:
    (diagnostic,) = run("print(\n  value)\n").diagnostics
    (related,) = diagnostic.related
    assert (related.line, related.column, related.message) == (2, 3, "first argument")


def test_diagnostics_are_sorted_by_position() -> None:
    report = run("print(3)\nprint(1); print(2)\n")
    assert [(d.line, d.column) for d in report.diagnostics] == [(1, 1), (2, 1), (2, 11)]


def test_file_without_trigger_words_is_not_parsed() -> None:
    # A syntax error a parse would report proves no parse happened.
    report = run("def broken(:\n")
    assert report == engine.FileReport("m.py", (), (), parsed=False)


def test_file_with_trigger_word_is_parsed_even_without_findings() -> None:
    report = run("# print is mentioned only here\nx = 1\n")
    assert report.parsed
    assert report.diagnostics == ()


class PrintNextToInput(PrintCall):
    """A rule whose findings need two words together refines `wants`, and the engine obeys."""

    @classmethod
    def wants(cls, text: str) -> bool:
        return super().wants(text) and "input" in text


def test_refined_wants_keeps_a_file_with_one_trigger_word_unparsed() -> None:
    assert not run("print(1)\ndef broken(:\n", PrintNextToInput).parsed
    report = run("print(input())\n", PrintNextToInput)
    assert report.parsed
    assert [d.code for d in report.diagnostics] == ["TST001"]


def test_prefilter_of_a_file_job_uses_wants() -> None:
    unwanted = engine.Job("m.py", (PrintNextToInput(),), b"print(1)\n")
    wanted = engine.Job("m.py", (PrintNextToInput(),), b"print(input())\n")
    assert engine._prepare(unwanted, None) == (engine.FileReport("m.py"), None, None)
    assert engine._prepare(wanted, None)[1] is not None


def test_syntax_error_names_line_and_column() -> None:
    report = run("print(1)\nx = (1,\n")
    assert report.diagnostics == ()
    assert [(e.path, e.message) for e in report.errors] == [
        ("m.py", "cannot parse: '(' was never closed at line 2, column 5")
    ]


def test_syntax_python_accepts_but_libcst_rejects_is_blamed_on_libcst(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine, "ast", SimpleNamespace(parse=lambda text: None))
    (error,) = run("print(1)\nx = (1,\n").errors
    assert error.message.startswith("cannot parse: libcst: expected one of ")
    assert re.search(r" at line \d+, column \d+$", error.message)


def test_rule_that_raises_is_reported_and_other_rules_still_run() -> None:
    report = run("boom = 1\nprint(boom)\n", Exploding, PrintCall)
    assert [d.code for d in report.diagnostics] == ["TST001"]
    (error,) = report.errors
    assert error.message == "rule TST002 (exploding) failed: RuntimeError: the rule has a bug"


class FailsHalfway(PrintCall):
    code = "TST009"
    name = "fails-halfway"

    def check(self, context):  # type: ignore[no-untyped-def]
        yield from super().check(context)
        raise ValueError("first line\nsecond line")


def test_rule_failing_after_findings_reports_only_the_failure_on_one_line() -> None:
    report = run("print(1)\n", FailsHalfway)
    assert report.diagnostics == ()
    assert [e.message for e in report.errors] == [
        "rule TST009 (fails-halfway) failed: ValueError: first line second line"
    ]


def test_empty_file_is_clean() -> None:
    assert lint_bytes("m.py", b"", [EveryName()]) == engine.FileReport("m.py", parsed=True)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"print('caf\xc3\xa9')\n", "print('café')\n"),
        (b"\xef\xbb\xbfx = 1\n", "x = 1\n"),
        (
            b"# -*- coding: latin-1 -*-\nprint('caf\xe9')\n",
            "# -*- coding: latin-1 -*-\nprint('café')\n",
        ),
    ],
    ids=["utf-8", "utf-8-bom", "pep263-latin-1"],
)
def test_decoding_honours_bom_and_coding_cookie(data: bytes, text: str) -> None:
    assert decode_source(data) == text


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            b"print('caf\xe9')\n",
            "cannot decode as utf-8: invalid continuation byte at byte offset 10",
        ),
        (b"# coding: klingon\nx = 1\n", "bad encoding declaration: unknown encoding: klingon"),
        (b"x = 1\0\n", "source contains a NUL byte at byte offset 5"),
    ],
    ids=["bad-utf-8", "unknown-cookie", "nul-byte"],
)
def test_undecodable_bytes_give_one_error_line(data: bytes, reason: str) -> None:
    report = lint_bytes("m.py", data, [PrintCall()])
    assert [(e.path, e.message) for e in report.errors] == [("m.py", reason)]
    assert report.diagnostics == ()


def test_columns_count_code_points_after_non_ascii_text() -> None:
    (diagnostic,) = lint_bytes("m.py", "s = 'é'; print(s)\n".encode(), [PrintCall()]).diagnostics
    assert diagnostic.column == 10


class TestNoqa:
    def test_bare_noqa_suppresses_every_code_on_its_line(self) -> None:
        assert run("print(1)  # noqa\nprint(2)\n").diagnostics[0].line == 2

    def test_noqa_with_matching_code_suppresses(self) -> None:
        assert run("print(1)  # noqa: TST001\n").diagnostics == ()

    def test_noqa_with_other_codes_does_not_suppress(self) -> None:
        assert len(run("print(1)  # noqa: AMP001, TST009\n").diagnostics) == 1

    def test_noqa_lists_several_codes_case_insensitively(self) -> None:
        assert run("print(1)  # NOQA:AMP001,tst001\n").diagnostics == ()

    def test_noqa_on_another_line_does_not_suppress(self) -> None:
        assert len(run("# noqa\nprint(1)\n").diagnostics) == 1

    def test_noqa_inside_a_string_is_not_a_directive(self) -> None:
        assert len(run("print('# noqa')\n").diagnostics) == 1

    def test_noqa_colon_without_codes_is_ignored(self) -> None:
        assert len(run("print(1)  # noqa: not-a-code\n").diagnostics) == 1

    def test_noqa_after_another_comment_counts(self) -> None:
        assert run("print(1)  # type: ignore  # noqa: TST001\n").diagnostics == ()

    def test_directives_map_lines_to_codes(self) -> None:
        text = "a  # noqa\nb  # noqa: AMP001 AMP002\nc\n"
        assert noqa_directives(text) == {1: None, 2: frozenset({"AMP001", "AMP002"})}


class TestReadErrors:
    def test_missing_file(self, tmp_path: Path) -> None:
        report = lint_file(str(tmp_path / "gone.py"), [PrintCall()])
        assert report.errors[0].message == "cannot read: No such file or directory"

    def test_symlink_loop(self, tmp_path: Path) -> None:
        link = tmp_path / "loop.py"
        link.symlink_to(link)
        report = lint_file(str(link), [PrintCall()])
        assert report.errors[0].message == "cannot read: Too many levels of symbolic links"

    def test_folder_given_as_file(self, tmp_path: Path) -> None:
        report = lint_file(str(tmp_path), [PrintCall()])
        assert report.errors[0].message == "is a folder, not a file"

    def test_permission_denied(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        target = tmp_path / "secret.py"
        target.write_text("print(1)\n")
        if os.geteuid() == 0:  # root reads anything, so simulate what chmod does for others

            def deny(path: str, mode: str = "r") -> None:
                raise PermissionError(13, "Permission denied", path)

            monkeypatch.setattr(source_module, "open", deny, raising=False)
        else:
            target.chmod(0)
        report = lint_file(str(target), [PrintCall()])
        assert report.errors[0].message == "cannot read: Permission denied"

    def test_huge_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(source_module, "MAX_FILE_BYTES", 2**20)
        target = tmp_path / "huge.py"
        target.write_bytes(b"x = 1\n" * 400_000)
        report = lint_file(str(target), [PrintCall()])
        assert report.errors[0].message == "file is too large (2 MiB; the limit is 1 MiB)"


def test_named_pipe_is_reported_not_read(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.py"
    os.mkfifo(pipe)
    report = lint_file(str(pipe), [PrintCall()])
    assert report.errors[0].message == "not a regular file"


def test_a_run_without_worker_processes_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import concurrent.futures

    class NoWorkers:
        def __init__(self, *args, **kwargs) -> None:
            raise OSError(38, "Function not implemented")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", NoWorkers)
    monkeypatch.setattr(engine, "_SAID_SERIAL", [])
    jobs = []
    for number in range(engine.PARALLEL_MIN_FILES):
        path = tmp_path / f"f{number}.py"
        path.write_text("print(1)\n")
        jobs.append(engine.Job(str(path), (PrintCall(),)))
    for _ in range(2):
        reports = engine.run_jobs(jobs, workers=2)
        assert sum(len(report.diagnostics) for report in reports) == len(jobs)
    assert capsys.readouterr().err == (
        "amp-lint: warning: no worker processes (OSError: [Errno 38] Function not implemented); "
        "linting in one process\n"
    )
