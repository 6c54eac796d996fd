"""Building the project around the files a run lints: find its root, read its files, summarise
the ones that matter, from the cache when their content is unchanged.

Which files are summarised is the pre-filter widened by the import graph: every file that
mentions a rule's trigger word, every project file such a file imports (through a package that
re-exports the name, to the module defining it), and every file that imports one (``main.py``
holding the loop around ``engine.train_one_epoch``). The import graph
comes from a cheap textual scan, so files that matter for nothing are read but never parsed.
The same set is summarised whether one file or the whole tree is linted, so both give the same
findings for that file.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from linter._garbage_collection import freeze_survivors, raise_threshold
from linter._source import SourceError, load_document, read_source
from linter._worker_pool import worker_pool
from linter.model.assembly._summary_making import SUMMARY_MAKER, summarise_file
from linter.model.project import (
    SUMMARY_FORMAT,
    FactsStore,
    FileFacts,
    ImportTarget,
    ModuleFiles,
    ModuleSummary,
    Project,
    RootFinder,
    Summaries,
    SummaryStore,
    content_digest,
    is_within,
    query_digests,
    scan_imports,
    sys_path_folders,
)

__all__ = [
    "Summaries",
    "SummaryStore",
    "build_project",
    "build_projects",
    "files_to_summarise",
    "is_within",
    "roots_of",
    "scan_imports",
]

#: Below this many files to summarise, worker processes cost more than they save.
_PARALLEL_MIN = 32


@dataclass(slots=True)
class _Planned:
    """A project whose files are read and chosen, waiting for the summaries not in the cache."""

    module_files: ModuleFiles
    summaries: Summaries
    todo: list[tuple[str, bytes, bool]]
    keys: dict[str, str]
    facts: dict[str, FileFacts]
    facts_store: FactsStore
    #: The summarised files that only hold candidate classes (`Project.classes_only`).
    classes_only: frozenset[str] = frozenset()


def build_project(
    root: str,
    files: Sequence[str],
    wants: Callable[[str], bool],
    store: SummaryStore,
    workers: int,
    linted: Sequence[str] = (),
    buffers: dict[str, bytes] | None = None,
    wants_key: str | None = None,
    seeds: Callable[[str], bool] | None = None,
) -> Project:
    """The project of ``files`` (absolute paths under ``root``) as the files being ``linted``
    see it: the modules connected to them through imports, in either direction. A file's
    project is its connected part of the import graph, the same whichever of its files a run
    names, so one file alone gets the findings a run over the whole tree gives it.
    ``buffers`` hold the unsaved text of files an editor has open (read instead of the disk).
    ``wants_key`` names the rules behind ``wants`` and ``seeds``: with it, the files' facts are
    kept for the next run (see `linter.model.project._file_facts`). ``seeds`` tests a file the
    project
    summarises although ``wants`` does not pass it (the trigger words of the rules a run knows
    but did not select)."""
    return build_projects(
        [(root, files, linted)], wants, store, workers, buffers, wants_key, seeds
    )[root]


def build_projects(
    requests: Sequence[tuple[str, Sequence[str], Sequence[str]]],
    wants: Callable[[str], bool],
    store: SummaryStore,
    workers: int,
    buffers: dict[str, bytes] | None = None,
    wants_key: str | None = None,
    seeds: Callable[[str], bool] | None = None,
) -> dict[str, Project]:
    """`build_project` for each (root, files, linted), the summaries of all of them made in
    one pool of workers: a tree of many small repositories keeps every worker busy, where one
    pool per project would summarise each small one on a single core."""
    facts_folder = store.folder if wants_key is not None else None
    stores = {
        root: FactsStore(facts_folder, root, f"{store.code}\0{SUMMARY_FORMAT}\0{wants_key}")
        for root, _files, _linted in requests
    }
    layouts = {root: ModuleFiles(root, files) for root, files, _linted in requests}
    # The facts an earlier run recorded, while the files are unchanged; the rest are read.
    recorded = {
        root: {
            path: stores[root].get(path)
            for path in sorted(layout.files)
            if not (buffers is not None and path in buffers)
        }
        for root, layout in layouts.items()
    }
    unknown = {path for known in recorded.values() for path, facts in known.items() if not facts}
    prefilter = _Prefilter(wants, seeds)
    fresh = _read_facts(sorted(unknown), prefilter, workers)
    planned = {
        root: _plan(
            layouts[root], prefilter, store, linted, buffers, stores[root], recorded[root], fresh
        )
        for root, _files, linted in requests
    }
    # A file in two projects (a folder inside another's root) is summarised once.
    todo = list({item[0]: item for plan in planned.values() for item in plan.todo}.values())
    key_of = {path: plan.keys[path] for plan in planned.values() for path, _, _ in plan.todo}
    # Each summary is stored and hashed as it comes back, and its text released then: all
    # of a tree's texts at once held 100 MB more in this process, and so in every worker
    # forked from it.
    made: dict[str, tuple[ModuleSummary, str]] = {}
    for summary in _run(todo, workers):
        store.store(key_of[summary.path], summary)
        made[summary.path] = (summary, summary.digest())
        summary.release_text()
    projects = {}
    for root, plan in planned.items():
        for path, _data, _has_amp in plan.todo:
            summary, digest = made[path]
            if plan.keys[path] != key_of[path]:  # another project's key for the same file
                store.store(plan.keys[path], summary)
            if facts_folder is None:
                plan.summaries.add(path, summary)
                continue
            plan.summaries.add(path, summary, digest)
            plan.facts_store.summarised(path, plan.keys[path], digest)
        queries = _query_digests(plan) if facts_folder is not None else None
        plan.facts_store.save()
        projects[root] = Project(
            plan.module_files,
            plan.summaries,
            plan.facts,
            queries,
            buffers,
            classes_only=plan.classes_only,
        )
    return projects


def files_to_summarise(
    root: str, files: Sequence[str], wants: Callable[[str], bool], workers: int = 1
) -> list[str]:
    """The files of the project under ``root`` that a cold run linting all of ``files``
    summarises (no cache): what `benchmarks/parse_floor.py` parses."""
    layout = ModuleFiles(root, files)
    prefilter = _Prefilter(wants)
    fresh = _read_facts(sorted(layout.files), prefilter, workers)
    store = SummaryStore(None, "")
    plan = _plan(layout, prefilter, store, files, None, FactsStore(None, root, ""), {}, fresh)
    return [path for path, _data, _has_amp in plan.todo]


def _query_digests(plan: _Planned) -> dict[str, str]:
    """The digests of the project's caller and method queries (`Project.dependency_digest`),
    from the last run's when no summary changed: the check of a warm run's results loads no
    summary."""
    summaries = plan.summaries
    combined = hashlib.sha256()
    for path in summaries:
        combined.update(f"{path}|{summaries.digest(path)}\n".encode())
    known = plan.facts_store.memo.get("queries")
    if isinstance(known, list) and len(known) == 2 and known[0] == combined.hexdigest():
        digests = known[1]
        if isinstance(digests, dict) and all(isinstance(v, str) for v in digests.values()):
            return digests
    digests = query_digests(summaries)
    plan.facts_store.memo["queries"] = [combined.hexdigest(), digests]
    return digests


def _plan(
    module_files: ModuleFiles,
    prefilter: _Prefilter,
    store: SummaryStore,
    linted: Sequence[str],
    buffers: dict[str, bytes] | None,
    facts_store: FactsStore,
    recorded: dict[str, FileFacts | None],
    fresh: dict[str, tuple[FileFacts, os.stat_result] | None],
) -> _Planned:
    """Choose and look up the summaries of one project, from its files' facts: ``recorded``
    by an earlier run, or ``fresh`` (read in this one); a buffer's are made here."""
    facts: dict[str, FileFacts] = {}
    read: dict[str, bytes] = {}
    for path in sorted(module_files.files):
        known = recorded.get(path)
        if buffers is not None and path in buffers:
            data = read[path] = buffers[path]
            try:
                text = load_document(path, data).text
            except SourceError:
                continue
            known = prefilter.facts(data, text)
        elif known is None:
            found = fresh.get(path)
            if found is None:  # unreadable: the file's own lint says why
                continue
            known, info = found
            facts_store.record(path, known, info)
        facts[path] = known
    amp = {path for path, known in facts.items() if known.wants or known.seeds}
    imports = _import_graph(module_files, facts, facts_store)
    near = set(amp)
    for path, targets in imports.items():
        if path in amp:
            near |= targets
        elif targets & amp:
            near.add(path)
    # And what two kinds of neighbour import: a script that imports AMP code and that no
    # file imports (``main.py`` builds the objects it hands to that code: ``Trainer(guidance=
    # StableDiffusion(...))``), and a package's ``__init__.py`` (its registry: the classes
    # ``MODELS[name]`` builds). Their classes are the candidates class-hierarchy analysis
    # reads for a call on an object of unknown class. (Every neighbour's imports were 66%
    # more summaries on the 54-repository blind sample; these two, 43%.)
    imported = {target for targets in imports.values() for target in targets}
    chosen = set(near)
    for path in near - amp:
        targets = imports.get(path, set())
        is_script = bool(targets & amp) and path not in imported
        if is_script or os.path.basename(path) == "__init__.py":
            chosen |= targets
    chosen &= _connected(imports, [os.path.abspath(p) for p in linted])
    plan = _Planned(
        module_files,
        Summaries(store, SUMMARY_MAKER),
        [],
        {},
        facts,
        facts_store,
        frozenset(chosen - near),
    )
    for path in sorted(chosen):
        known = facts.get(path)
        if known is None:
            continue
        key = plan.keys[path] = store.key(path, known.digest)
        if known.summary_key == key and known.summary_digest is not None:
            plan.summaries.add_stored(path, key, known.summary_digest, has_amp=path in amp)
            continue
        cached = store.load(key)
        if cached is not None:
            digest = cached.digest()
            plan.summaries.add(path, cached, digest)
            facts_store.summarised(path, key, digest)
            continue
        content = read.get(path)
        if content is None:
            try:
                content = read_source(path)
            except SourceError:
                continue
            # Read in a worker for its facts, or recorded by an earlier run: the summary is
            # stored under what is read now (the file may have changed meanwhile).
            plan.keys[path] = store.key(path, content_digest(content))
        plan.todo.append((path, content, path in amp))
    return plan


