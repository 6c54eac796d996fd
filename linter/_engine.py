"""Lint one file: read, decode, pre-filter, parse once, run the rules, position, apply ``# noqa``;
then, when asked, fix it.

The order is the performance design: a cached result needs nothing more; most files mention none
of a rule's trigger words, so they are decoded and searched but never parsed; positions (libcst
metadata) are computed only for files with findings. A notebook is linted as the module its code
cells make (see _notebook). Nothing here imports or executes the code it reads.
"""

from __future__ import annotations

import ast
import itertools
import os
import pickle
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import libcst as cst

from linter._atomic_write import WriteError, write_atomically
from linter._diagnostic import Diagnostic, FileError, RelatedLocation, one_line
from linter._fix import SAFE, Edit, Fix, LineIndex, NodeFix, edit_spans, overlaps, shifted_offset
from linter._garbage_collection import freeze_survivors, raise_threshold
from linter._indentation import ExpandedIndentation, expand_indentation
from linter._noqa import FileDirective, Suppressions, noqa_directives, noqa_edits
from linter._notebook import Notebook
from linter._parse import parse_module
from linter._rule import Finding, Findings, FindingsRule, ModuleContext, Rule
from linter._source import (
    MAX_FILE_BYTES,
    Document,
    PythonSource,
    SourceError,
    decode_source,
    load_document,
    read_source,
)
from linter.model.project import Project

__all__ = [
    "MAX_FILE_BYTES",
    "Change",
    "FileReport",
    "FixMode",
    "Job",
    "SourceError",
    "decode_source",
    "lint_bytes",
    "lint_file",
    "lint_text",
    "noqa_directives",
    "read_source",
    "run_job",
    "run_jobs",
]

#: Below this many files to parse, worker processes cost more than they save.
PARALLEL_MIN_FILES = 32
#: The error that made this process lint serially, once said (see `run_jobs`).
_SAID_SERIAL: list[BaseException] = []

#: Rounds of fixing before giving up on convergence (a fix that enables another, ...).
MAX_FIX_ROUNDS = 10

_NO_FILE = FileDirective()
#: How a parse failure's reason starts (a rule's failure says otherwise).
_CANNOT_PARSE = "cannot parse: "
_LIBCST_PREFIX = re.compile(r"^(?:parser|tokenizer) error: (?:error at \d+:\d+: )?")


@dataclass(frozen=True, slots=True)
class FixMode:
    """Which fixes a run applies, and whether it writes them."""

    #: Apply unsafe fixes too (``--unsafe-fixes``).
    unsafe: bool = False
    #: Codes whose fixes may be applied (``fixable`` less ``unfixable``); ``None``: every code.
    codes: frozenset[str] | None = None
    #: Write fixed files (``--fix``); ``False`` only computes them (``--diff``).
    write: bool = True

    def applies(self, diagnostic: Diagnostic) -> bool:
        return (
            diagnostic.fix is not None
            and diagnostic.fix.applies(self.unsafe)
            and (self.codes is None or diagnostic.code in self.codes)
        )


@dataclass(frozen=True, slots=True)
class Change:
    """A file's text before and after its fixes (what ``--diff`` shows)."""

    #: Display path of the file.
    path: str
    #: The file's text as read.
    before: str
    #: The text with the fixes applied.
    after: str
    #: The fixed file's bytes, encoded as the original was.
    data: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class FileReport:
    """What linting one file produced."""

    #: Display path of the file.
    path: str
    #: Findings that no noqa comment suppressed (after fixes, those left), in position order.
    diagnostics: tuple[Diagnostic, ...] = ()
    #: Why the file (or a rule on it) failed, if it did.
    errors: tuple[FileError, ...] = ()
    #: Whether the file passed the pre-filter and was parsed.
    parsed: bool = False
    #: Findings that fixes removed, at their positions before the fix.
    fixed: tuple[Diagnostic, ...] = ()
    #: One-line notes about fixes that were dropped (they did not verify).
    notes: tuple[str, ...] = ()
    #: The fixed text, when fixes changed the file.
    change: Change | None = None
    #: Whether the result came from the cache.
    cached: bool = False
    #: How many findings ``--add-noqa`` suppressed with a new noqa code.
    noqa_added: int = 0
    #: What the result depends on besides the file: the project's summaries it consulted
    #: (their paths) and caller queries (``callers:<name>``).
    depends: tuple[str, ...] = ()


