"""Lint one file: read, decode, pre-filter, parse once, run the rules, position, apply ``# noqa``.

The order is the performance design: most files mention none of a rule's trigger words, so they
are decoded and searched but never parsed; positions (libcst metadata) are computed only for
files with findings. Nothing here imports or executes the code it reads.
"""

from __future__ import annotations

import ast
import io
import os
import pickle
import re
import stat
import sys
import tokenize
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import libcst as cst

from linter._diagnostic import Diagnostic, FileError, RelatedLocation, one_line
from linter._rule import Finding, ModuleContext, Rule

#: Files larger than this are reported, not read: no hand-written module is this big.
MAX_FILE_BYTES = 10 * 2**20

#: Below this many files to parse, worker processes cost more than they save.
PARALLEL_MIN_FILES = 32
#: The error that made this process lint serially, once said (see `run_jobs`).
_SAID_SERIAL: list[BaseException] = []

_NOQA = re.compile(
    r"#\s*noqa(?P<colon>\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)?)?",
    re.IGNORECASE,
)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LIBCST_PREFIX = re.compile(r"^(?:parser|tokenizer) error: (?:error at \d+:\d+: )?")


class SourceError(Exception):
    """A file that cannot be linted; the message is the one-line reason."""


@dataclass(frozen=True, slots=True)
class FileReport:
    """What linting one file produced."""

    #: Display path of the file.
    path: str
    #: Findings that no noqa comment suppressed, in position order.
    diagnostics: tuple[Diagnostic, ...] = ()
    #: Why the file (or a rule on it) failed, if it did.
    errors: tuple[FileError, ...] = ()
    #: Whether the file passed the pre-filter and was parsed.
    parsed: bool = False


def read_source(path: str) -> bytes:
    """The file's bytes; `SourceError` for anything that is not a readable, sane-sized file."""
    try:
        # A named pipe or a device would block or never end: only regular files are read.
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise SourceError("is a folder, not a file")
        if not stat.S_ISREG(mode):
            raise SourceError("not a regular file")
        with open(path, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise SourceError(
                    f"file is too large ({size / 2**20:.0f} MiB; the limit is "
                    f"{MAX_FILE_BYTES // 2**20} MiB)"
                )
            return stream.read()
    except OSError as error:
        raise SourceError(f"cannot read: {error.strerror or error}") from None


def decode_source(data: bytes) -> str:
    """Text of a Python source file, honouring a BOM and a PEP 263 coding cookie."""
    if b"\0" in data:
        offset = data.index(b"\0")
        raise SourceError(f"source contains a NUL byte at byte offset {offset}")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        # tokenize says "invalid or missing encoding declaration" for plain bad UTF-8 in the
        # first two lines too; decoding names the offending byte.
        if "missing" not in error.msg:
            raise SourceError(f"bad encoding declaration: {error.msg}") from None
        encoding = "utf-8"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        raise SourceError(
            f"cannot decode as {encoding}: {error.reason} at byte offset {error.start}"
        ) from None
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r}") from None


def lint_text(path: str, text: str, rules: Sequence[Rule]) -> FileReport:
    """Lint decoded source with already-configured rule instances."""
    active = [rule for rule in rules if rule.wants(text)]
    if not active:
        return FileReport(path)
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        return _failed(path, f"cannot parse: {_syntax_error_reason(text, error)}", parsed=True)
    except (RecursionError, MemoryError):
        return _failed(path, "cannot parse: nested too deeply for the parser", parsed=True)
    except Exception as error:  # libcst raises a few other types on odd input
        return _failed(path, f"cannot parse: {type(error).__name__}: {error}", parsed=True)
    context = ModuleContext(path, text, module)
    diagnostics: list[Diagnostic] = []
    errors: list[FileError] = []
    for rule in active:
        try:
            # All of a rule's findings or none: a rule that fails halfway reports only the failure.
            found = [_to_diagnostic(context, rule, finding) for finding in rule.check(context)]
        except Exception as error:
            reason = f"rule {rule.code} ({rule.name}) failed: {type(error).__name__}: {error}"
            errors.append(FileError(path, one_line(reason)))
        else:
            diagnostics.extend(found)
    if diagnostics:
        diagnostics = _without_noqa(diagnostics, text)
    return FileReport(path, tuple(sorted(diagnostics)), tuple(errors), parsed=True)


def lint_bytes(path: str, data: bytes, rules: Sequence[Rule]) -> FileReport:
    """Lint raw file contents."""
    try:
        text = decode_source(data)
    except SourceError as error:
        return _failed(path, str(error), parsed=False)
    return lint_text(path, text, rules)


def lint_file(path: str, rules: Sequence[Rule]) -> FileReport:
    """Lint one file on disk."""
    try:
        data = read_source(path)
    except SourceError as error:
        return _failed(path, str(error), parsed=False)
    return lint_bytes(path, data, rules)


@dataclass(frozen=True, slots=True)
class Job:
    """One file to lint, with the rules that apply to it."""

    #: Display path (also the path read, unless ``data`` is given).
    path: str
    #: Configured rules for this file (per-file-ignores already applied).
    rules: tuple[Rule, ...]
    #: Contents when they do not come from disk (stdin).
    data: bytes | None = None


def run_job(job: Job) -> FileReport:
    """Lint one job; never raises for anything the file contains."""
    if job.data is not None:
        return lint_bytes(job.path, job.data, job.rules)
    return lint_file(job.path, job.rules)


