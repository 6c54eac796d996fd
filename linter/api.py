"""The Python API: lint a string or paths and get the results back as data.

>>> from linter import lint_source
>>> lint_source("x = 1\\n")
[]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from linter._diagnostic import Diagnostic, FileError
from linter._discovery import Excluder, discover
from linter._engine import Job, lint_bytes, run_jobs
from linter._patterns import PathPattern, relative_to_root
from linter._rule import Rule
from linter._selection import SelectorError, check_selectors, enabled_rules, selects
from linter.config import Settings

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

    @property
    def ok(self) -> bool:
        """No findings and no errors."""
        return not self.diagnostics and not self.errors


def lint_source(
    source: str | bytes,
    path: str = "<string>",
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    settings: Settings | None = None,
    rules: Sequence[type[Rule]] | None = None,
) -> list[Diagnostic]:
    """Lint one module's source; ``path`` names it in diagnostics and for per-file-ignores.

    Raises `LintError` when the source cannot be decoded or parsed, or a rule fails on it. As
    in the CLI, a source that mentions none of the enabled rules' trigger words is not parsed,
    so its syntax errors go unreported.
    """
    plan = _Plan.build(settings, select=select, ignore=ignore, rules=rules)
    data = source.encode("utf-8") if isinstance(source, str) else source
    report = lint_bytes(path, data, plan.rules_for(path))
    if report.errors:
        raise LintError("; ".join(f"{error.path}: {error.message}" for error in report.errors))
    return list(report.diagnostics)


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
) -> LintResult:
    """Lint files and folders (``"-"`` reads standard input, named ``stdin_filename``).

    ``select``/``ignore``/``extend_select`` override ``settings`` as the command line does.
    ``jobs`` caps the worker processes (default: one per CPU; ``1`` lints in this process).
    ``force_exclude`` applies the excludes to files named in ``paths`` too.
    """
    plan = _Plan.build(
        settings, select=select, ignore=ignore, extend_select=extend_select, rules=rules
    )
    names = [os.fspath(path) for path in paths]
    excluder = Excluder((*plan.settings.exclude, *plan.settings.extend_exclude), plan.root)
    found = discover(
        [name for name in names if name != STDIN], excluder, force_exclude=force_exclude
    )
    work = [Job(path, plan.rules_for(path)) for path in found.files]
    if STDIN in names:
        shown = stdin_filename or STDIN
        if not (force_exclude and stdin_filename and excluder.excluded(stdin_filename)):
            work.append(Job(shown, plan.rules_for(shown), sys.stdin.buffer.read()))
    reports = run_jobs(work, jobs)
    return LintResult(
        diagnostics=tuple(sorted(d for report in reports for d in report.diagnostics)),
        errors=tuple(sorted((*found.errors, *(e for r in reports for e in r.errors)))),
        files_checked=len(reports),
        files_parsed=sum(report.parsed for report in reports),
    )


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
                f"no rule selected (select {list(merged.select)}, extend-select "
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
        )

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
