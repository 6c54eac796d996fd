"""The project's summaries and what they say across modules: names resolved through imports and
re-exports, the class hierarchy, constants, AMP values, and what an outline left out, made when a
question needs it.

`ProjectIndex` is the bottom of `linter.model.project._project.Project`: the call graph
(`linter.model.project._call_graph`) and the grafting of other modules' functions (`Project`) are
built on it. Every answer is recorded in `used`, which keys a lint's cached result.
"""

from __future__ import annotations

import ast
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst

from linter._source import SourceError, read_source
from linter.model.project._file_facts import FileFacts
from linter.model.project._imports import ModuleFiles
from linter.model.project._module_context import (
    Found,
    FunctionRef,
    ModuleContext,
)
from linter.model.project._summary import (
    STAR,
    ClassRecord,
    ImportRecord,
    ModuleSummary,
)
from linter.model.project._summary_store import Summaries, SummaryMaker
from linter.model.project._value_records import VALUE_KINDS, ValueRecord

#: How many re-exports deep a name is followed (``from .engine import train`` in an
#: ``__init__.py`` that another module imports from).
_REEXPORT_DEPTH = 4


@dataclass(frozen=True, slots=True)
class _Deferred:
    """What an outline leaves out, from its module's full summary."""

    #: Function qualname -> why it runs every step within its module.
    functions: dict[str, str | None]
    #: (line, column, callee) of a call site -> (its reason, whether it is open).
    sites: dict[tuple[int, int, str], tuple[str | None, bool]]
    values: tuple[ValueRecord, ...]


def caller_digests(summaries: Mapping[str, ModuleSummary]) -> dict[str, str]:
    """Callee name -> a hash of every call record of that name in ``summaries``: what a result
    that asked for the callers of a function (``callers:<name>``) depends on."""
    digests: dict[str, hashlib._Hash] = {}
    for path in sorted(summaries):
        summary = summaries[path]
        for record in summary.calls:
            name = record.callee.rpartition(".")[2]
            # An outline's call records carry no reasons: its content stands for them.
            text = f"{path}|{record}|{summary.deferred}"
            digests.setdefault(name, hashlib.sha256()).update(text.encode())
    return {name: digest.hexdigest()[:32] for name, digest in digests.items()}


def method_digests(summaries: Mapping[str, ModuleSummary]) -> dict[str, str]:
    """Method name -> a hash of every method of that name in ``summaries`` (path, qualified
    name, source): what a result that resolved a call on an object of unknown class by the
    project's methods of that name (``methods:<name>``) depends on; a new candidate changes it."""
    digests: dict[str, hashlib._Hash] = {}
    for path in sorted(summaries):
        for function in summaries[path].functions:
            _owner, dot, name = function.qualname.partition(".")
            if dot:
                text = f"{path}|{function.qualname}|{function.source}"
                digests.setdefault(name, hashlib.sha256()).update(text.encode())
    return {name: digest.hexdigest()[:32] for name, digest in digests.items()}


def query_digests(summaries: Mapping[str, ModuleSummary]) -> dict[str, str]:
    """``callers:<name>`` and ``methods:<name>`` -> their digests (`caller_digests`,
    `method_digests`): every project query a cached result may depend on."""
    found = {f"callers:{name}": d for name, d in caller_digests(summaries).items()}
    found.update({f"methods:{name}": d for name, d in method_digests(summaries).items()})
    return found


