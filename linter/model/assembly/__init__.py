"""Assembly: the project built around the files a run lints, with every analysis below it.

Questions answered here: which files form each project and which of them to summarise
(`build_projects`, `roots_of`); a file's summary made from its content — an outline from
CPython's parser, or libcst's full summary with its per-step reasons and AMP values
(`SUMMARY_MAKER`, handed down to the project, which only reads summaries).

May import: every layer below (iterations, steps, values, settings, project, syntax).
"""

from __future__ import annotations

from linter.model.assembly._project_build import (
    SummaryStore,
    build_project,
    build_projects,
    is_within,
    roots_of,
)

__all__ = [
    "SummaryStore",
    "build_project",
    "build_projects",
    "is_within",
    "roots_of",
]
