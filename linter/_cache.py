"""The result cache: an unchanged file with unchanged settings is not linted again.

An entry is keyed by a hash of the file's bytes, amp-lint's version and code, and the effective
settings for that file (its rules and their options), so any change to one of them is a miss, never
a stale hit. A file linted within a project adds its path: its findings depend on the modules
around it, so two repositories vendoring the same module (mmcv, ``ldm``) hold two results.
Entries are JSON (never pickle: a cache folder is just files anyone could have written), each
checked field by field when read; a corrupt, truncated or foreign entry is a miss.
Each is written to a temporary file and renamed into place, so runs sharing the folder at the
same time never see half an entry. Like ``.ruff_cache``, the folder carries a ``CACHEDIR.TAG``
(backup tools skip it) and a ``.gitignore`` holding ``*``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from linter._atomic_write import WriteError, write_atomically
from linter._diagnostic import Diagnostic, FileError, RelatedLocation
from linter._engine import FileReport, Job
from linter._fix import Edit, Fix
from linter._rule import Rule
from linter._version import __version__
from linter.model.project import content_digest

#: The folder name, next to the pyproject.toml that configures the run.
CACHE_FOLDER = ".amp_lint_cache"
#: Environment variable naming the cache folder.
CACHE_ENV = "AMP_LINT_CACHE_DIR"
#: Bumped whenever the entry layout changes.
ENTRY_FORMAT = 2

_CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by amp-lint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


def cache_location(explicit: str | None, configured: str | None, root: str | None) -> str:
    """Where the cache lives, as ruff decides: the command line's ``--cache-dir``, else
    ``$AMP_LINT_CACHE_DIR``, else the ``cache-dir`` setting, else ``.amp_lint_cache`` in the
    configuration's folder (``root``), or in the current folder when there is no configuration."""
    return (
        explicit
        or os.environ.get(CACHE_ENV)
        or configured
        or os.path.join(root or os.getcwd(), CACHE_FOLDER)
    )


def code_fingerprint() -> str:
    """The linter's own source files, by size and modification time: an edited rule (in a
    development install, where the version stays the same) must not reuse old results."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(package.rglob("*.py")):
        with contextlib.suppress(OSError):
            info = path.stat()
            digest.update(
                f"{path.relative_to(package)}:{info.st_size}:{info.st_mtime_ns};".encode()
            )
    return digest.hexdigest()


class ResultCache:
    """Lint results on disk, one JSON file per (content, settings) key."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self._code = code_fingerprint()
        self._settings: dict[tuple[int, ...], str] = {}
        self._ready = False
        self._broken = False

    def key(self, job: Job, data: bytes) -> str | None:
        """The entry name for ``data`` linted by ``job``'s rules."""
        return self.key_for(job, content_digest(data))

    def key_for(self, job: Job, digest: str) -> str | None:
        """The entry name for the bytes whose sha256 is ``digest`` linted by ``job``'s rules
        (the project's plan knows the digest of an unchanged file without reading it)."""
        parts = [self._code, self._rules_fingerprint(job.rules), _kind(job.path), digest]
        if job.project_root is not None:
            # One key for both copies made each copy's entry name the other's summaries: a
            # miss for one of them in every run (25 files of 96 repositories, 3 s of a warm run).
            parts.append(os.path.abspath(job.path))
            # Another file's location is named from the current folder (`ProjectIndex.locate`).
            parts.append(os.getcwd())
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def load(
        self, key: str, path: str, current: Callable[[str], str] | None = None
    ) -> FileReport | None:
        """The stored report for ``key``, as ``path``'s; None when missing, not trustworthy, or
        when a summary it depended on has changed (``current`` gives a dependency's hash now)."""
        try:
            with open(self._entry(key), "rb") as stream:
                entry = json.loads(stream.read())
            depends = entry["depends"]
            if not isinstance(depends, dict):
                return None
            for dependency, digest in depends.items():
                if current is None or current(dependency) != digest:
                    return None
            return _report_from_entry(entry, key, path)
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return None

    def store(
        self, key: str, report: FileReport, current: Callable[[str], str] | None = None
    ) -> None:
        """Save ``report`` (best effort: a cache that cannot be written only costs speed),
        with the hashes of what it depended on."""
        if self._broken or report.cached or (report.depends and current is None):
            return
        record = _entry_from_report(report, key)
        record["depends"] = {d: current(d) for d in report.depends} if current else {}
        entry = json.dumps(record, separators=(",", ":"))
        try:
            self._prepare()
            target = self._entry(key)
            target.parent.mkdir(exist_ok=True)
            write_atomically(str(target), entry.encode(), durable=False)
        except (OSError, WriteError):
            self._broken = True

    def _entry(self, key: str) -> Path:
        return self.folder / f"v{ENTRY_FORMAT}" / key[:2] / f"{key}.json"

    def _prepare(self) -> None:
        if self._ready:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        for name, text in (
            ("CACHEDIR.TAG", _CACHEDIR_TAG),
            (".gitignore", "# Created by amp-lint\n*\n"),
        ):
            if not (self.folder / name).exists():
                write_atomically(str(self.folder / name), text.encode())
        (self.folder / f"v{ENTRY_FORMAT}").mkdir(exist_ok=True)
        self._ready = True

    def _rules_fingerprint(self, rules: Sequence[Rule]) -> str:
        ids = tuple(id(rule) for rule in rules)
        found = self._settings.get(ids)
        if found is None:
            found = self._settings[ids] = rules_fingerprint(rules)
        return found


