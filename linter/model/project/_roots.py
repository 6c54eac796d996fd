"""Where a file's project starts, from evidence in and around the file: never from the folder a
command runs in, so that a file gets one project (and the same findings) wherever amp-lint is
run from, and a run reads no tree it was not asked about.

In order, the first that applies:

1. the nearest folder above the file holding a `ROOT_MARKERS` file (``pyproject.toml``, with or
   without a ``[tool.amp-lint]`` table, ``setup.cfg``, ``setup.py``, ``.git``), as ruff,
   pre-commit and editors find a project;
2. the folder the file puts on its own ``sys.path``, when above it (``tools/train.py`` inserting
   ``os.path.dirname(os.path.dirname(os.path.abspath(__file__)))``; see
   `linter.model.project._script_paths`);
3. the file's own folder.

From 2 or 3 the root goes up while the evidence says the folder is part of the one above:

- it holds an ``__init__.py``, or the folder above does (the package chain: a package's
  subfolder is a portion of the package);
- a Python file directly in a folder further up imports it by its dotted path from there
  (``from models.net import Net`` in ``repo/train.py`` makes ``repo/models/``, a namespace
  package, part of ``repo``'s project);
- a Python file directly in it imports, by absolute name, a module that only a folder further
  up holds, itself or in its ``src/`` (``from lib.utils import f`` in ``repo/scripts/run.py``
  beside ``repo/lib/``; ``from matchmaker.models import m`` in ``repo/matchmaker/train.py``):
  it is run with that folder on its path. A module inside another project (a folder holding
  a marker: a clone of ``torch`` beside the repository) or of the standard library is no such
  evidence.

The nearest folder the evidence names is taken, and the climb goes on from there. It reads the
import lines of the Python files directly in the folders it passes (and, for the second kind,
in the folders above, not their subfolders); a folder whose name cannot be part of a dotted
import ends that search. What a file says is kept in the cache by its stat signature, so a run
over an unchanged tree finds its roots without reading a file. A folder a run was asked to lint
bounds how far up this goes (`RootFinder.root_of`'s ``bound``); a marker and a script's own
``sys.path`` are not bounded.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import os
import sys
import time
from dataclasses import dataclass

from linter._atomic_write import WriteError, write_atomically
from linter.model.project._file_facts import _RACY_NS, _ints, _signature, _strings
from linter.model.project._imports import SOURCE_FOLDERS, scan_imports
from linter.model.project._outline import sys_path_folders

__all__ = ["ROOT_MARKERS", "FoundRoot", "RootFinder", "is_within"]

#: Files whose folder is a project root, as ruff, pre-commit and editors find one.
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")

#: Bumped whenever the layout of the evidence file changes.
_EVIDENCE_FORMAT = 1

#: What a module file is called: the files whose imports and paths are evidence.
_MODULE_SUFFIX = ".py"

#: Top-level modules no folder of a project stands for, as evidence (a ``logging/`` folder
#: of a repository does not make a script that imports ``logging`` one of its files).
_STANDARD_MODULES = frozenset(sys.stdlib_module_names) | frozenset(sys.builtin_module_names)


@dataclass(frozen=True, slots=True)
class FoundRoot:
    """A project root and what settled it."""

    #: The root folder (absolute, normalised).
    folder: str
    #: What settled it, in words for a note: ``"a marker (.git)"``, ``"the top of its package
    #: chain"``...
    evidence: str


@dataclass(frozen=True, slots=True)
class _FileEvidence:
    """What one file says about where it runs from."""

    #: The folders it adds to ``sys.path``, relative to its own (`sys_path_folders`).
    sys_path: tuple[str, ...]
    #: Its absolute imports, (module, names): ``import a.b`` is ``("a.b", ())``, ``from a import
    #: b, c`` is ``("a", ("b", "c"))`` (`scan_imports`).
    imports: tuple[tuple[str, tuple[str, ...]], ...]


_NO_EVIDENCE = _FileEvidence((), ())


@dataclass(frozen=True, slots=True)
class _Folder:
    """What a folder holds, from one listing."""

    #: The names of its entries.
    names: frozenset[str]
    #: Its Python files (absolute paths, sorted).
    modules: tuple[str, ...]


def is_within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies under it (both absolute)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class RootFinder:
    """Finds the project root of each file of a run; what it learns of a folder (markers,
    ``__init__.py``, the imports of the files directly in it) it learns once per run."""

    def __init__(self, cache: str | None = None, fingerprint: str = "") -> None:
        """``cache`` is a folder keeping the files' evidence for later runs (see
        `_EvidenceStore`; None keeps nothing); ``fingerprint`` names the code that read it."""
        self._store = _EvidenceStore(cache, fingerprint)
        self._markers: dict[str, str | None] = {}
        self._packages: dict[str, bool] = {}
        self._files: dict[str, _FileEvidence] = {}
        self._listed: dict[str, _Folder] = {}
        self._claimed: dict[str, frozenset[str]] = {}
        self._holds: dict[str, bool] = {}
        self._tops: dict[tuple[str, str | None], FoundRoot] = {}
        #: Each root found, as first found (the evidence a note about it names).
        self.found: dict[str, FoundRoot] = {}

    @property
    def files_read(self) -> frozenset[str]:
        """The Python files read for evidence: the linted files without a marker above them,
        the files beside them, and those directly in the folders the climb looked at."""
        return frozenset(self._files)

    def save(self) -> None:
        """Keep the evidence read in this run for the next (when a cache folder was given)."""
        self._store.save()

    def root_of(self, path: str, bound: str | None = None) -> FoundRoot:
        """The root of the file ``path``; ``bound`` is the folder the run was asked to lint and
        found it in (None for a file named on its own), above which only a marker or the file's
        own ``sys.path`` may take the root."""
        found = self._root_of(os.path.abspath(path), bound and os.path.abspath(bound))
        return self.found.setdefault(found.folder, found)

    def _root_of(self, path: str, bound: str | None) -> FoundRoot:
        folder = os.path.dirname(path)
        marker = self._marker_root(folder)
        if marker is not None:
            return marker
        raised = self._script_root(path, folder)
        if raised is None:
            return self._top(folder, bound)
        top = self._top(raised, bound if bound is not None and is_within(raised, bound) else None)
        if top.folder != raised:
            return top
        return FoundRoot(raised, f"the folder {os.path.basename(path)} puts on its sys.path")

    def _marker_root(self, folder: str) -> FoundRoot | None:
        """The nearest folder at or above ``folder`` holding a marker."""
        seen = []
        found: str | None = None
        current = folder
        while True:
            if current in self._markers:
                found = self._markers[current]
                break
            seen.append(current)
            found = self._marker_in(current)
            if found is not None:
                break
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        for each in seen:
            self._markers[each] = found
        if found is None:
            return None
        return FoundRoot(os.path.dirname(found), f"a marker ({os.path.basename(found)})")

    @staticmethod
    def _marker_in(folder: str) -> str | None:
        """The marker file ``folder`` holds, if any."""
        return next(
            (
                os.path.join(folder, marker)
                for marker in ROOT_MARKERS
                if os.path.exists(os.path.join(folder, marker))
            ),
            None,
        )

    def _script_root(self, path: str, folder: str) -> str | None:
        """The highest folder at or above the file's own that it puts on its ``sys.path``."""
        highest = None
        for added in self._evidence(path).sys_path:
            candidate = os.path.normpath(os.path.join(folder, added))
            if is_within(folder, candidate) and (highest is None or len(candidate) < len(highest)):
                highest = candidate
        return highest

    def _top(self, start: str, bound: str | None) -> FoundRoot:
        """Where the climb from ``start`` ends (see the module's docstring)."""
        key = (start, bound)
        known = self._tops.get(key)
        if known is not None:
            return known
        current, evidence = start, "the folder of its files, with no marker above"
        while bound is None or current != bound:
            parent = os.path.dirname(current)
            if parent == current:
                break
            if self._is_package(current) or self._is_package(parent):
                current, evidence = parent, "the top of its package chain"
                continue
            importing = self._imported_from(current, bound)
            if importing != parent:
                # Only a folder below the one the files import from can be nearer.
                claiming = self._claimed_by(current, bound, importing)
                if claiming is not None:
                    current, evidence = claiming, "the folder whose files import it"
                    continue
            if importing is None:
                break
            current, evidence = importing, "the folder its files import from"
        if bound is not None and current == bound and current != start:
            evidence = f"{evidence}, as far up as the folder asked"
        found = self._tops[key] = FoundRoot(current, evidence)
        return found

    def _imported_from(self, folder: str, bound: str | None) -> str | None:
        """The nearest folder above ``folder`` holding a module that a Python file directly in
        ``folder`` imports by absolute name and ``folder`` itself does not hold."""
        nearest: str | None = None
        for path in self._listing(folder).modules:
            for module, _names in self._evidence(path).imports:
                parts = module.split(".")
                if parts[0] in _STANDARD_MODULES:
                    continue
                if self._holds_module(folder, parts[:1]):
                    continue
                above = os.path.dirname(folder)
                while above != nearest and (bound is None or is_within(above, bound)):
                    if any(
                        self._holds_module(base, parts) and not self._marker_below(base, parts)
                        for base in (above, *(os.path.join(above, s) for s in SOURCE_FOLDERS))
                    ):
                        nearest = above
                        break
                    parent = os.path.dirname(above)
                    if parent == above:
                        break
                    above = parent
        return nearest

    def _claimed_by(self, folder: str, bound: str | None, stop: str | None) -> str | None:
        """The nearest folder above ``folder`` (and below ``stop``) holding a Python file that
        imports it by its dotted path from there (``models.net`` imports ``models``)."""
        names = [os.path.basename(folder)]
        above = os.path.dirname(folder)
        while above != stop and all(n.isidentifier() and not keyword.iskeyword(n) for n in names):
            if bound is not None and not is_within(above, bound):
                return None
            dotted = ".".join(names)
            if any(m == dotted or m.startswith(dotted + ".") for m in self._claims(above)):
                return above
            parent = os.path.dirname(above)
            if parent == above:
                return None
            names.insert(0, os.path.basename(above))
            above = parent
        return None

    def _claims(self, folder: str) -> frozenset[str]:
        """The modules the Python files directly in ``folder`` import by absolute name:
        ``import a.b`` gives ``a.b``, ``from a import b`` gives ``a`` and ``a.b``."""
        known = self._claimed.get(folder)
        if known is None:
            modules: set[str] = set()
            for path in self._listing(folder).modules:
                for module, names in self._evidence(path).imports:
                    modules.add(module)
                    modules.update(f"{module}.{name}" for name in names)
            known = self._claimed[folder] = frozenset(modules)
        return known

    def _holds_module(self, folder: str, parts: list[str]) -> bool:
        """Whether ``folder`` holds the module ``parts`` names: ``a/b.py`` or a folder
        ``a/b/`` (a package, or a namespace package)."""
        names = self._listing(folder).names
        if parts[0] not in names and parts[0] + _MODULE_SUFFIX not in names:
            return False  # most imports (torch, numpy): one look at the folder's listing
        base = os.path.join(folder, *parts)
        known = self._holds.get(base)
        if known is None:
            known = self._holds[base] = os.path.isfile(base + _MODULE_SUFFIX) or os.path.isdir(base)
        return known

    def _marker_below(self, folder: str, parts: list[str]) -> bool:
        """Whether the module's top folder under ``folder`` is a project of its own."""
        top = os.path.join(folder, parts[0])
        return os.path.isdir(top) and self._marker_in(top) is not None

    def _listing(self, folder: str) -> _Folder:
        """What ``folder`` holds (listed once)."""
        known = self._listed.get(folder)
        if known is None:
            names: list[str] = []
            modules: list[str] = []
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        names.append(entry.name)
                        if entry.name.endswith(_MODULE_SUFFIX) and _is_file(entry):
                            modules.append(entry.path)
            except OSError:
                pass
            known = self._listed[folder] = _Folder(frozenset(names), tuple(sorted(modules)))
        return known

    def _is_package(self, folder: str) -> bool:
        known = self._packages.get(folder)
        if known is None:
            known = self._packages[folder] = os.path.isfile(os.path.join(folder, "__init__.py"))
        return known

    def _evidence(self, path: str) -> _FileEvidence:
        """What the file ``path`` says about where it runs from (read once, and not at all while
        an earlier run's reading of it holds)."""
        known = self._files.get(path)
        if known is None:
            try:
                info = os.stat(path)
                known = self._store.get(path, info)
                if known is None:
                    with open(path, "rb") as stream:
                        data = stream.read()
                    known = _read_evidence(data)
                    self._store.record(path, known, info)
            except OSError:
                known = _NO_EVIDENCE
            self._files[path] = known
        return known