def lint_text(
    path: str, text: str, rules: Sequence[Rule], project: Project | None = None
) -> FileReport:
    """Lint decoded Python source with already-configured rule instances; ``project`` is the
    project around the file (its other modules' summaries), when there is one."""
    active = [rule for rule in rules if rule.wants(text)]
    imported = ""
    if project is not None:
        # What this file's result depends on starts here: the imported modules' text decides
        # which rules run.
        project.reset_used()
        # Events and values of the modules it imports may enter its analyses: their text
        # counts for the pre-filter too.
        imported = project.imported_text(os.path.abspath(path), text)
        if imported:
            active = [rule for rule in rules if rule in active or rule.wants_with(text, imported)]
    if not active:
        return FileReport(path)
    parsed = _parse(text)
    expanded: ExpandedIndentation | None = None
    if isinstance(parsed, str) and _python_parses(text):
        # A file CPython reads but libcst rejects: mixed tabs and spaces in indentation.
        expanded = expand_indentation(text)
        if expanded is not None:
            reparsed = _parse(expanded.text)
            parsed = parsed if isinstance(reparsed, str) else reparsed
    if isinstance(parsed, str):
        return _failed(path, _CANNOT_PARSE + parsed, parsed=True)
    context = ModuleContext(path, expanded.text if expanded else text, parsed, project)
    context.imported_text = imported
    diagnostics: list[Diagnostic] = []
    errors: list[FileError] = []
    ran: set[str] = set()
    for rule in active:
        if isinstance(rule, FindingsRule):
            continue
        found = _run_rule(context, rule, rule.check, errors)
        if found is not None:
            ran.add(rule.code)
            diagnostics.extend(found)
    ran.update(rule.code for rule in rules if rule not in active)
    later = [rule for rule in active if isinstance(rule, FindingsRule)]
    # Comments are tokenized only when there is something they might suppress.
    suppressions = Suppressions.of(text) if diagnostics or later else Suppressions({}, _NO_FILE)
    kept = [d for d in diagnostics if not suppressions.suppresses(d)]
    if later:
        findings = Findings(frozenset((d.line, d.code) for d in diagnostics), frozenset(ran))
        for rule in later:
            found = _run_rule(context, rule, _given(rule, findings), errors)
            kept.extend(d for d in found or () if not suppressions.suppresses(d))
    notes: tuple[str, ...] = ()
    if expanded is not None:
        kept = [_unexpanded(d, expanded) for d in kept]
        notes = (
            f"{path}: indentation mixes tabs and spaces; linted with tabs read as CPython "
            "reads them (stops of 8 columns), without fixes",
        )
    depends = tuple(sorted(project.used)) if project is not None else ()
    configs = _config_evidence(context)
    if configs is not None:
        depends = (*depends, *(f"file:{path}" for path in configs[0]))
        notes = (*notes, *configs[1])
    return FileReport(
        path, tuple(sorted(kept)), tuple(errors), parsed=True, notes=notes, depends=depends
    )


def _config_evidence(context: ModuleContext) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The config files (and folders) a module's rules read, and their parse notes; None when
    no rule looked for configs (then the result depends on none)."""
    from linter.model.settings import ConfigReference, config_dependencies, config_notes
    from linter.model.syntax import module_index

    if not module_index(context).has_shared(ConfigReference):
        return None
    return config_dependencies(context), config_notes(context)


def _run_rule(
    context: ModuleContext,
    rule: Rule,
    check: Callable[[ModuleContext], Iterable[Finding]],
    errors: list[FileError],
) -> list[Diagnostic] | None:
    """All of a rule's findings, or none (``None``, the failure added to ``errors``): a rule
    that fails halfway reports only the failure."""
    try:
        return [_to_diagnostic(context, rule, finding) for finding in check(context)]
    except Exception as error:
        reason = f"rule {rule.code} ({rule.name}) failed: {type(error).__name__}: {error}"
        errors.append(FileError(context.path, one_line(reason)))
        return None


def _given(rule: FindingsRule, findings: Findings) -> Callable[[ModuleContext], Iterable[Finding]]:
    """The rule's check with the other rules' findings bound."""

    def check(context: ModuleContext) -> Iterable[Finding]:
        return rule.check_findings(context, findings)

    return check


def _parse(text: str) -> cst.Module | str:
    """The module, or why libcst cannot parse it."""
    try:
        return parse_module(text)
    except cst.ParserSyntaxError as error:
        return _syntax_error_reason(text, error)
    except (RecursionError, MemoryError):
        return "nested too deeply for the parser"
    except Exception as error:  # libcst raises a few other types on odd input
        return f"{type(error).__name__}: {error}"


def _python_parses(text: str) -> bool:
    """Whether CPython's parser accepts the text (parsed only: nothing is compiled or run)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return False
    return True


