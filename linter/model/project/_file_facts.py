"""What a run knows of a project's files without reading them again.

A warm run over a tree of 11,000 files spent most of its ten seconds reading and scanning files
that had not changed. Each file's facts — the digest of its bytes, whether it mentions a trigger
word of the run's rules, the imports its lines spell, and its summary's digest — are kept in one
file per project, keyed by the file's stat signature (size, modification and change times, inode),
as git and ruff decide that a file is unchanged without reading it. A signature recorded less than
two seconds after the file's last change is not kept: a second write within the file system's
timestamp granularity could leave it the same (git's "racily clean" entries). The facts file is
written once per run, atomically, and read back field by field: anything odd is a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from linter._atomic_write import WriteError, write_atomically

#: Bumped whenever the layout of the facts file changes.
FACTS_FORMAT = 4
#: A signature this close (in nanoseconds) to the time it was read is not trusted later.
_RACY_NS = 2_000_000_000

#: (module, level, names) of one import line (`linter.model.project._imports.scan_imports`).
ScannedImport = tuple[str, int, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class FileFacts:
    """One file's facts, valid while its stat signature is unchanged."""

    #: sha256 of the file's bytes.
    digest: str
    #: Whether its text (a notebook's: its code cells) mentions a trigger word of the rules.
    wants: bool
    #: The imports its lines spell, as JSON: read back only when they are resolved again (a
    #: project's file set changed), not for every file of every warm run.
    imports_json: str
    #: The summary store's key of the summary last made of it, and that summary's digest.
    summary_key: str | None = None
    summary_digest: str | None = None
    #: Whether it mentions a trigger word of a rule the run knows but did not select: the
    #: project summarises it all the same (see `linter.api._prefilters`).
    seeds: bool = False
    #: The folders it adds to ``sys.path`` (`linter.model.project._outline.sys_path_folders`),
    #: searched for its imports as its summary's are.
    sys_path: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        digest: str,
        wants: bool,
        imports: Sequence[ScannedImport],
        seeds: bool = False,
        sys_path: Sequence[str] = (),
    ) -> FileFacts:
        listed = [[module, level, list(names)] for module, level, names in imports]
        imports_json = json.dumps(listed, separators=(",", ":"))
        return cls(digest, wants, imports_json, seeds=seeds, sys_path=tuple(sys_path))

    @property
    def imports(self) -> tuple[ScannedImport, ...]:
        """The scanned imports; none when what was stored is not their shape."""
        try:
            items = json.loads(self.imports_json)
            scanned = []
            for module, level, names in items:
                if not (isinstance(module, str) and _ints([level], 1) and _strings(names)):
                    return ()
                scanned.append((module, level, tuple(names)))
            return tuple(scanned)
        except (ValueError, TypeError, RecursionError):
            return ()


def content_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _signature(info: os.stat_result) -> tuple[int, int, int, int]:
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


class FactsStore:
    """The facts of one project's files for one configuration of the rules (``fingerprint``:
    the linter's code and the rules' trigger words); ``folder`` None keeps nothing."""

    def __init__(self, folder: str | None, root: str, fingerprint: str) -> None:
        self._file = None
        if folder is not None:
            name = hashlib.sha256(f"{fingerprint}\0{os.path.abspath(root)}".encode()).hexdigest()
            self._file = os.path.join(folder, "facts", f"{name[:32]}.json")
        self._memo: dict[str, Any] = {}
        self._known: dict[str, tuple[tuple[int, ...], FileFacts]] = self._read()
        self._now: dict[str, tuple[tuple[int, ...], FileFacts]] = {}
        self._changed = False
        #: Project-wide results derived from the files' summaries, kept beside the facts
        #: (JSON values; each user checks what it reads back).
        self.memo: dict[str, Any] = dict(self._memo)

    def get(self, path: str) -> FileFacts | None:
        """The facts of ``path`` when its signature is the one they were recorded with."""
        known = self._known.get(path)
        if known is None:
            self._changed = True
            return None
        try:
            signature = _signature(os.stat(path))
        except OSError:
            return None
        if signature != known[0]:
            self._changed = True
            return None
        self._now[path] = known
        return known[1]

    def record(self, path: str, facts: FileFacts, info: os.stat_result | None = None) -> None:
        """Keep ``facts`` of ``path`` for later runs (when its signature can be trusted)."""
        self._changed = True
        try:
            info = info or os.stat(path)
        except OSError:
            return
        if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) < _RACY_NS:
            return
        self._now[path] = (_signature(info), facts)

    def summarised(self, path: str, key: str, digest: str) -> None:
        """Note the summary made (or loaded) for ``path``'s current content."""
        known = self._now.get(path)
        if known is not None and (known[1].summary_key, known[1].summary_digest) != (key, digest):
            self._now[path] = (known[0], replace(known[1], summary_key=key, summary_digest=digest))
            self._changed = True

    def save(self) -> None:
        """Write the facts of this run's files (best effort: a cache that cannot be written
        only costs speed)."""
        unchanged = not self._changed and len(self._now) == len(self._known)
        if self._file is None or (unchanged and self.memo == self._memo):
            return
        files = {
            path: [list(signature), _to_json(facts)]
            for path, (signature, facts) in sorted(self._now.items())
        }
        document = {"format": FACTS_FORMAT, "files": files, "memo": self.memo}
        text = json.dumps(document, separators=(",", ":"))
        try:
            os.makedirs(os.path.dirname(self._file), exist_ok=True)
            write_atomically(self._file, text.encode(), durable=False)
        except (OSError, WriteError):
            pass

    def _read(self) -> dict[str, tuple[tuple[int, ...], FileFacts]]:
        if self._file is None:
            return {}
        try:
            with open(self._file, "rb") as stream:
                data = json.loads(stream.read())
            if data.get("format") != FACTS_FORMAT:
                return {}
            memo = data.get("memo", {})
            found = {}
            for path, (signature, facts) in data["files"].items():
                if not (isinstance(path, str) and _ints(signature, 4)):
                    return {}
                found[path] = (tuple(signature), _from_json(facts))
            if isinstance(memo, dict):
                self._memo = memo
            return found
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return {}


def _to_json(facts: FileFacts) -> list[Any]:
    return [
        facts.digest,
        facts.wants,
        facts.imports_json,
        facts.summary_key,
        facts.summary_digest,
        facts.seeds,
        list(facts.sys_path),
    ]


def _from_json(item: Any) -> FileFacts:
    digest, wants, imports_json, summary_key, summary_digest, seeds, sys_path = item
    if not (
        isinstance(digest, str)
        and isinstance(wants, bool)
        and isinstance(imports_json, str)
        and isinstance(seeds, bool)
        and _strings(sys_path)
    ):
        raise TypeError("bad facts")
    for optional in (summary_key, summary_digest):
        if optional is not None and not isinstance(optional, str):
            raise TypeError("bad summary digest")
    return FileFacts(
        digest, wants, imports_json, summary_key, summary_digest, seeds, tuple(sys_path)
    )


def _ints(values: Any, count: int) -> bool:
    return (
        isinstance(values, list)
        and len(values) == count
        and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    )


def _strings(values: Any) -> bool:
    return isinstance(values, list) and all(isinstance(v, str) for v in values)
