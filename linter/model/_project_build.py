"""Building the project around the files a run lints: find its root, read its files, summarise
the ones that matter, from the cache when their content is unchanged.

Which files are summarised is the pre-filter widened by the import graph: every file that
mentions a rule's trigger word, every project file such a file imports, and every file that
imports one (``main.py`` holding the loop around ``engine.train_one_epoch``). The import graph
comes from a cheap textual scan, so files that matter for nothing are read but never parsed.
The same set is summarised whether one file or the whole tree is linted, so both give the same
findings for that file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import libcst as cst

from linter._atomic_write import WriteError, write_atomically
from linter._rule import ModuleContext
from linter._source import SourceError, load_document, read_source
from linter.model._imports import ModuleFiles, find_root
from linter.model._project import Project
from linter.model._summary import SUMMARY_FORMAT, ModuleSummary, empty_summary, summarize

#: ``import a.b as c, d`` / ``from .a import b`` at the start of a line (the textual scan).
_IMPORT_LINE = re.compile(
    r"^[ \t]*(?:from[ \t]+(?P<from>\.*[\w.]*)[ \t]+import[ \t]+(?P<names>[^#\n;]+)"
    r"|import[ \t]+(?P<modules>[^#\n;]+))",
    re.MULTILINE,
)

#: Below this many files to summarise, worker processes cost more than they save.
_PARALLEL_MIN = 32


def scan_imports(text: str) -> list[tuple[str, int, tuple[str, ...]]]:
    """(module, level, names) for each import the text's lines spell (a superset is fine: the
    scan only decides which files to summarise)."""
    found = []
    for match in _IMPORT_LINE.finditer(text):
        if match["from"] is not None:
            module = match["from"]
            level = len(module) - len(module.lstrip("."))
            names = tuple(
                part.split(" as ")[0].strip(" ()\\\t")
                for part in match["names"].split(",")
                if part.strip(" ()\\\t")
            )
            found.append((module.lstrip("."), level, names))
        else:
            for part in match["modules"].split(","):
                module = part.split(" as ")[0].strip(" ()\\\t")
                if module:
                    found.append((module, 0, ()))
    return found


class SummaryStore:
    """Summaries on disk, keyed by the file's content, path and the linter's code."""

    def __init__(self, folder: str | None, code: str) -> None:
        self.folder = folder
        self.code = code
        self._broken = folder is None

    def key(self, path: str, data: bytes) -> str:
        digest = hashlib.sha256(f"{self.code}\0{SUMMARY_FORMAT}\0{path}\0".encode())
        digest.update(data)
        return digest.hexdigest()

    def _file(self, key: str) -> str:
        assert self.folder is not None
        return os.path.join(self.folder, "summaries", key[:2], f"{key}.json")

    def load(self, key: str) -> ModuleSummary | None:
        if self.folder is None:
            return None
        try:
            with open(self._file(key), "rb") as stream:
                return ModuleSummary.from_json(json.loads(stream.read()))
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return None

    def store(self, key: str, summary: ModuleSummary) -> None:
        if self._broken:
            return
        text = json.dumps(summary.to_json(), separators=(",", ":"))
        target = self._file(key)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            write_atomically(target, text.encode(), durable=False)
        except (OSError, WriteError):
            self._broken = True


def _summarise_one(item: tuple[str, bytes, bool]) -> ModuleSummary:
    """Parse one file and summarise it; a file that cannot be read or parsed offers nothing."""
    path, data, has_amp = item
    try:
        text = load_document(path, data).text
        module = cst.parse_module(text)
        return summarize(ModuleContext(path, text, module), path, has_amp=has_amp)
    except Exception:  # the file's own lint reports why; its summary is simply empty
        return empty_summary(path)


@dataclass(slots=True)
class _Planned:
    """A project whose files are read and chosen, waiting for the summaries not in the cache."""

    module_files: ModuleFiles
    summaries: dict[str, ModuleSummary]
    todo: list[tuple[str, bytes, bool]]
    keys: dict[str, str]


def build_project(
    root: str,
    files: Sequence[str],
    wants: Callable[[str], bool],
    store: SummaryStore,
    workers: int,
    linted: Sequence[str] = (),
    buffers: dict[str, bytes] | None = None,
) -> Project:
    """The project of ``files`` (absolute paths under ``root``) as the files being ``linted``
    see it: the modules connected to them through imports, in either direction. A file's
    project is its connected part of the import graph, the same whichever of its files a run
    names, so one file alone gets the findings a run over the whole tree gives it.
    ``buffers`` hold the unsaved text of files an editor has open (read instead of the disk)."""
    return build_projects([(root, files, linted)], wants, store, workers, buffers)[root]


def build_projects(
    requests: Sequence[tuple[str, Sequence[str], Sequence[str]]],
    wants: Callable[[str], bool],
    store: SummaryStore,
    workers: int,
    buffers: dict[str, bytes] | None = None,
) -> dict[str, Project]:
    """`build_project` for each (root, files, linted), the summaries of all of them made in
    one pool of workers: a tree of many small repositories keeps every worker busy, where one
    pool per project would summarise each small one on a single core."""
    planned = {
        root: _plan(root, files, wants, store, linted, buffers) for root, files, linted in requests
    }
    todo = [item for plan in planned.values() for item in plan.todo]
    made = {summary.path: summary for summary in _run(todo, workers)}
    projects = {}
    for root, plan in planned.items():
        for path, _data, _has_amp in plan.todo:
            plan.summaries[path] = made[path]
            store.store(plan.keys[path], made[path])
        projects[root] = Project(plan.module_files, plan.summaries)
    return projects


def _plan(
    root: str,
    files: Sequence[str],
    wants: Callable[[str], bool],
    store: SummaryStore,
    linted: Sequence[str],
    buffers: dict[str, bytes] | None,
) -> _Planned:
    module_files = ModuleFiles(root, files)
    texts: dict[str, tuple[bytes, str]] = {}
    for path in module_files.files:
        try:
            data = buffers[path] if buffers and path in buffers else read_source(path)
            texts[path] = (data, load_document(path, data).text)
        except SourceError:
            continue
    amp = {path for path, (_, text) in texts.items() if wants(text)}
    imports: dict[str, set[str]] = {}
    for path, (_, text) in texts.items():
        targets = set()
        for module, level, names in scan_imports(text):
            for name in names or (None,):
                found = module_files.resolve(path, module, level, name)
                if found is not None:
                    targets.add(found.path)
        imports[path] = targets
    chosen = set(amp)
    for path, targets in imports.items():
        if path in amp:
            chosen |= targets
        elif targets & amp:
            chosen.add(path)
    chosen &= _connected(imports, [os.path.abspath(p) for p in linted])
    plan = _Planned(module_files, {}, [], {})
    for path in sorted(chosen):
        if path not in texts:
            continue
        data = texts[path][0]
        key = plan.keys[path] = store.key(path, data)
        cached = store.load(key)
        if cached is not None:
            plan.summaries[path] = cached
        else:
            plan.todo.append((path, data, path in amp))
    return plan


def _connected(imports: dict[str, set[str]], starts: Sequence[str]) -> set[str]:
    """The files reachable from ``starts`` along imports, followed both ways."""
    neighbours: dict[str, set[str]] = {path: set(targets) for path, targets in imports.items()}
    for path, targets in imports.items():
        for target in targets:
            neighbours.setdefault(target, set()).add(path)
    seen = set(starts)
    frontier = list(starts)
    while frontier:
        current = frontier.pop()
        for other in neighbours.get(current, ()):
            if other not in seen:
                seen.add(other)
                frontier.append(other)
    return seen


def _run(todo: list[tuple[str, bytes, bool]], workers: int) -> Iterable[ModuleSummary]:
    if workers <= 1 or len(todo) < _PARALLEL_MIN:
        return [_summarise_one(item) for item in todo]
    try:
        with ProcessPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            chunk = max(1, min(16, len(todo) // (4 * workers)))
            return list(pool.map(_summarise_one, todo, chunksize=chunk))
    except (OSError, RuntimeError):  # no workers to be had: summarise here
        return [_summarise_one(item) for item in todo]


def roots_of(paths: Iterable[str], tops: Sequence[str] = ()) -> dict[str, list[str]]:
    """Project root -> the given paths under it. A file with no project marker above it
    belongs to the outermost of ``tops`` (the folders a run was asked to lint) holding it."""
    found: dict[str, list[str]] = {}
    folders = sorted((os.path.abspath(top) for top in tops), key=len)
    for path in paths:
        fallback = next(
            (top for top in folders if path == top or path.startswith(top.rstrip(os.sep) + os.sep)),
            None,
        )
        found.setdefault(find_root(path, fallback), []).append(path)
    return found