def _unexpanded(diagnostic: Diagnostic, expanded: ExpandedIndentation) -> Diagnostic:
    """A finding on tab-expanded text, in the file's columns; its fix is dropped (its edits and
    their text were computed on the expanded indentation)."""
    return replace(
        diagnostic,
        column=expanded.original_column(diagnostic.line, diagnostic.column),
        end_column=expanded.original_column(diagnostic.end_line, diagnostic.end_column),
        related=tuple(
            replace(r, column=expanded.original_column(r.line, r.column))
            for r in diagnostic.related
        ),
        fix=None,
    )


def _readable(
    path: str, document: Document, rules: Sequence[Rule], project: Project | None = None
) -> tuple[Document, FileReport]:
    """The document as linted and its first report: a notebook whose joined cells do not
    parse loses the cells that do not parse alone (pasted shell output), each named in a note."""
    report = lint_text(path, document.text, rules, project)
    if not (isinstance(document, Notebook) and _parse_failed(report)):
        return document, report
    broken = document.broken_cells()
    if not broken:
        return document, report
    trimmed = document.without_cells(frozenset(broken))
    retried = lint_text(path, trimmed.text, rules, project)
    if _parse_failed(retried):
        return document, report
    notes = tuple(
        f"{path}: cell {number} does not parse ({reason}); linted without it"
        for number, reason in broken.items()
    )
    return trimmed, replace(retried, notes=(*notes, *retried.notes))


def _parse_failed(report: FileReport) -> bool:
    return any(error.message.startswith(_CANNOT_PARSE) for error in report.errors)


def lint_document(
    path: str, document: Document, rules: Sequence[Rule], project: Project | None = None
) -> FileReport:
    """Lint a module or a notebook; positions are the file's (a notebook's: cell and line)."""
    document, report = _readable(path, document, rules, project)
    return _presented(document, report)


def lint_bytes(
    path: str,
    data: bytes,
    rules: Sequence[Rule],
    fix: FixMode | None = None,
    *,
    on_disk: bool = False,
    add_noqa: bool = False,
    project: Project | None = None,
) -> FileReport:
    """Lint raw file contents; with ``fix``, fix them too, with ``add_noqa`` suppress them
    (written back only when ``on_disk``)."""
    try:
        document = load_document(path, data)
    except SourceError as error:
        return _failed(path, str(error), parsed=False)
    if add_noqa:
        return add_noqa_document(path, document, rules, on_disk=on_disk, project=project)
    if fix is None:
        return lint_document(path, document, rules, project)
    return fix_document(path, document, rules, fix, on_disk=on_disk, project=project)


def lint_file(
    path: str,
    rules: Sequence[Rule],
    fix: FixMode | None = None,
    *,
    add_noqa: bool = False,
    project: Project | None = None,
) -> FileReport:
    """Lint one file on disk (and fix it, with ``fix``; suppress its findings, ``add_noqa``)."""
    try:
        data = read_source(path)
    except SourceError as error:
        return _failed(path, str(error), parsed=False)
    return lint_bytes(path, data, rules, fix, on_disk=True, add_noqa=add_noqa, project=project)