def run_jobs(jobs: Sequence[Job], workers: int | None) -> list[FileReport]:
    """Lint every job, in worker processes when there are many; same results either way."""
    count = workers if workers is not None else _available_cpus()
    if count <= 1 or len(jobs) < PARALLEL_MIN_FILES:
        return [run_job(job) for job in jobs]
    # Ship only files that pass the pre-filter: reading and searching is cheap, parsing is not.
    reports: list[FileReport | None] = []
    heavy: list[tuple[int, Job]] = []
    for job in jobs:
        report, heavy_job = _prefilter(job)
        if heavy_job is not None:
            heavy.append((len(reports), heavy_job))
        reports.append(report)
    if len(heavy) < PARALLEL_MIN_FILES:
        for index, job in heavy:
            reports[index] = run_job(job)
    else:
        # Imported here: a single-file run (the pre-commit case) never needs it.
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        try:
            with ProcessPoolExecutor(max_workers=min(count, len(heavy))) as pool:
                chunk = max(1, min(16, len(heavy) // (4 * count)))
                done = pool.map(run_job, (job for _, job in heavy), chunksize=chunk)
                for (index, _), report in zip(heavy, done, strict=True):
                    reports[index] = report
        except (BrokenProcessPool, pickle.PicklingError, AttributeError, OSError) as error:
            # No workers to be had (a sandbox), or rules that cannot be sent to them (a rule
            # class defined in a function): lint here instead. `run_job` itself never raises.
            # Said once per process: a run that is suddenly slower deserves a reason.
            if not _SAID_SERIAL:
                _SAID_SERIAL.append(error)
                print(
                    f"amp-lint: warning: no worker processes ({type(error).__name__}: "
                    f"{one_line(str(error))}); linting in one process",
                    file=sys.stderr,
                )
            for index, job in heavy:
                reports[index] = run_job(job)
    return [report for report in reports if report is not None]


def _prefilter(job: Job) -> tuple[FileReport | None, Job | None]:
    """A finished report for a file no rule wants to parse, or a job holding the decoded bytes."""
    try:
        data = job.data if job.data is not None else read_source(job.path)
        text = decode_source(data)
    except SourceError as error:
        return _failed(job.path, str(error), parsed=False), None
    if any(rule.wants(text) for rule in job.rules):
        return None, Job(job.path, job.rules, data)
    return FileReport(job.path), None


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def _syntax_error_reason(text: str, error: cst.ParserSyntaxError) -> str:
    """Python's own account of a syntax error, which names the right spot; libcst's often
    points at the start of a later line (``x = (1,`` is reported at line 2)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escape sequences: not our business
            ast.parse(text)  # parses only; nothing is compiled to bytecode or run
    except SyntaxError as python_error:
        where = f"line {python_error.lineno}, column {python_error.offset}"
        return f"{python_error.msg} at {where}"
    except (RecursionError, MemoryError, ValueError):
        pass
    # Python accepts what libcst does not (syntax newer than this libcst): say it is libcst.
    reason = _LIBCST_PREFIX.sub("", error.message)
    return f"libcst: {reason} at line {error.editor_line}, column {error.editor_column}"


def _failed(path: str, reason: str, *, parsed: bool = False) -> FileReport:
    return FileReport(path, errors=(FileError(path, one_line(reason)),), parsed=parsed)


def _to_diagnostic(context: ModuleContext, rule: Rule, finding: Finding) -> Diagnostic:
    # libcst lines are 1-based and columns 0-based; ours are both 1-based.
    where = context.position(finding.node)
    related = tuple(
        RelatedLocation(
            (position := context.position(node).start).line, position.column + 1, message
        )
        for node, message in finding.related
    )
    return Diagnostic(
        path=context.path,
        line=where.start.line,
        column=where.start.column + 1,
        code=rule.code,
        message=finding.message,
        name=rule.name,
        end_line=where.end.line,
        end_column=where.end.column + 1,
        related=related,
    )


def _without_noqa(diagnostics: Iterable[Diagnostic], text: str) -> list[Diagnostic]:
    """Drop findings whose line carries a ``# noqa`` for them (ruff semantics)."""
    directives = noqa_directives(text)
    kept = []
    for diagnostic in diagnostics:
        codes = directives.get(diagnostic.line, ())
        if codes is None or diagnostic.code in codes:
            continue
        kept.append(diagnostic)
    return kept


def noqa_directives(text: str) -> dict[int, frozenset[str] | None]:
    """Line number to the codes its ``# noqa`` names (``None``: a bare ``# noqa``, all codes).

    Only real comments count, so ``"# noqa"`` inside a string suppresses nothing; a
    ``# noqa:`` followed by no valid code is not a directive (ruff warns and ignores it).
    """
    directives: dict[int, frozenset[str] | None] = {}
    for line, comment in _comments(text):
        for match in _NOQA.finditer(comment):
            if match["colon"] is None:
                directives[line] = None
            elif match["codes"] is not None and directives.get(line, frozenset()) is not None:
                codes = frozenset(code.upper() for code in re.split(r"[\s,]+", match["codes"]))
                directives[line] = directives.get(line, frozenset()) | codes
    return directives


def _comments(text: str) -> Iterable[tuple[int, str]]:
    if "noqa" not in text.lower():
        return []
    try:
        return [
            (token.start[0], token.string)
            for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):
        # libcst accepts a few programs tokenize rejects; then look at each line's text.
        return [
            (number, line[line.index("#") :])
            for number, line in enumerate(_LINE_BREAK.split(text), start=1)
            if "#" in line
        ]
