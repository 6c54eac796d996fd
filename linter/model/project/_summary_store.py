"""Summaries on disk and in memory: the store keyed by a file's content, and the mapping a project
reads them through, which loads each when first asked for."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from linter._atomic_write import WriteError, write_atomically
from linter._source import SourceError, read_source
from linter.model.project._summary import SUMMARY_FORMAT, ModuleSummary, empty_summary

__all__ = ["Summaries", "SummaryMaker", "SummaryStore"]


@dataclass(frozen=True, slots=True)
class SummaryMaker:
    """How summaries are made from a file's content. The project only reads summaries; making
    one takes every analysis of the model (`linter.model.assembly._summary_making`), so the
    layer above hands its maker down rather than the project reaching up for it."""

    #: (path, content, whether it mentions a trigger word) -> its summary: an outline when
    #: CPython's parser takes the file, libcst's full summary otherwise, empty when neither can.
    file: Callable[[tuple[str, bytes, bool]], ModuleSummary]
    #: (path, content, its outline) -> the full summary of the content the outline was made
    #: from; None when the content changed since or cannot be parsed.
    full: Callable[[str, bytes, ModuleSummary], ModuleSummary | None]
    #: ...the summary holding only that content's AMP values (`ModuleSummary.values`).
    values: Callable[[str, bytes, ModuleSummary], ModuleSummary | None]


class SummaryStore:
    """Summaries on disk, keyed by the file's content, path and the linter's code."""

    def __init__(self, folder: str | None, code: str) -> None:
        self.folder = folder
        self.code = code
        self._broken = folder is None

    def key(self, path: str, digest: str) -> str:
        """The entry name of the summary of ``path`` whose bytes have sha256 ``digest``."""
        return hashlib.sha256(
            f"{self.code}\0{SUMMARY_FORMAT}\0{path}\0{digest}".encode()
        ).hexdigest()

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

    def load_full(self, key: str) -> ModuleSummary | None:
        """The full summary behind the outline stored under ``key``, if one was made (see
        `Summaries.full`)."""
        return self.load(f"{key}.full")

    def store_full(self, key: str, summary: ModuleSummary) -> None:
        self.store(f"{key}.full", summary)

    def load_values(self, key: str) -> ModuleSummary | None:
        """The values behind the outline stored under ``key``, if a question made them alone
        (see `Summaries.values_only`)."""
        return self.load(f"{key}.values")

    def store_values(self, key: str, summary: ModuleSummary) -> None:
        self.store(f"{key}.values", summary)

    def store(self, key: str, summary: ModuleSummary) -> None:
        if self._broken:
            return
        text = summary.text()
        target = self._file(key)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            write_atomically(target, text.encode(), durable=False)
        except (OSError, WriteError):
            self._broken = True


class Summaries(Mapping[str, ModuleSummary]):
    """A project's summaries, loaded from the store when first asked for: a warm run whose
    results all come from the cache reads none of them, and a run that lints one repository of
    a tree reads only that repository's. A summary missing from the store after all (a cache
    pruned meanwhile) is made again from the file."""

    def __init__(self, store: SummaryStore, maker: SummaryMaker) -> None:
        self._store = store
        #: How a summary the store lacks is made again, and a full one made when asked for.
        self.maker = maker
        self._loaded: dict[str, ModuleSummary] = {}
        #: path -> (store key, whether the file mentions a trigger word) of the summaries
        #: not loaded yet.
        self._stored: dict[str, tuple[str, bool]] = {}
        self._digests: dict[str, str] = {}
        self._order: list[str] | None = None

    def add(self, path: str, summary: ModuleSummary, digest: str | None = None) -> None:
        self._loaded[path] = summary
        if digest is not None:
            self._digests[path] = digest
        self._order = None

    def add_stored(self, path: str, key: str, digest: str, *, has_amp: bool) -> None:
        self._stored[path] = (key, has_amp)
        self._digests[path] = digest
        self._order = None

    def digest(self, path: str) -> str | None:
        """The digest of ``path``'s summary (without loading it when it is known)."""
        known = self._digests.get(path)
        if known is None and path in self:
            known = self._digests[path] = self[path].digest()
        return known

    def __getitem__(self, path: str) -> ModuleSummary:
        found = self._loaded.get(path)
        if found is not None:
            return found
        key, has_amp = self._stored[path]
        summary = self._store.load(key)
        if summary is None:
            try:
                summary = self.maker.file((path, read_source(path), has_amp))
            except SourceError:
                summary = empty_summary(path)
        self._loaded[path] = summary
        return summary

    def full(
        self, path: str, outlined: ModuleSummary, read: Callable[[], bytes | None]
    ) -> ModuleSummary | None:
        """The full summary of the content the outline of ``path`` was made from: from the
        store when an earlier question made it, else from what ``read`` gives (the file's
        content now, None when unreadable), kept in the store for the next run (a run after
        one edit, an editor's next keystroke) whose outlines the cache gives."""
        key = self._store.key(path, outlined.deferred)
        found = self._store.load_full(key)
        if found is None and (data := read()) is not None:
            found = self.maker.full(path, data, outlined)
            if found is not None:
                self._store.store_full(key, found)
        return found

    def values_only(
        self, path: str, outlined: ModuleSummary, read: Callable[[], bytes | None]
    ) -> ModuleSummary | None:
        """The summary holding only the values of the content the outline of ``path`` was made
        from (`SummaryMaker.values`): the full summary's when an earlier question made that, else
        as `full` does, from the store or from what ``read`` gives, kept for the next run."""
        key = self._store.key(path, outlined.deferred)
        found = self._store.load_full(key) or self._store.load_values(key)
        if found is None and (data := read()) is not None:
            found = self.maker.values(path, data, outlined)
            if found is not None:
                self._store.store_values(key, found)
        return found

    def __contains__(self, path: object) -> bool:
        return path in self._loaded or path in self._stored

    def __iter__(self) -> Iterator[str]:
        # In path order, whatever came from the cache: indexes built over the summaries (callers,
        # subclasses) list their entries in one order in every run.
        if self._order is None:
            self._order = sorted(self._loaded.keys() | self._stored.keys())
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._loaded.keys() | self._stored.keys())