def add_noqa_document(
    path: str,
    document: Document,
    rules: Sequence[Rule],
    *,
    on_disk: bool,
    project: Project | None = None,
) -> FileReport:
    """``--add-noqa``: a ``# noqa: CODE`` on the line of every finding (a baseline for old
    code), existing codes and comments kept; written atomically, as ``--fix`` writes.

    A finding on a line that cannot end in a comment (inside a multi-line string, a backslash
    continuation, a notebook's masked IPython line) is left as it is, with a note. The findings
    of rules about suppressions (AMP100) get no ``# noqa``: the answer there is to remove one.
    """
    document, report = _readable(path, document, rules, project)
    if report.errors:
        return _presented(document, report)
    later = {rule.code for rule in rules if isinstance(rule, FindingsRule)}
    wanted = [d for d in report.diagnostics if d.code not in later]
    edits, refused = noqa_edits(document.text, wanted)
    fitting = [edit for edit in edits if document.fix_fits(Fix(SAFE, "noqa", (edit,)))]
    refused += [edit.line for edit in edits if edit not in fitting]
    left = [d for d in report.diagnostics if d.code in later or d.line in refused]
    notes = [
        f"{_where(document.present(d))}: {d.code} not suppressed: the line cannot end in a comment"
        for d in wanted
        if d.line in refused
    ]
    unchanged = replace(
        _presented(document, report),
        diagnostics=tuple(sorted(document.present(d) for d in left)),
        notes=(*report.notes, *notes),
        noqa_added=0,
    )
    if not fitting:
        return unchanged
    new = document.apply(fitting)
    if isinstance(_parse(new.text), str):
        failed = FileError(path, "no # noqa added: the file would not parse with them")
        return replace(_presented(document, report), errors=(failed,))
    data = new.encode()
    change = Change(path, document.file_text(document.data), new.file_text(data), data)
    if on_disk:
        try:
            write_atomically(path, data, expected=document.data)
        except WriteError as error:
            return replace(
                _presented(document, report), errors=(FileError(path, f"no # noqa added: {error}"),)
            )
    added = len(wanted) - sum(d.line in refused for d in wanted)
    return replace(unchanged, change=change, noqa_added=added)


def fix_document(
    path: str,
    document: Document,
    rules: Sequence[Rule],
    mode: FixMode,
    *,
    on_disk: bool,
    project: Project | None = None,
) -> FileReport:
    """Apply fixes round by round until none applies (at most `MAX_FIX_ROUNDS`).

    Each round applies the fixes that do not overlap, then checks the result: it must parse,
    and the fixed findings must be gone when it is linted again. A batch that fails is retried
    one fix at a time; a fix that fails alone is dropped with a note. Overlapping fixes wait for
    the next round, so two fixes of one spot are never merged blindly.
    """
    document, first = _readable(path, document, rules, project)
    if first.errors:
        return _presented(document, first)
    current, report = document, first
    fixed: list[Diagnostic] = []
    notes: list[str] = []
    given_up: set[tuple[object, ...]] = set()
    for _ in range(MAX_FIX_ROUNDS):
        candidates = [
            d
            for d in report.diagnostics
            # `applies` has checked the fix is there; `is not None` says so to mypy.
            if mode.applies(d)
            and d.fix is not None
            and current.fix_fits(d.fix)
            and _identity(d) not in given_up
        ]
        batch = _non_overlapping(candidates)
        if not batch:
            break
        while batch:
            trial, trial_report, problem = _try_fixes(path, current, rules, batch, project)
            if problem is not None and len(batch) > 1:
                batch = batch[:1]
                continue
            persisting = (
                batch
                if problem is not None
                else _still_reported(current, trial, trial_report, batch)
            )
            for diagnostic in persisting:
                given_up.add(_identity(diagnostic))
                shown = current.present(diagnostic)
                notes.append(
                    f"{_where(shown)}: {shown.code} fix not applied: "
                    f"{problem or 'the finding is still reported after the fix'}"
                )
            if persisting:
                batch = [d for d in batch if d not in persisting]
                continue
            fixed.extend(current.present(d) for d in batch)
            current, report = trial, trial_report
            break
    notes = [*first.notes, *notes]
    if current is document:
        return replace(_presented(document, report), notes=tuple(notes))
    data = current.encode()
    change = Change(path, document.file_text(document.data), current.file_text(data), data)
    if on_disk and mode.write:
        try:
            write_atomically(path, data, expected=document.data)
        except WriteError as error:
            unfixed = _presented(document, first)
            return replace(unfixed, errors=(FileError(path, f"not fixed: {error}"),))
    return replace(
        _presented(current, report),
        fixed=tuple(sorted(fixed)),
        notes=tuple(notes),
        change=change,
    )