def rules_fingerprint(rules: Sequence[Rule]) -> str:
    """A hash of the configured rules: their classes, codes and settings."""
    described = [
        [type(rule).__module__, type(rule).__qualname__, rule.code, _jsonable(rule.settings)]
        for rule in rules
    ]
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def _kind(path: str) -> str:
    return "notebook" if path.endswith(".ipynb") else "python"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value, sort_keys=True)
    except TypeError:
        return repr(value)
    return value


def _entry_from_report(report: FileReport, key: str) -> dict[str, Any]:
    return {
        "format": ENTRY_FORMAT,
        "key": key,
        "parsed": report.parsed,
        "errors": [error.message for error in report.errors],
        # Notes about the file itself (a cell left out, tabs read as CPython reads them), kept
        # without the path, which the key does not fix.
        "notes": [
            note.removeprefix(f"{report.path}: ")
            for note in report.notes
            if note.startswith(f"{report.path}: ")
        ],
        "diagnostics": [
            {
                "line": d.line,
                "column": d.column,
                "code": d.code,
                "message": d.message,
                "name": d.name,
                "end": [d.end_line, d.end_column],
                "cell": d.cell,
                "related": [[r.line, r.column, r.message, r.cell, r.path] for r in d.related],
                "fix": None
                if d.fix is None
                else {
                    "applicability": d.fix.applicability,
                    "message": d.fix.message,
                    "edits": [
                        [e.line, e.column, e.end_line, e.end_column, e.content] for e in d.fix.edits
                    ],
                },
            }
            for d in report.diagnostics
        ],
    }


def _report_from_entry(entry: Any, key: str, path: str) -> FileReport | None:
    """Every field checked: a foreign or hand-edited file must not become a result."""
    if (
        not isinstance(entry, dict)
        or entry.get("format") != ENTRY_FORMAT
        or entry.get("key") != key
    ):
        return None
    parsed = entry["parsed"]
    errors = entry["errors"]
    notes = entry.get("notes", [])
    if not isinstance(parsed, bool) or not _all(errors, str) or not _all(notes, str):
        return None
    diagnostics = tuple(_diagnostic(item, path) for item in entry["diagnostics"])
    return FileReport(
        path,
        diagnostics,
        tuple(FileError(path, message) for message in errors),
        parsed=parsed,
        notes=tuple(f"{path}: {note}" for note in notes),
        cached=True,
    )


def _diagnostic(item: dict[str, Any], path: str) -> Diagnostic:
    end_line, end_column = item["end"]
    fix = item["fix"]
    numbers = (item["line"], item["column"], end_line, end_column, item["cell"])
    texts = (item["code"], item["message"], item["name"])
    if not _all(numbers, int) or not _all(texts, str):
        raise TypeError("bad diagnostic")
    related = tuple(_related(*parts) for parts in item["related"])
    return Diagnostic(
        path,
        item["line"],
        item["column"],
        item["code"],
        item["message"],
        name=item["name"],
        end_line=end_line,
        end_column=end_column,
        related=related,
        cell=item["cell"],
        fix=None if fix is None else _fix(fix),
    )


def _related(line: Any, column: Any, message: Any, cell: Any, path: Any) -> RelatedLocation:
    if not _all((line, column, cell), int) or not _all((message, path), str):
        raise TypeError("bad related location")
    return RelatedLocation(line, column, message, cell, path)


def _fix(item: dict[str, Any]) -> Fix:
    edits = []
    for line, column, end_line, end_column, content in item["edits"]:
        if not _all((line, column, end_line, end_column), int) or not isinstance(content, str):
            raise TypeError("bad edit")
        edits.append(Edit(line, column, end_line, end_column, content))
    if item["applicability"] not in ("safe", "unsafe") or not isinstance(item["message"], str):
        raise TypeError("bad fix")
    return Fix(item["applicability"], item["message"], tuple(edits))


def _all(values: Any, kind: type) -> bool:
    return isinstance(values, list | tuple) and all(
        isinstance(value, kind) and not isinstance(value, bool) for value in values
    )