def _import_graph(
    module_files: ModuleFiles, facts: dict[str, FileFacts], facts_store: FactsStore
) -> dict[str, set[str]]:
    """Each file -> the project files its import lines name. What a file's imports resolve to
    depends on its lines and on which files the project has: while neither changed, the last
    run's answer is taken (resolving a tree's hundred thousand imports was most of a warm run)."""
    files_key = hashlib.sha256("\n".join(sorted(module_files.files)).encode()).hexdigest()
    known = facts_store.memo.get("imports")
    last: dict[str, list[object]] = {}
    if isinstance(known, dict) and known.get("files") == files_key:
        last = known.get("targets") or {}
    graph: dict[str, set[str]] = {}
    kept: dict[str, list[object]] = {}
    for path, fact in facts.items():
        entry = last.get(path)
        if (
            isinstance(entry, list)
            and len(entry) == 3
            and entry[0] == fact.digest
            and isinstance(entry[1], list)
            and all(isinstance(t, str) and t in module_files.files for t in entry[1])
            and isinstance(entry[2], dict)
            and all(_digest(facts, p) == d for p, d in entry[2].items())
        ):
            targets = set(entry[1])
            read = dict(entry[2])
        else:
            targets = set()
            read = {}
            for module, level, names in fact.imports:
                for name in names or (None,):
                    found = module_files.resolve(path, module, level, name, fact.sys_path)
                    if found is not None:
                        targets.add(found.path)
                        targets |= _reexported(module_files, facts, found, read)
        graph[path] = targets
        kept[path] = [fact.digest, sorted(targets), read]
    facts_store.memo["imports"] = {"files": files_key, "targets": kept}
    return graph