def _try_fixes(
    path: str,
    current: Document,
    rules: Sequence[Rule],
    batch: Sequence[Diagnostic],
    project: Project | None = None,
) -> tuple[Document, FileReport, str | None]:
    """The document with ``batch`` applied, its lint report, and why it is unusable (if so)."""
    trial = current.apply([edit for d in batch for edit in d.fix.edits])  # type: ignore[union-attr]  # a batch holds only diagnostics with a fix
    try:
        cst.parse_module(trial.text)
    except Exception:
        return trial, FileReport(path), "the fixed code does not parse"
    try:
        trial.encode()
    except UnicodeEncodeError as error:
        return trial, FileReport(path), f"the fixed code cannot be encoded as {error.encoding}"
    report = lint_text(path, trial.text, rules, project)
    if report.errors:
        return trial, report, f"linting the fixed code failed: {report.errors[0].message}"
    return trial, report, None


def _still_reported(
    before: Document, after: Document, report: FileReport, batch: Sequence[Diagnostic]
) -> list[Diagnostic]:
    """Fixed findings that the re-lint still reports at the same (shifted) place."""
    old, new = LineIndex(before.text), LineIndex(after.text)
    spans = edit_spans(old, [edit for d in batch for edit in d.fix.edits])  # type: ignore[union-attr]  # a batch holds only diagnostics with a fix
    remaining = {(d.code, d.line, d.column) for d in report.diagnostics}
    return [
        d
        for d in batch
        if (d.code, *new.position(shifted_offset(old.offset(d.line, d.column), spans))) in remaining
    ]


def _non_overlapping(candidates: Sequence[Diagnostic]) -> list[Diagnostic]:
    chosen: list[Diagnostic] = []
    for diagnostic in candidates:
        if not any(overlaps(diagnostic.fix, kept.fix) for kept in chosen):  # type: ignore[arg-type]  # candidates hold only diagnostics with a fix
            chosen.append(diagnostic)
    return chosen


def _identity(diagnostic: Diagnostic) -> tuple[object, ...]:
    """What stays the same about a finding while other fixes move it around."""
    contents = tuple(edit.content for edit in diagnostic.fix.edits) if diagnostic.fix else ()
    return (diagnostic.code, diagnostic.message, contents)


def _where(diagnostic: Diagnostic) -> str:
    cell = f"cell {diagnostic.cell}:" if diagnostic.cell else ""
    return f"{diagnostic.path}:{cell}{diagnostic.line}:{diagnostic.column}"


def _presented(document: Document, report: FileReport) -> FileReport:
    """The report in the file's own positions; fixes that cannot apply to it are left off."""
    if isinstance(document, PythonSource) or not report.diagnostics:
        return report
    shown = [
        document.present(d if d.fix is None or document.fix_fits(d.fix) else replace(d, fix=None))
        for d in report.diagnostics
    ]
    return replace(report, diagnostics=tuple(sorted(shown)))


@dataclass(frozen=True, slots=True)
class Job:
    """One file to lint, with the rules that apply to it."""

    #: Display path (also the path read, unless ``data`` is given).
    path: str
    #: Configured rules for this file (per-file-ignores already applied).
    rules: tuple[Rule, ...]
    #: Contents when they do not come from disk (stdin).
    data: bytes | None = None
    #: Which fixes to apply, if any.
    fix: FixMode | None = None
    #: Whether ``path`` is a file on disk (so fixes can be written to it).
    on_disk: bool = True
    #: Suppress the findings with noqa comments instead (``--add-noqa``).
    add_noqa: bool = False
    #: Root of the project around the file (a key of the projects `use_projects` set).
    project_root: str | None = None


#: The projects of this run, by root (set in the main process and in each worker).
_PROJECTS: dict[str, Project] = {}


def use_projects(projects: dict[str, Project]) -> None:
    """Make ``projects`` the ones jobs are linted against (a worker's initializer too)."""
    # Copied first: a forked worker is handed `_PROJECTS` itself, which clearing would empty.
    chosen = dict(projects)
    _PROJECTS.clear()
    _PROJECTS.update(chosen)


def _start_worker(projects: dict[str, Project]) -> None:
    """A lint worker's initializer: the run's projects, and the run's collection pace."""
    raise_threshold()
    use_projects(projects)