class ProjectIndex:
    """The summaries of a project's modules, and the questions answered from them alone."""

    def __init__(
        self,
        files: ModuleFiles,
        summaries: Mapping[str, ModuleSummary],
        facts: Mapping[str, FileFacts] | None = None,
        query_digests: dict[str, str] | None = None,
        buffers: Mapping[str, bytes] | None = None,
        *,
        maker: SummaryMaker | None = None,
        classes_only: frozenset[str] = frozenset(),
    ) -> None:
        self.files = files
        #: How a full summary (or its values alone) is made for an outline when a question
        #: needs one: the `Summaries`' maker when the project reads through one, else this;
        #: without either, what an outline left out stays unknown.
        self._maker = summaries.maker if isinstance(summaries, Summaries) else maker
        #: path -> summary (a mapping that may load them when first asked for).
        self.summaries = summaries if isinstance(summaries, Summaries) else dict(summaries)
        #: path -> what the plan knew of each project file (its digest, whether it mentions a
        #: trigger word): a result cache and the pre-filter answer from it without a read.
        self.facts: Mapping[str, FileFacts] = facts or {}
        #: Files summarised only for the classes they define (what an entry script or a
        #: package's ``__init__.py`` imports: the candidates of a call on an object of unknown
        #: class). Nothing connects them to AMP code, so a run has nothing in them to lint.
        self.classes_only = classes_only
        #: Paths of the summaries consulted since `reset_used` (a lint's dependencies).
        self.used: set[str] = set()
        self._subclasses: dict[tuple[str, str], list[tuple[str, str]]] | None = None
        self._query_digests: dict[str, str] | None = query_digests
        #: The unsaved text of files an editor has open (what outlines were made from).
        self._buffers: Mapping[str, bytes] = buffers or {}
        #: (path, content digest) of an outline -> what it left out, made when first asked; None
        #: when unknown (the file changed since).
        self._deferred: dict[tuple[str, str], _Deferred | None] = {}
        #: The same key -> the outline's values, made alone when values were asked first (no
        #: per-step reason: see `SummaryMaker.values`); none when unknown.
        self._values: dict[tuple[str, str], tuple[ValueRecord, ...]] = {}
        #: path -> (its summary, its star imports, last first): most modules have none, and
        #: a name no import binds is sought through them again and again.
        self._stars: dict[str, tuple[ModuleSummary, tuple[ImportRecord, ...]]] = {}

    def reset_used(self) -> None:
        self.used = set()

    def summary(self, path: str) -> ModuleSummary | None:
        found = self.summaries.get(path)
        if found is not None:
            self.used.add(path)
        return found

    def display(self, path: str) -> str:
        """``path`` relative to the project root, as findings name other files."""
        return _relative_under(path, self.files.root) or path

    def locate(self, shown: str) -> str:
        """The file ``display`` named ``shown``, as the command line names files: relative to
        the current folder when under it, else absolute. The project's root is found from
        evidence and may not be the folder the run stands in, so a tool reading a report's
        locations needs this form to open the file."""
        absolute = os.path.normpath(os.path.join(self.files.root, shown))
        return _relative_under(absolute, os.getcwd()) or absolute

    def resolve(self, path: str, dotted: str, depth: int = 0) -> FunctionRef | Found | None:
        """What ``dotted`` names in module ``path``: a `FunctionRef`, ``("class", path, name)``,
        ``("module", path)``, or None when it is not the project's."""
        summary = self.summary(path)
        if summary is None or depth > _REEXPORT_DEPTH:
            return None
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            local = ".".join(parts[:cut])
            record = next((r for r in reversed(summary.imports) if r.local == local), None)
            if record is None:
                continue
            target = self.files.resolve(
                path, record.module, record.level, record.name, summary.sys_path
            )
            if target is None:
                return None
            start: Found = ("module", target.path)
            if target.attribute is not None:
                start = self._member(target.path, target.attribute, depth + 1)
            return self._walk(start, parts[cut:], depth + 1)
        defined = self._defined(summary, parts[0])
        if not defined:
            defined = self._star_imported(summary, parts[0], depth)
        return self._walk(defined, parts[1:], depth)

    def _star_imported(self, summary: ModuleSummary, name: str, depth: int) -> Found:
        """``name`` as a ``from module import *`` of ``summary``'s module binds it: a public
        name of that project module (one its ``__all__`` lists, else any without a leading
        underscore) that it defines or imports; the last such import wins, as in Python."""
        kept = self._stars.get(summary.path)
        if kept is None or kept[0] is not summary:
            stars = tuple(r for r in reversed(summary.imports) if r.local == STAR)
            kept = self._stars[summary.path] = (summary, stars)
        for record in kept[1]:
            target = self.files.resolve(
                summary.path, record.module, record.level, None, summary.sys_path
            )
            source = self.summary(target.path) if target is not None else None
            if source is None or source.path == summary.path or not _public(source, name):
                continue
            found = self._member(source.path, name, depth + 1)
            if found:
                return found
        return ()

    def library_name(self, path: str, qualified: str) -> str | None:
        """The library's name for ``qualified`` (a name module ``path`` imports, qualified by
        its own import) when that is a project module's re-export of a library name: `from
        utils.amp import GradScaler` where `utils/amp.py` does `from torch.cuda.amp import
        GradScaler` (in a `try:` whose `except` binds a fallback for an old torch, as GLIP's
        does) is `torch.cuda.amp.GradScaler`. None when the module defines the name itself, or
        imports it from the project, or is not the project's."""
        summary = self.summary(path)
        parts = qualified.split(".")
        if summary is None or len(parts) < 2:
            return None
        for cut in range(len(parts) - 1, 0, -1):
            target = self.files.resolve(path, ".".join(parts[:cut]), 0, None, summary.sys_path)
            if target is None:
                continue
            module = self.summary(target.path)
            name = parts[cut]
            if module is None or target.attribute is not None:
                return None
            if module.function(name) is not None or module.class_named(name) is not None:
                return None
            record = next((r for r in reversed(module.imports) if r.local == name), None)
            if record is None or record.level or record.name is None:
                return None
            if (
                self.files.resolve(target.path, record.module, 0, record.name, module.sys_path)
                is not None
            ):
                return None  # the project's own name: `resolve` follows it
            return ".".join([record.module, record.name, *parts[cut + 1 :]])
        return None

    @staticmethod
    def _defined(summary: ModuleSummary, name: str) -> Found:
        if summary.function(name) is not None:
            return ("function", summary.path, name)
        if summary.class_named(name) is not None:
            return ("class", summary.path, name)
        text = dict(summary.constants).get(name)
        if text is not None:
            return ("constant", summary.path, name, text)
        return ()

    def constant(self, context: ModuleContext, dotted: str) -> cst.BaseExpression | None:
        """The value of a module-level constant of another project module that ``dotted``
        names in the module being linted (``config.AMP_DTYPE``), parsed; None when unknown."""
        path = os.path.abspath(context.path)
        found = self.resolve(path, dotted)
        if not (isinstance(found, tuple) and found and found[0] == "constant"):
            return None
        if found[1] == path:
            return None
        try:
            return cst.parse_expression(found[3])
        except Exception:  # a summary from another libcst version
            return None

    def _member(self, path: str, name: str, depth: int) -> Found:
        """``name`` in module ``path``: defined there, or imported there (a re-export, also
        through a star import)."""
        summary = self.summary(path)
        if summary is None or depth > _REEXPORT_DEPTH:
            return ()
        defined = self._defined(summary, name)
        if defined:
            return defined
        if not any(record.local == name for record in summary.imports):
            return self._star_imported(summary, name, depth)
        found = self.resolve(path, name, depth + 1)
        if isinstance(found, FunctionRef):
            return ("function", found.path, found.qualname)
        return found or ()

    def _walk(self, start: Found, rest: list[str], depth: int) -> FunctionRef | Found | None:
        current = start
        for part in rest:
            if not current:
                return None
            if current[0] == "module":
                current = self._member(current[1], part, depth)
            elif current[0] == "class":
                method = self.method(current[1], current[2], part)
                current = ("function", method.path, method.qualname) if method else ()
            else:
                return None
        if not current:
            return None
        if current[0] == "function":
            return FunctionRef(current[1], current[2])
        return current

    def class_of(self, path: str, dotted: str) -> tuple[str, str] | None:
        """The project class a base or constructor name denotes, as (path, name)."""
        found = self.resolve(path, dotted)
        if isinstance(found, tuple) and found and found[0] == "class":
            return found[1], found[2]
        return None

    def bases(self, path: str, name: str) -> list[tuple[str, str]]:
        """The project classes ``name`` derives from, nearest first (depth-first, cycle-safe)."""
        found: list[tuple[str, str]] = []
        stack = [(path, name)]
        while stack and len(found) < 32:
            current = stack.pop()
            summary = self.summary(current[0])
            record = summary.class_named(current[1]) if summary is not None else None
            if record is None:
                continue
            for base in reversed(record.bases):
                resolved = self.class_of(current[0], base)
                if resolved is not None and resolved not in found and resolved != (path, name):
                    found.append(resolved)
                    stack.append(resolved)
        return found

    def method(self, path: str, cls: str, name: str) -> FunctionRef | None:
        """The method ``name`` as class ``cls`` (or its nearest project base) defines it."""
        for owner_path, owner in ((path, cls), *self.bases(path, cls)):
            summary = self.summary(owner_path)
            record: ClassRecord | None = summary.class_named(owner) if summary else None
            if record is not None and name in record.methods:
                return FunctionRef(owner_path, f"{owner}.{name}")
        return None

    def method_source(self, path: str, cls: str, name: str) -> str | None:
        """The source of method ``name`` as class ``cls`` (or its nearest project base)
        defines it, as its summary keeps it; None when no project class defines it."""
        found = self.method(path, cls, name)
        summary = self.summary(found.path) if found is not None else None
        record = summary.function(found.qualname) if found and summary else None
        return record.source if record is not None else None

    def subclasses(self, path: str, cls: str) -> list[tuple[str, str]]:
        """Project classes deriving from ``cls``, directly or not."""
        if self._subclasses is None:
            direct: dict[tuple[str, str], list[tuple[str, str]]] = {}
            for summary in self.summaries.values():
                for record in summary.classes:
                    for base in self.bases(summary.path, record.name):
                        direct.setdefault(base, []).append((summary.path, record.name))
            self._subclasses = direct
        return self._subclasses.get((path, cls), [])

    def dependency_digest(self, dependency: str) -> str:
        """The current hash of one thing a cached result depends on (see `used`): a summary, a
        caller or method query, or a config file or folder (``file:<path>``) a rule read."""
        if dependency.startswith("file:"):
            return _file_digest(dependency[len("file:") :])
        if dependency.startswith(("callers:", "methods:")):
            if self._query_digests is None:
                self._query_digests = query_digests(self.summaries)
            return self._query_digests.get(dependency, "none")
        if isinstance(self.summaries, Summaries):
            return self.summaries.digest(dependency) or "missing"
        summary = self.summaries.get(dependency)
        return summary.digest() if summary is not None else "missing"

    def values_of(self, path: str, kinds: frozenset[str] = VALUE_KINDS) -> tuple[ValueRecord, ...]:
        """The AMP values module ``path`` exports (`linter.model.values._exported_values`), made now
        for an outline whose text may hold one of ``kinds`` (else the outline's: none); none
        for a module without a summary. Values of other kinds may come with them."""
        summary = self.summary(path)
        if summary is None:
            return ()
        if kinds.isdisjoint(summary.deferred_values):
            return summary.values
        key = (path, summary.deferred)
        if key in self._deferred:  # a reason was asked first: the full summary has the values
            full = self._deferred[key]
            return full.values if full is not None else ()
        if key not in self._values:
            made = self._made(path, summary, values_only=True)
            self._values[key] = made.values if made is not None else ()
        return self._values[key]

    def _made(
        self, path: str, outlined: ModuleSummary, *, values_only: bool = False
    ) -> ModuleSummary | None:
        """The full summary of the content ``outlined`` was made from, or (``values_only``) the
        one holding only its values: through the store when the project has one; None when the
        file changed since."""
        if isinstance(self.summaries, Summaries):
            ask = self.summaries.values_only if values_only else self.summaries.full
            return ask(path, outlined, lambda: self._content(path))
        data = self._content(path)
        if data is None or self._maker is None:
            return None
        return (self._maker.values if values_only else self._maker.full)(path, data, outlined)

    def _content(self, path: str) -> bytes | None:
        """A file's content now: an editor's buffer, else the disk; None when unreadable."""
        data = self._buffers.get(path)
        if data is not None:
            return data
        try:
            return read_source(path)
        except SourceError:
            return None

    def _full(self, path: str, outlined: ModuleSummary) -> _Deferred | None:
        """What an outline left out, from the full summary of the content it was made from;
        None when the file changed since (unknown, not guessed)."""
        key = (path, outlined.deferred)
        if key not in self._deferred:
            full = self._made(path, outlined)
            self._deferred[key] = (
                _Deferred(
                    {f.qualname: f.reason for f in full.functions},
                    {(c.line, c.column, c.callee): (c.reason, c.open) for c in full.calls},
                    full.values,
                )
                if full is not None
                else None
            )
        return self._deferred[key]


def _file_digest(path: str) -> str:
    """A hash of a file's bytes, of a folder's sorted names, or ``missing``."""
    import hashlib

    try:
        if os.path.isdir(path):
            return hashlib.sha256("\0".join(sorted(os.listdir(path))).encode()).hexdigest()[:32]
        with open(path, "rb") as stream:
            return hashlib.sha256(stream.read()).hexdigest()[:32]
    except OSError:
        return "missing"


def _relative_under(path: str, folder: str) -> str | None:
    """``path`` relative to ``folder``, with ``/`` separators; None when it is not under it
    (or on another drive, on Windows)."""
    try:
        relative = os.path.relpath(path, folder)
    except ValueError:
        return None
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return None
    return relative.replace(os.sep, "/")


def _public(summary: ModuleSummary, name: str) -> bool:
    """Whether ``from module import *`` binds ``name`` of the module ``summary`` holds: listed
    in its ``__all__`` when that is a literal list or tuple of strings, else any name without
    a leading underscore."""
    listed = dict(summary.constants).get("__all__")
    if listed is not None:
        try:
            names = ast.literal_eval(listed)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            names = None
        if isinstance(names, list | tuple) and all(isinstance(n, str) for n in names):
            return name in names
    return not name.startswith("_")