def _reexported(
    module_files: ModuleFiles,
    facts: dict[str, FileFacts],
    found: ImportTarget,
    read: dict[str, str | None],
    depth: int = 0,
) -> set[str]:
    """The files a package re-exports an imported name from: ``from flair.models import
    LanguageModel`` names ``flair/models/__init__.py``, whose ``from .language_model import
    LanguageModel`` names the file that defines it. Followed through packages only (a few
    levels), and recorded in ``read`` with each package's digest: the answer changes with
    them."""
    name = found.attribute
    if name is None or depth > _REEXPORT_DEPTH or os.path.basename(found.path) != "__init__.py":
        return set()
    package = facts.get(found.path)
    read[found.path] = _digest(facts, found.path)
    if package is None:
        return set()
    targets: set[str] = set()
    for module, level, names in package.imports:
        if names and name in names:
            inner = module_files.resolve(found.path, module, level, name, package.sys_path)
            if inner is not None and inner.path != found.path:
                targets.add(inner.path)
                targets |= _reexported(module_files, facts, inner, read, depth + 1)
    return targets


def _digest(facts: dict[str, FileFacts], path: str) -> str | None:
    known = facts.get(path)
    return known.digest if known is not None else None


#: How many packages a re-exported name is followed through (``a/__init__`` -> ``a/b/__init__``
#: -> the module).
_REEXPORT_DEPTH = 3


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