def run_job(job: Job) -> FileReport:
    """Lint one job; never raises for anything the file contains."""
    project = _PROJECTS.get(job.project_root) if job.project_root is not None else None
    if job.data is not None:
        return lint_bytes(
            job.path,
            job.data,
            job.rules,
            job.fix,
            on_disk=job.on_disk,
            add_noqa=job.add_noqa,
            project=project,
        )
    return lint_file(job.path, job.rules, job.fix, add_noqa=job.add_noqa, project=project)


class ReportCache(Protocol):
    """Where `run_jobs` looks results up before linting, and stores them after (see _cache)."""

    def key(self, job: Job, data: bytes) -> str | None: ...

    def key_for(self, job: Job, digest: str) -> str | None: ...

    def load(
        self, key: str, path: str, current: Callable[[str], str] | None = None
    ) -> FileReport | None: ...

    def store(
        self, key: str, report: FileReport, current: Callable[[str], str] | None = None
    ) -> None: ...


def _current(job: Job) -> Callable[[str], str] | None:
    """How a cached result's dependencies are checked: against the job's project now."""
    project = _PROJECTS.get(job.project_root) if job.project_root is not None else None
    return project.dependency_digest if project is not None else None


def run_jobs(
    jobs: Sequence[Job], workers: int | None, cache: ReportCache | None = None
) -> list[FileReport]:
    """Lint every job, in worker processes when there are many; same results either way.

    Files are looked up here first: a cached result needs no more work, and a file that the
    project's plan found no trigger word in and summarised for nothing is not read again, so
    only the rest travel to the workers (which apply the pre-filter to the project's files;
    without a project it is applied here).
    """
    count = workers if workers is not None else _available_cpus()
    # The projects are built: what is alive now lives to the end of the run.
    freeze_survivors()
    reports: list[FileReport | None] = []
    heavy: list[tuple[int, Job, str | None]] = []
    for job in jobs:
        report, heavy_job, key = _prepare(job, cache)
        if heavy_job is not None:
            heavy.append((len(reports), heavy_job, key))
        reports.append(report)
    if count <= 1 or len(heavy) < PARALLEL_MIN_FILES:
        done: Iterable[FileReport] = [run_job(job) for _, job, _ in heavy]
    else:
        done = _in_workers([job for _, job, _ in heavy], count)
    for (index, heavy_job, key), report in zip(heavy, done, strict=True):
        reports[index] = report
        # A fix run's report describes a file that was (or failed to be) rewritten: not a
        # result for the bytes that were read.
        fixing = (heavy_job.fix is not None or heavy_job.add_noqa) and (
            report.change or report.notes or report.errors
        )
        if cache is not None and key is not None and not fixing:
            cache.store(key, report, _current(heavy_job))
    return [report for report in reports if report is not None]


