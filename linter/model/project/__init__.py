"""Project: the files around the module being linted, and what each tells the others.

Questions answered here: where a file's project starts (`RootFinder`, from markers, a script's
own ``sys.path`` and its package chain) and which file an import names (`ModuleFiles`);
what a run knows of a file without reading it again (`FileFacts`); a module's summary as plain
data (imports, classes and bases, functions with their per-step reasons and calls, AMP values)
and the store that keeps summaries by content; outlines made with CPython's parser; and, across
modules, the `Project`: names resolved through imports and re-exports, the class hierarchy, the
call graph (who calls a function, and whether every step), and the functions of other modules
grafted under a local call. `ModuleContext` is one parsed file inside its project.

May import: syntax. Summaries are *made* a layer up (`linter.model.assembly`), which hands the
project its `SummaryMaker`; analyses see the project through `ProjectQueries`.
"""

from __future__ import annotations

from linter.model.project._file_facts import FactsStore, FileFacts, content_digest
from linter.model.project._imports import ImportTarget, ModuleFiles, scan_imports
from linter.model.project._module_context import (
    ForeignSite,
    ModuleContext,
    context_of,
    positions_of,
)
from linter.model.project._outline import outline, sys_path_folders
from linter.model.project._project import Project
from linter.model.project._project_index import caller_digests, query_digests
from linter.model.project._roots import ROOT_MARKERS, FoundRoot, RootFinder, is_within
from linter.model.project._summary import (
    CONSTANT_CHARS,
    GENERIC_METHOD_NAMES,
    METHOD_WORDS,
    STAR,
    SUMMARY_FORMAT,
    CallRecord,
    ClassRecord,
    FunctionRecord,
    ImportRecord,
    ModuleSummary,
    constructed_receivers,
    empty_summary,
    graft_words,
    qualified_name,
    receiver_type,
    written_callee,
)
from linter.model.project._summary_store import Summaries, SummaryMaker, SummaryStore
from linter.model.project._value_records import (
    AUTOCAST,
    AUTOCAST_FACTORY,
    ENGINE,
    ENGINE_TEXT,
    SCALER,
    VALUE_KINDS,
    ValueRecord,
)

__all__ = [
    "AUTOCAST",
    "AUTOCAST_FACTORY",
    "CONSTANT_CHARS",
    "ENGINE",
    "ENGINE_TEXT",
    "GENERIC_METHOD_NAMES",
    "METHOD_WORDS",
    "ROOT_MARKERS",
    "SCALER",
    "STAR",
    "SUMMARY_FORMAT",
    "VALUE_KINDS",
    "CallRecord",
    "ClassRecord",
    "FactsStore",
    "FileFacts",
    "ForeignSite",
    "FoundRoot",
    "FunctionRecord",
    "ImportRecord",
    "ImportTarget",
    "ModuleContext",
    "ModuleFiles",
    "ModuleSummary",
    "Project",
    "RootFinder",
    "Summaries",
    "SummaryMaker",
    "SummaryStore",
    "ValueRecord",
    "caller_digests",
    "constructed_receivers",
    "content_digest",
    "context_of",
    "empty_summary",
    "graft_words",
    "is_within",
    "outline",
    "positions_of",
    "qualified_name",
    "query_digests",
    "receiver_type",
    "scan_imports",
    "sys_path_folders",
    "written_callee",
]