@dataclass(frozen=True, slots=True)
class _Prefilter:
    """What a file's facts record of its text: whether the run's rules want it (``wants``), and
    whether the other rules the run knows do (``seeds``, None for none): the project summarises
    both kinds (`linter.api._prefilters` says why)."""

    wants: Callable[[str], bool]
    seeds: Callable[[str], bool] | None = None

    def facts(self, data: bytes, text: str) -> FileFacts:
        """The facts of a file whose bytes are ``data`` and decoded text ``text``."""
        wanted = self.wants(text)
        seeds = not wanted and self.seeds is not None and self.seeds(text)
        # A script's own sys.path is searched for its imports here too (only a file that
        # spells it is parsed for it).
        paths = sys_path_folders(text) if "sys.path" in text else ()
        return FileFacts.of(content_digest(data), wanted, scan_imports(text), seeds, paths)


#: The pre-filter the workers reading files apply (set by their pool's initializer).
_WANTS: list[_Prefilter] = []


def _facts_read(
    path: str, prefilter: _Prefilter
) -> tuple[str, tuple[FileFacts, os.stat_result] | None]:
    """``path`` -> its facts and the stat signature they were read under; None when it cannot
    be read or decoded."""
    try:
        info = os.stat(path)
        data = read_source(path)
        text = load_document(path, data).text
    except (SourceError, OSError):
        return path, None
    return path, (prefilter.facts(data, text), info)


def _facts_of(path: str) -> tuple[str, tuple[FileFacts, os.stat_result] | None]:
    """`_facts_read` in a worker, with the pre-filter its pool was started with."""
    return _facts_read(path, _WANTS[0])


def _use_wants(prefilter: _Prefilter) -> None:
    """A facts worker's initializer."""
    raise_threshold()
    _WANTS[:] = [prefilter]


def _read_facts(
    paths: Sequence[str], prefilter: _Prefilter, workers: int
) -> dict[str, tuple[FileFacts, os.stat_result] | None]:
    """The facts of files no earlier run recorded: every file of a cold run, read and tested
    against the pre-filter in worker processes (on the 55-repository sample, reading its
    13,310 files here was most of the 7.4 s a cold run spent on one core). A pre-filter that
    cannot be sent to workers is applied here."""
    if workers > 1 and len(paths) >= _PARALLEL_MIN:
        try:
            with worker_pool(
                max_workers=workers, initializer=_use_wants, initargs=(prefilter,)
            ) as pool:
                chunk = max(1, min(64, len(paths) // (4 * workers)))
                return dict(pool.map(_facts_of, paths, chunksize=chunk))
        except (OSError, RuntimeError, pickle.PicklingError, AttributeError):
            pass  # no workers to be had (or they died), or a pre-filter they cannot be sent
    return dict(_facts_read(path, prefilter) for path in paths)


def _run(todo: list[tuple[str, bytes, bool]], workers: int) -> Iterator[ModuleSummary]:
    """The summary of each of ``todo``, as each is made (in worker processes when many)."""
    done: set[str] = set()
    if workers > 1 and len(todo) >= _PARALLEL_MIN:
        try:
            freeze_survivors()
            with worker_pool(
                max_workers=min(workers, len(todo)), initializer=raise_threshold
            ) as pool:
                chunk = max(1, min(16, len(todo) // (4 * workers)))
                for summary in pool.map(summarise_file, todo, chunksize=chunk):
                    done.add(summary.path)
                    yield summary
                return
        except (OSError, RuntimeError):  # no workers to be had (or they died): go on here
            pass
    for item in todo:
        if item[0] not in done:
            yield summarise_file(item)


def roots_of(
    paths: Iterable[str], bounds: Sequence[str] = (), finder: RootFinder | None = None
) -> dict[str, list[str]]:
    """Project root -> the given files under it, each root found from evidence about the file
    (`RootFinder`). A file under one of ``bounds`` (the folders a run was asked to lint) gets a
    root no wider than the outermost of them holding it, unless a marker or its own ``sys.path``
    says otherwise."""
    finder = finder or RootFinder()
    folders = sorted((os.path.abspath(bound) for bound in bounds), key=len)
    found: dict[str, list[str]] = {}
    for path in paths:
        absolute = os.path.abspath(path)
        bound = next((folder for folder in folders if is_within(absolute, folder)), None)
        found.setdefault(finder.root_of(absolute, bound).folder, []).append(path)
    return found
