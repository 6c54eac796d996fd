"""The Python API: lint a string or paths and get the results back as data.

>>> from linter import lint_source
>>> lint_source("x = 1\\n")
[]
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, overload

from linter._diagnostic import Diagnostic, FileError
from linter._discovery import Excluder, discover
from linter._engine import Change, FileReport, FixMode, Job, lint_bytes, run_jobs
from linter._garbage_collection import fewer_collections
from linter._patterns import PathPattern, relative_to_root
from linter._rule import Rule
from linter._selection import (
    SelectorError,
    check_selectors,
    describe_select,
    enabled_rules,
    selects,
)
from linter.config import ConfigError, Settings

if TYPE_CHECKING:
    from linter.model.project import Project

#: The path that means "read standard input", as in ruff and flake8.
STDIN = "-"


class LintError(ValueError):
    """`lint_source` was given text it cannot lint; the message is ``path: reason``."""


@dataclass(frozen=True, slots=True)
class LintResult:
    """Everything a lint run found, sorted."""

    #: Findings, sorted by path, line, column and code.
    diagnostics: tuple[Diagnostic, ...]
    #: Files (or folders) that could not be read or parsed, and rules that failed on a file.
    errors: tuple[FileError, ...]
    #: How many files were read.
    files_checked: int
    #: How many of those passed the pre-filter and were parsed.
    files_parsed: int
    #: How many were not parsed because they mention none of the rules' trigger words.
    files_skipped: int = 0
    #: How many results came from the cache (neither read for words nor parsed).
    files_cached: int = 0
    #: Findings that fixes removed (``fix``/``diff``), at their positions before the fix.
    fixed: tuple[Diagnostic, ...] = ()
    #: Files whose text the fixes changed (written with ``fix``, only computed with ``diff``).
    changes: tuple[Change, ...] = ()
    #: One line per fix that was dropped because it did not verify, and per project so large
    #: that reading it took most of the run (what was read, and how to read less).
    notes: tuple[str, ...] = ()
    #: Whether unsafe fixes count as available (``--unsafe-fixes``).
    unsafe_fixes: bool = False
    #: How many findings ``add_noqa`` suppressed with a new noqa code.
    noqa_added: int = 0

    @property
    def ok(self) -> bool:
        """No findings and no errors."""
        return not self.diagnostics and not self.errors

    def fixable(self, diagnostic: Diagnostic) -> bool:
        """Whether ``--fix`` (with this run's ``--unsafe-fixes``) would fix ``diagnostic``."""
        return diagnostic.fix is not None and diagnostic.fix.applies(self.unsafe_fixes)


@dataclass(frozen=True, slots=True)
class FixedSource:
    """What `fix_source` made of a module."""

    #: The source with the fixes applied (the input, if none applied).
    text: str
    #: Findings left after fixing, positioned in ``text``.
    diagnostics: tuple[Diagnostic, ...]
    #: Findings the fixes removed, positioned in the input.
    fixed: tuple[Diagnostic, ...]
    #: One line per fix dropped because it did not verify.
    notes: tuple[str, ...]


@overload
def lint_source(
    source: str | bytes,
    path: str = ...,
    *,
    select: Sequence[str] | None = ...,
    ignore: Sequence[str] | None = ...,
    settings: Settings | None = ...,
    rules: Sequence[type[Rule]] | None = ...,
    fix: Literal[False] = ...,
    unsafe_fixes: bool = ...,
    project: bool = ...,
) -> list[Diagnostic]: ...


@overload
def lint_source(
    source: str | bytes,
    path: str = ...,
    *,
    select: Sequence[str] | None = ...,
    ignore: Sequence[str] | None = ...,
    settings: Settings | None = ...,
    rules: Sequence[type[Rule]] | None = ...,
    fix: Literal[True],
    unsafe_fixes: bool = ...,
    project: bool = ...,
) -> str: ...


@fewer_collections()
def lint_source(
    source: str | bytes,
    path: str = "<string>",
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    settings: Settings | None = None,
    rules: Sequence[type[Rule]] | None = None,
    fix: bool = False,
    unsafe_fixes: bool = False,
    project: bool = True,
) -> list[Diagnostic] | str:
    """Lint one module's source; ``path`` names it in diagnostics and for per-file-ignores.

    When ``path`` is a file on disk (an editor's buffer), the source is linted against the
    project around it (``project``, the default): its imports and importers, read from disk and
    from the summary cache, with ``source`` standing for the file's unsaved text.

    Returns the diagnostics; with ``fix=True``, the fixed source text instead (safe fixes, and
    unsafe ones too with ``unsafe_fixes``; `fix_source` also returns what is left). Raises
    `LintError` when the source cannot be decoded or parsed, or a rule fails on it. As in the
    CLI, a source that mentions none of the enabled rules' trigger words is not parsed, so its
    syntax errors go unreported. A ``path`` ending in ``.ipynb`` reads ``source`` as a notebook.
    """
    if fix:
        return fix_source(
            source,
            path,
            select=select,
            ignore=ignore,
            settings=settings,
            rules=rules,
            unsafe_fixes=unsafe_fixes,
            project=project,
        ).text
    plan = _Plan.build(settings, select=select, ignore=ignore, rules=rules)
    data = _encoded(source)
    around = _buffer_project(plan, path, data) if project else None
    report = lint_bytes(path, data, plan.rules_for(path), project=around)
    return list(_checked(report).diagnostics)


def fix_source(
    source: str | bytes,
    path: str = "<string>",
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    settings: Settings | None = None,
    rules: Sequence[type[Rule]] | None = None,
    unsafe_fixes: bool = False,
    project: bool = True,
) -> FixedSource:
    """Apply the fixes to one module's source (nothing is written anywhere); ``project`` as
    for `lint_source`."""
    plan = _Plan.build(settings, select=select, ignore=ignore, rules=rules)
    data = _encoded(source)
    mode = replace(plan.fix_mode(unsafe_fixes), write=False)
    around = _buffer_project(plan, path, data) if project else None
    report = _checked(lint_bytes(path, data, plan.rules_for(path), mode, project=around))
    if report.change is None:
        text = source if isinstance(source, str) else report_text(path, data)
    else:
        text = report.change.after
    return FixedSource(text, report.diagnostics, report.fixed, report.notes)


def fixable_codes(
    settings: Settings | None = None, *, rules: Sequence[type[Rule]] | None = None
) -> frozenset[str]:
    """Codes whose fixes ``--fix`` may apply under ``settings``: ``fixable`` less ``unfixable``.

    `lint_source` returns every finding's fix; an editor offers only these, as `lint_paths` does.
    """
    return _Plan.build(settings, rules=rules).fixable_codes()


def report_text(path: str, data: bytes) -> str:
    """The text of a file's bytes as the linter reads it."""
    from linter._source import load_document

    return load_document(path, data).file_text(data)


def _encoded(source: str | bytes) -> bytes:
    return source.encode("utf-8") if isinstance(source, str) else source


def _checked(report: FileReport) -> FileReport:
    if report.errors:
        raise LintError("; ".join(f"{error.path}: {error.message}" for error in report.errors))
    return report


@fewer_collections()
def lint_paths(
    paths: Sequence[str | os.PathLike[str]] = (".",),
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    extend_select: Sequence[str] | None = None,
    settings: Settings | None = None,
    rules: Sequence[type[Rule]] | None = None,
    jobs: int | None = None,
    force_exclude: bool = False,
    stdin_filename: str | None = None,
    fix: bool = False,
    diff: bool = False,
    unsafe_fixes: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    stdin: bytes | None = None,
    project: bool = True,
    add_noqa: bool = False,
    project_root: str | os.PathLike[str] | None = None,
) -> LintResult:
    """Lint files and folders (``"-"`` reads standard input, named ``stdin_filename``).

    ``select``/``ignore``/``extend_select`` override ``settings`` as the command line does.
    ``jobs`` caps the worker processes (default: one per CPU; ``1`` lints in this process).
    ``force_exclude`` applies the excludes to files named in ``paths`` too.
    ``fix`` applies the safe fixes (and the unsafe ones with ``unsafe_fixes``) and writes the
    files; ``diff`` computes the same changes without writing (standard input is never
    written: its fixed text is in `LintResult.changes`). ``cache_dir`` keeps results there
    (the command's default is ``.amp_lint_cache``); without it nothing is cached. ``stdin`` is
    what ``"-"`` reads (default: standard input itself). With ``project`` (the default) each
    file is linted against the project around it, so a file gets the same findings alone as in
    a run over the whole tree: the folder holding the nearest
    ``pyproject.toml``/``setup.cfg``/``setup.py``/``.git``, else the folder the file puts on its
    own ``sys.path``, else the top of its package chain (`linter.model.project.RootFinder`),
    never the current folder; ``project_root`` (or the ``project-root`` setting) names the root
    instead, and must hold every file linted (else `ConfigError`). ``add_noqa`` writes a noqa
    comment for every finding instead (a baseline; standard input is not written), and cannot be
    combined with ``fix`` or ``diff``.
    """
    if add_noqa and (fix or diff):
        raise ValueError("add_noqa cannot be combined with fix or diff")
    plan = _Plan.build(
        settings, select=select, ignore=ignore, extend_select=extend_select, rules=rules
    )
    names = [os.fspath(path) for path in paths]
    excluder = Excluder(
        (*plan.settings.exclude, *plan.settings.extend_exclude),
        plan.root,
        (*plan.settings.include, *plan.settings.extend_include),
    )
    found = discover(
        [name for name in names if name != STDIN], excluder, force_exclude=force_exclude
    )
    mode = replace(plan.fix_mode(unsafe_fixes), write=not diff) if fix or diff else None
    stdin_data: bytes | None = None
    shown = stdin_filename or STDIN
    if STDIN in names and not (
        force_exclude and stdin_filename and excluder.excluded(stdin_filename)
    ):
        stdin_data = sys.stdin.buffer.read() if stdin is None else stdin
    on_disk = list(found.files)
    if stdin_data is not None and stdin_filename and os.path.isfile(stdin_filename):
        on_disk.append(stdin_filename)
    cache_folder = os.fspath(cache_dir) if cache_dir is not None else None
    requested = [name for name in names if name != STDIN]
    roots: dict[str, str] = {}
    project_notes: tuple[str, ...] = ()
    if project:
        given = _given_root(plan, project_root)
        roots, project_notes = _projects(
            plan, excluder, requested, on_disk, cache_folder, jobs, given
        )
    work = [
        Job(path, plan.rules_for(path), fix=mode, project_root=roots.get(path), add_noqa=add_noqa)
        for path in found.files
    ]
    if stdin_data is not None:
        work.append(
            Job(
                shown,
                plan.rules_for(shown),
                stdin_data,
                mode,
                on_disk=False,
                project_root=roots.get(stdin_filename or ""),
                add_noqa=add_noqa,
            )
        )
    cache = None
    if cache_folder is not None:
        from linter._cache import ResultCache

        cache = ResultCache(cache_folder)
    reports = run_jobs(work, jobs, cache)
    shown_fix = plan.fixable_codes()
    return LintResult(
        diagnostics=tuple(
            sorted(
                d if d.fix is None or d.code in shown_fix else replace(d, fix=None)
                for report in reports
                for d in report.diagnostics
            )
        ),
        errors=tuple(sorted((*found.errors, *(e for r in reports for e in r.errors)))),
        files_checked=len(reports),
        files_parsed=sum(report.parsed and not report.cached for report in reports),
        files_skipped=sum(
            not (report.parsed or report.cached or report.errors) for report in reports
        ),
        files_cached=sum(report.cached for report in reports),
        fixed=tuple(sorted(d for report in reports for d in report.fixed)),
        changes=tuple(report.change for report in reports if report.change is not None),
        notes=(*project_notes, *(note for report in reports for note in report.notes)),
        unsafe_fixes=unsafe_fixes,
        noqa_added=sum(report.noqa_added for report in reports),
    )


def _buffer_project(plan: _Plan, path: str, data: bytes) -> Project | None:
    """The project around a buffer whose file is on disk (None for a string with no file)."""
    if not os.path.isfile(path):
        return None
    from linter._cache import cache_location, code_fingerprint
    from linter.model.assembly import SummaryStore, build_project
    from linter.model.project import RootFinder

    absolute = os.path.abspath(path)
    given = _given_root(plan, None)
    if given is not None:
        _check_holds(given, [absolute])
    root = given.folder if given is not None else RootFinder().root_of(absolute).folder
    excluder = Excluder(
        (*plan.settings.exclude, *plan.settings.extend_exclude),
        plan.root,
        (*plan.settings.include, *plan.settings.extend_include),
    )
    files = [os.path.abspath(f) for f in discover([root], excluder, force_exclude=True).files]
    if absolute not in files:
        files.append(absolute)
    folder = cache_location(None, plan.settings.cache_dir, plan.settings.root or root)
    store = SummaryStore(folder, code_fingerprint())
    wants, seeds = _prefilters(plan)
    return build_project(
        root,
        files,
        wants,
        store,
        workers=1,
        linted=[absolute],
        buffers={absolute: data},
        wants_key=_wants_key(plan),
        seeds=seeds,
    )


def _files_under(files: Sequence[str], folder: str) -> list[str]:
    """The paths of sorted ``files`` under ``folder``."""
    import bisect

    prefix = folder.rstrip(os.sep) + os.sep
    start = bisect.bisect_left(files, prefix)
    found = []
    for path in files[start:]:
        if not path.startswith(prefix):
            break
        found.append(path)
    return found


@dataclass(frozen=True, slots=True)
class _AnyRuleWants:
    """A pre-filter: whether any of ``rules`` wants a text. A class, not a closure, so that
    worker processes that are spawned (not forked) can be handed it."""

    rules: tuple[type[Rule], ...]

    def __call__(self, text: str) -> bool:
        return any(rule.wants(text) for rule in self.rules)


def _prefilters(plan: _Plan) -> tuple[_AnyRuleWants, _AnyRuleWants | None]:
    """The pre-filter of the run's rules, and that of the other rules it knows (None when it
    selected them all).

    The project summarises the files either passes (with the files that import one or that one
    imports); the files the rules read are chosen by the first alone (`linter._engine`). With the
    selected rules alone, a run of one rule (``--select AMP008``) summarised none of a project
    where no file passed that rule's test on its own text, and lost the findings whose evidence
    sits in another module that the run of every rule reports (6 of the 51 rule/fixture pairs of
    the multi-module fixtures)."""
    selected = tuple(type(rule) for rule in plan.rules)
    others = tuple(rule for rule in plan.known_rules if rule not in selected)
    return _AnyRuleWants(selected), _AnyRuleWants(others) if others else None


def _wants_key(plan: _Plan) -> str:
    """What decides the pre-filters of a run (a file's facts say whether it passed them)."""
    from linter._cache import rules_fingerprint

    selected = {type(rule) for rule in plan.rules}
    others = [f"{r.__module__}.{r.__qualname__}" for r in plan.known_rules if r not in selected]
    return hashlib.sha256(f"{rules_fingerprint(plan.rules)}\0{sorted(others)}".encode()).hexdigest()


#: A project with more Python files than this gets a note saying what was read and how to
#: read less: reading it is most of the run's time.
LARGE_PROJECT_FILES = 20_000


@dataclass(frozen=True, slots=True)
class _GivenRoot:
    """A project root named by the user rather than found: ``--project-root`` or the
    ``project-root`` setting."""

    #: The folder (absolute).
    folder: str
    #: How to name where it came from in an error: the option, or the setting and its file.
    source: str


def _given_root(plan: _Plan, option: str | os.PathLike[str] | None) -> _GivenRoot | None:
    """The root the command line (first) or the settings name, checked to be a folder."""
    if option is not None:
        folder = os.path.abspath(os.fspath(option))
        if not os.path.isdir(folder):
            raise ConfigError(f"--project-root {os.fspath(option)}: not a folder")
        return _GivenRoot(folder, f"--project-root {os.fspath(option)}")
    configured = plan.settings.project_root
    if configured is None:
        return None
    return _GivenRoot(configured, f"{plan.settings.source}: project-root {configured}")


def _check_holds(given: _GivenRoot, files: Sequence[str]) -> None:
    """A named root must hold every file linted: a file outside it has no module there."""
    from linter.model.project import is_within

    outside = [path for path in files if not is_within(path, given.folder)]
    if outside:
        more = f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
        raise ConfigError(f"{given.source}: does not hold {outside[0]}{more}")


def _projects(
    plan: _Plan,
    excluder: Excluder,
    requested: Sequence[str],
    paths: Sequence[str],
    cache_folder: str | None,
    jobs: int | None,
    given: _GivenRoot | None,
) -> tuple[dict[str, str], tuple[str, ...]]:
    """Build the project around each path (see `linter.model`): path -> its project's root,
    and a note for each project too large to read quickly.

    Each file's root comes from evidence about the file (`linter.model.project.RootFinder`),
    never from the current folder; a folder asked for bounds the roots found under it. The
    files of several projects are linted each in its own project, with its own modules."""
    from linter._cache import code_fingerprint
    from linter._engine import _available_cpus, use_projects
    from linter.model.assembly import SummaryStore, build_projects, is_within, roots_of
    from linter.model.project import RootFinder

    absolute = {path: os.path.abspath(path) for path in paths}
    walked = [os.path.abspath(path) for path in requested if os.path.isdir(path)]
    store = SummaryStore(cache_folder, code_fingerprint())
    finder = RootFinder(cache_folder, store.code)
    if given is not None:
        _check_holds(given, list(absolute.values()))
        by_root = {given.folder: list(absolute.values())} if absolute else {}
    else:
        by_root = roots_of(absolute.values(), walked, finder)
        finder.save()
    workers = jobs if jobs is not None else _available_cpus()
    wants, seeds = _prefilters(plan)
    # A root inside a folder the run walked holds the files that walk found under it: walking
    # it again would find the same ones (the excludes are the same, and its files were reached).
    found_files = sorted(absolute.values())
    requests = []
    notes = []
    for root in by_root:
        if any(is_within(root, folder) for folder in walked):
            files = _files_under(found_files, root)
        else:
            files = [
                os.path.abspath(f) for f in discover([root], excluder, force_exclude=True).files
            ]
        known = set(files)
        files += [p for p in by_root[root] if p not in known]
        requests.append((root, files, by_root[root]))
        if len(files) > LARGE_PROJECT_FILES:
            why = given.source if given is not None else finder.found[root].evidence
            linted = by_root[root]
            others = f" and {len(linted) - 1:,} more" if len(linted) > 1 else ""
            notes.append(
                f"read {len(files):,} Python files: the project of {linted[0]}{others} is "
                f"{root} ({why}); to read less, name the root with --project-root (or "
                "project-root in [tool.amp-lint]) or leave folders out with exclude"
            )
    projects = build_projects(
        requests,
        wants,
        store,
        workers,
        wants_key=_wants_key(plan) if cache_folder else None,
        seeds=seeds,
    )
    use_projects(projects)
    root_of = {member: root for root, members in by_root.items() for member in members}
    return {path: root_of[absolute[path]] for path in paths}, tuple(notes)


@dataclass(frozen=True, slots=True)
class _Plan:
    """The configured rule instances of a run, and which of them each path gets."""

    #: The settings in force, overrides applied.
    settings: Settings
    #: Folder the settings' globs are relative to.
    root: str
    #: One configured instance per enabled rule.
    rules: tuple[Rule, ...]
    #: (pattern, selectors) from per-file-ignores.
    per_file_ignores: tuple[tuple[PathPattern, tuple[str, ...]], ...]
    #: Every rule the run knows, selected or not: which modules the project summarises does
    #: not depend on the selection (`_prefilters`).
    known_rules: tuple[type[Rule], ...] = ()

    @classmethod
    def build(
        cls,
        settings: Settings | None,
        *,
        select: Sequence[str] | None = None,
        ignore: Sequence[str] | None = None,
        extend_select: Sequence[str] | None = None,
        rules: Sequence[type[Rule]] | None = None,
    ) -> _Plan:
        if rules is None:
            from linter.rules import ALL_RULES

            rules = ALL_RULES
        for name, selectors in (
            ("select", select),
            ("ignore", ignore),
            ("extend-select", extend_select),
        ):
            check_selectors(selectors or (), rules, name)
        merged = (settings or Settings()).with_overrides(
            select=select, ignore=ignore, extend_select=extend_select
        )
        chosen = enabled_rules(rules, merged.select, merged.ignore, merged.extend_select)
        if rules and not chosen:
            # A run that checks nothing must not say "All checks passed!".
            raise SelectorError(
                f"no rule selected (select {describe_select(merged.select)}, extend-select "
                f"{list(merged.extend_select)}, ignore {list(merged.ignore)}); "
                "amp-lint --list-rules shows the codes"
            )
        return cls(
            settings=merged,
            root=merged.root or os.getcwd(),
            rules=tuple(rule(merged.rule_options.get(rule.code)) for rule in chosen),
            per_file_ignores=tuple(
                (PathPattern(pattern), selectors) for pattern, selectors in merged.per_file_ignores
            ),
            known_rules=tuple(rules),
        )

    def fixable_codes(self) -> frozenset[str]:
        """Codes whose fixes may be applied: ``fixable`` less ``unfixable``, as in ruff."""
        return frozenset(
            rule.code
            for rule in self.rules
            if any(selects(s, type(rule)) for s in self.settings.fixable)
            and not any(selects(s, type(rule)) for s in self.settings.unfixable)
        )

    def fix_mode(self, unsafe_fixes: bool) -> FixMode:
        return FixMode(unsafe=unsafe_fixes, codes=self.fixable_codes(), write=True)

    def rules_for(self, path: str) -> tuple[Rule, ...]:
        """The rules to run on ``path``, after per-file-ignores."""
        if not self.per_file_ignores:
            return self.rules
        relative = relative_to_root(path, self.root)
        dropped = [
            s for pattern, sel in self.per_file_ignores if pattern.matches(relative) for s in sel
        ]
        return tuple(
            rule for rule in self.rules if not any(selects(s, type(rule)) for s in dropped)
        )