def _in_workers(jobs: Sequence[Job], count: int) -> list[FileReport]:
    # Imported here: a single-file run (the pre-commit case) never needs them.
    from concurrent.futures.process import BrokenProcessPool

    from linter._worker_pool import worker_pool

    try:
        with worker_pool(
            max_workers=min(count, len(jobs)), initializer=_start_worker, initargs=(_PROJECTS,)
        ) as pool:
            chunk = max(1, min(16, len(jobs) // (4 * count)))
            return list(pool.map(run_job, jobs, chunksize=chunk))
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
        return [run_job(job) for job in jobs]


def _prepare(
    job: Job, cache: ReportCache | None
) -> tuple[FileReport | None, Job | None, str | None]:
    """A finished report (read error, cache hit, nothing to parse), or the job to run with its
    bytes and cache key."""
    project = _PROJECTS.get(job.project_root) if job.project_root is not None else None
    absolute = os.path.abspath(job.path)
    known = project.facts.get(absolute) if project is not None and job.data is None else None
    if project is not None and known is not None:
        # What the project's plan read of the file answers without reading it again: a file
        # with no trigger word that no summary connects to AMP code (none, or one kept only for
        # its classes) has nothing to parse; for the rest, the cache is looked up by the
        # content digest.
        if not known.wants and (
            absolute not in project.summaries or absolute in project.classes_only
        ):
            return FileReport(job.path), None, None
        key = cache.key_for(job, known.digest) if cache is not None else None
        hit = _cached(job, cache, key)
        if hit is not None:
            return hit, None, None
    try:
        data = job.data if job.data is not None else read_source(job.path)
    except SourceError as error:
        return _failed(job.path, str(error), parsed=False), None, None
    key = cache.key(job, data) if cache is not None else None
    hit = _cached(job, cache, key)
    if hit is not None:
        return hit, None, None
    heavy = replace(job, data=data, on_disk=job.data is None and job.on_disk)
    if known is not None:
        # A file of the project's plan: decoding it and its pre-filter, which reads the text
        # of the functions it imports, are left to the worker that lints it (`lint_bytes`
        # reports what cannot be decoded, `lint_text` applies the same pre-filter), so that
        # they run in parallel rather than here before any worker starts.
        return None, heavy, key
    try:
        document = load_document(job.path, data)
    except SourceError as error:
        report = _failed(job.path, str(error), parsed=False)
        if cache is not None and key is not None:
            cache.store(key, report)
        return report, None, None
    imported = project.imported_text(absolute, document.text) if project is not None else ""
    own = document.text
    if any(rule.wants(own) or (imported and rule.wants_with(own, imported)) for rule in job.rules):
        return None, heavy, key
    report = FileReport(job.path)
    if cache is not None and key is not None:
        cache.store(key, report)
    return report, None, None


def _cached(job: Job, cache: ReportCache | None, key: str | None) -> FileReport | None:
    """The cached report for ``key``, unless the job would change the file (a fix to apply,
    a noqa to add)."""
    if cache is None or key is None:
        return None
    hit = cache.load(key, job.path, _current(job))
    if hit is None:
        return None
    if job.fix and any(job.fix.applies(d) for d in hit.diagnostics):
        return None
    if job.add_noqa and hit.diagnostics:
        return None
    return hit


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
    related = []
    message = finding.message
    for node, what in ((finding.node, "here"), *finding.related):
        foreign = context.foreign_position(node)
        if foreign is not None:
            # A site in another file (a function grafted from it): named in the message too,
            # since the text format prints one line per finding.
            # The message names the file as the project does (the same from any folder); the
            # location, as the command line names files, for tools to open.
            shown = context.project.locate(foreign[0]) if context.project else foreign[0]
            related.append(RelatedLocation(foreign[1], foreign[2], what, path=shown))
            # The other functions the call may run, which do the same (`ForeignSite.alike`).
            alike = context.foreign_alike(node)
            for other, line, column in alike:
                other_shown = context.project.locate(other) if context.project else other
                related.append(RelatedLocation(line, column, "does the same", path=other_shown))
            if f"{foreign[0]}:" not in message:
                named = ", ".join(f"{other}:{line}" for other, line, _column in alike)
                also = f"; {named} {'does' if len(alike) == 1 else 'do'} the same" if alike else ""
                message = f"{message} (see {foreign[0]}:{foreign[1]}:{foreign[2]}{also})"
        elif node is not finding.node:
            position = context.position(node).start
            related.append(RelatedLocation(position.line, position.column + 1, what))
    has_foreign_fix = finding.fix is not None and any(
        old in context.foreign for old, _ in finding.fix.replacements
    )
    return Diagnostic(
        path=context.path,
        line=where.start.line,
        column=where.start.column + 1,
        code=rule.code,
        message=message,
        name=rule.name,
        end_line=where.end.line,
        end_column=where.end.column + 1,
        related=tuple(related),
        # A fix never edits a grafted node: its text lives in another file.
        fix=_to_fix(context, finding.fix)
        if finding.fix is not None and not has_foreign_fix
        else None,
    )


def _to_fix(context: ModuleContext, proposal: NodeFix) -> Fix | None:
    """The text edits of a rule's node replacements (None if they overlap: a rule's bug)."""
    edits = []
    for old, new in proposal.replacements:
        where = context.position(old)
        edits.append(
            Edit(
                where.start.line,
                where.start.column + 1,
                where.end.line,
                where.end.column + 1,
                context.module.code_for_node(new),
            )
        )
    edits.sort()
    if any((a.end_line, a.end_column) > (b.line, b.column) for a, b in itertools.pairwise(edits)):
        return None
    return Fix(proposal.applicability, proposal.message, tuple(edits))