def _read_evidence(data: bytes) -> _FileEvidence:
    text = data.decode("utf-8", errors="replace")
    folders = sys_path_folders(text) if b"sys.path" in data else ()
    imports = tuple(
        (module, names) for module, level, names in scan_imports(text) if module and not level
    )
    return _FileEvidence(folders, imports)


class _EvidenceStore:
    """The evidence of the files earlier runs read, kept while a file's stat signature is the
    one it was read under (as `FactsStore` keeps a project's facts): a run over an unchanged
    tree finds its roots without reading a file. One JSON file per cache folder and linter
    code; entries of files a run did not look at are kept (another run's tree)."""

    def __init__(self, folder: str | None, fingerprint: str) -> None:
        self._file = None
        if folder is not None:
            name = hashlib.sha256(f"{fingerprint}\0{_EVIDENCE_FORMAT}".encode()).hexdigest()
            self._file = os.path.join(folder, "roots", f"{name[:32]}.json")
        self._known = self._read()
        self._seen: set[str] = set()
        self._changed = False

    def get(self, path: str, info: os.stat_result) -> _FileEvidence | None:
        self._seen.add(path)
        known = self._known.get(path)
        if known is None or known[0] != _signature(info):
            return None
        return known[1]

    def record(self, path: str, evidence: _FileEvidence, info: os.stat_result) -> None:
        if (
            self._file is None
            or time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) < _RACY_NS
        ):
            return
        self._known[path] = (_signature(info), evidence)
        self._changed = True

    def save(self) -> None:
        """Write the evidence (best effort: a cache that cannot be written only costs speed)."""
        if self._file is None or not self._changed:
            return
        # Another run's entries stay while their files do.
        gone = [path for path in self._known if path not in self._seen and not os.path.exists(path)]
        for path in gone:
            del self._known[path]
        files = {
            path: [
                list(signature),
                list(evidence.sys_path),
                [[m, list(n)] for m, n in evidence.imports],
            ]
            for path, (signature, evidence) in sorted(self._known.items())
        }
        text = json.dumps({"format": _EVIDENCE_FORMAT, "files": files}, separators=(",", ":"))
        try:
            os.makedirs(os.path.dirname(self._file), exist_ok=True)
            write_atomically(self._file, text.encode(), durable=False)
        except (OSError, WriteError):
            pass
        self._changed = False

    def _read(self) -> dict[str, tuple[tuple[int, ...], _FileEvidence]]:
        if self._file is None:
            return {}
        try:
            with open(self._file, "rb") as stream:
                data = json.loads(stream.read())
            if data.get("format") != _EVIDENCE_FORMAT:
                return {}
            found = {}
            for path, (signature, sys_path, imports) in data["files"].items():
                if not (isinstance(path, str) and _ints(signature, 4) and _strings(sys_path)):
                    return {}
                pairs = tuple((module, tuple(names)) for module, names in imports)
                if not all(isinstance(m, str) and _strings(list(n)) for m, n in pairs):
                    return {}
                found[path] = (tuple(signature), _FileEvidence(tuple(sys_path), pairs))
            return found
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return {}


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False
