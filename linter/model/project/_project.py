"""The project: every module's summary, joined by resolved imports, calls and class bases.

Rules never walk another file's tree. When an analysis of the module being linted reaches the edge
of what the module shows, it asks the project:

- *Is this function run every training step?* `Project.per_step_reason` follows the call sites of
  the function across modules (a ``train_one_epoch`` whose loop is in ``main.py``; a subclass's
  ``train_step`` that a base class's loop calls through ``self``), as far as the shared depth
  limit.
- *What does this call run?* `Project.graft` parses the called function of another module from its
  summary and hangs it under the call, so the iteration, dtype and scaler analyses read its events
  and returns as they read a function of the same module; positions inside it map to the call
  site, and findings name the other file as a related location.

Every answer is recorded: `used` lists the summaries a lint consulted, which key its cached
result. Unknown stays unknown: an unresolvable import, an ambiguous method name or a call into a
library gives no answer, never a guess.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst

from linter._parse import parse_module, parse_module_anew
from linter._source import SourceError, read_source
from linter.model.project._file_facts import FileFacts
from linter.model.project._imports import ModuleFiles
from linter.model.project._module_context import (
    ForeignSite,
    Found,
    FunctionRef,
    ModuleContext,
    positions_of,
)
from linter.model.project._summary import (
    GENERIC_METHOD_NAMES,
    CallRecord,
    ClassRecord,
    FunctionRecord,
    ModuleSummary,
    constructed_receivers,
    instance_type,
    qualified_name,
    receiver_type,
    written_callee,
)
from linter.model.project._summary_store import Summaries, SummaryMaker
from linter.model.project._value_records import VALUE_KINDS, ValueRecord
from linter.model.syntax._line_numbers import call_lines
from linter.model.syntax._module_index import MAX_CALL_DEPTH, module_index
from linter.model.syntax._tree import descendants, walk

#: An identifier, as a file's text names a function or class.
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
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


class Project:
    """The summaries of a project's modules and the questions rules ask across them."""

    def __init__(
        self,
        files: ModuleFiles,
        summaries: Mapping[str, ModuleSummary],
        facts: Mapping[str, FileFacts] | None = None,
        caller_digests: dict[str, str] | None = None,
        buffers: Mapping[str, bytes] | None = None,
        *,
        maker: SummaryMaker | None = None,
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
        #: Paths of the summaries consulted since `reset_used` (a lint's dependencies).
        self.used: set[str] = set()
        #: path -> (the names that reach each imported function with a graft word, and its
        #: source; the modules read): `imported_text` keeps of them what a file's text names,
        #: asked by the pre-filter and again by the lint of the same file.
        self._imported: dict[str, tuple[list[tuple[frozenset[str], str]], tuple[str, ...]]] = {}
        self._callers: dict[str, list[tuple[str, CallRecord]]] | None = None
        self._subclasses: dict[tuple[str, str], list[tuple[str, str]]] | None = None
        self._methods: dict[str, list[FunctionRef]] | None = None
        self._caller_digests: dict[str, str] | None = caller_digests
        self._components: dict[str, frozenset[str]] | None = None
        self._parsed: dict[tuple[str, str], cst.Module | None] = {}
        #: (path, qualname) -> trees of a grafted function, one per call site of one file.
        self._grafted: dict[tuple[str, str], list[cst.Module]] = {}
        #: (path, qualname) -> the first of those trees, pickled (see `_copy_of`).
        self._pickled: dict[tuple[str, str], bytes] = {}
        self._calls_by_line: dict[tuple[str, str], dict[tuple[int, str], cst.Call]] = {}
        #: (path, qualname) -> the parsed caller's function and its code nodes.
        self._caller_nodes: dict[tuple[str, str], tuple[cst.CSTNode, ...]] = {}
        #: The unsaved text of files an editor has open (what outlines were made from).
        self._buffers: Mapping[str, bytes] = buffers or {}
        #: (path, content digest) of an outline -> what it left out, made when first asked; None
        #: when unknown (the file changed since).
        self._deferred: dict[tuple[str, str], _Deferred | None] = {}
        #: The same key -> the outline's values, made alone when values were asked first (no
        #: per-step reason: see `SummaryMaker.values`); none when unknown.
        self._values: dict[tuple[str, str], tuple[ValueRecord, ...]] = {}

    # -- bookkeeping --------------------------------------------------------------------------

    def reset_used(self) -> None:
        self.used = set()

    def summary(self, path: str) -> ModuleSummary | None:
        found = self.summaries.get(path)
        if found is not None:
            self.used.add(path)
        return found

    def display(self, path: str) -> str:
        """``path`` relative to the project root, as findings name other files."""
        try:
            relative = os.path.relpath(path, self.files.root)
        except ValueError:  # another drive on Windows
            return path
        return path if relative.startswith("..") else relative.replace(os.sep, "/")

    # -- names --------------------------------------------------------------------------------

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
        return self._walk(self._defined(summary, parts[0]), parts[1:], depth)

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
        """``name`` in module ``path``: defined there, or imported there (a re-export)."""
        summary = self.summary(path)
        if summary is None:
            return ()
        defined = self._defined(summary, name)
        if defined or not any(record.local == name for record in summary.imports):
            return defined
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

    def call_targets(self, path: str, record: CallRecord) -> list[FunctionRef]:
        """The project functions a call may run: the resolved name; for ``self.m()`` the method
        of the caller's class or a base, and the overrides of its subclasses; for ``obj.m()`` on
        an object of a known class (constructed, or a parameter's annotation), that class's
        method, none for a class no summary holds; on an unknown object, the one project method
        of that (non-generic) name, if only one."""
        callee = record.callee
        head, _, rest = callee.partition(".")
        if head in ("self", "cls") and rest and "." not in rest and record.caller_class:
            targets = []
            found = self.method(path, record.caller_class, rest)
            if found is not None:
                targets.append(found)
            for sub_path, sub in self.subclasses(path, record.caller_class):
                summary = self.summary(sub_path)
                sub_record = summary.class_named(sub) if summary else None
                if sub_record is not None and rest in sub_record.methods:
                    targets.append(FunctionRef(sub_path, f"{sub}.{rest}"))
            return targets
        if record.receiver_type is not None and rest:
            # `trainer = Trainer(cfg)` ... `trainer.train_step(...)`: that class's method.
            owner = self.class_of(path, record.receiver_type)
            if owner is not None:
                method = self.method(*owner, callee.rpartition(".")[2])
                return [method] if method is not None else []
            if record.receiver_type.rpartition(".")[2][:1].isupper():
                # `task = Task()` or `task: Task` of a class no summary holds (another
                # library's, or a module without AMP code): not whichever project method shares
                # the name.
                return []
        resolved = self.resolve(path, callee)
        if isinstance(resolved, FunctionRef):
            return [resolved]
        if isinstance(resolved, tuple) and resolved and resolved[0] == "class":
            init = self.method(resolved[1], resolved[2], "__init__")
            return [init] if init is not None else []
        if rest and head not in ("self", "cls"):
            return self._unique_method(path, callee.rpartition(".")[2])
        return []

    def component(self, path: str) -> frozenset[str]:
        """The summarised modules connected to ``path`` through imports, either way: all a
        module's findings may depend on, whichever files a run names."""
        if self._components is None:
            neighbours: dict[str, set[str]] = {p: set() for p in self.summaries}
            for summary in self.summaries.values():
                for record in summary.imports:
                    target = self.files.resolve(
                        summary.path, record.module, record.level, record.name, summary.sys_path
                    )
                    if target is not None and target.path in neighbours:
                        neighbours[summary.path].add(target.path)
                        neighbours[target.path].add(summary.path)
            components: dict[str, frozenset[str]] = {}
            for start in neighbours:
                if start in components:
                    continue
                seen, frontier = {start}, [start]
                while frontier:
                    for other in neighbours[frontier.pop()] - seen:
                        seen.add(other)
                        frontier.append(other)
                members = frozenset(seen)
                components.update(dict.fromkeys(members, members))
            self._components = components
        return self._components.get(path, frozenset({path}))

    def _unique_method(self, path: str, name: str) -> list[FunctionRef]:
        """The one method named ``name`` among the modules connected to ``path``."""
        if name in GENERIC_METHOD_NAMES or name.startswith("__"):
            return []
        if self._methods is None:
            methods: dict[str, list[FunctionRef]] = {}
            for summary in self.summaries.values():
                for function in summary.functions:
                    _owner, dot, method = function.qualname.partition(".")
                    if dot:
                        methods.setdefault(method, []).append(
                            FunctionRef(summary.path, function.qualname)
                        )
            self._methods = methods
        reachable = self.component(path)
        found = [ref for ref in self._methods.get(name, []) if ref.path in reachable]
        if len(found) == 1:
            self.used.add(found[0].path)
            return found
        return []

    def imported_text(self, path: str, text: str) -> str:
        """The sources of the functions in the project modules ``path`` imports that ``text``
        (the file's source) names: what the pre-filter reads besides the file, since their
        events may enter its iterations. A function enters a caller only through a call that
        names it, a method through a call that names the method, a constructor through its
        class's name (`_reaching_names`): one the file never names brings nothing (a helper
        module's other functions made 931 of 1,575 files of a 55-repository tree pass the
        pre-filter and be parsed for nothing, and a class's methods, brought whenever the class
        was named, 251 of 1,196 more)."""
        known = self._imported.get(path)
        if known is None:
            known = self._imported[path] = self._imported_functions(path)
        functions, modules = known
        self.used.update(modules)
        if not functions:
            return ""
        named = set(_IDENTIFIER.findall(text))
        return "\n".join(source for names, source in functions if names <= named)

    def _imported_functions(
        self, path: str
    ) -> tuple[list[tuple[frozenset[str], str]], tuple[str, ...]]:
        """(the names that reach it, its source) of each function with a graft word in the
        project modules ``path`` imports, and those modules."""
        summary = self.summaries.get(path)
        if summary is None:
            return [], ()
        modules = set()
        for record in summary.imports:
            target = self.files.resolve(
                path, record.module, record.level, record.name, summary.sys_path
            )
            if target is not None and target.path != path:
                modules.add(target.path)
        functions: list[tuple[frozenset[str], str]] = []
        read: list[str] = []
        for module in sorted(modules):
            imported = self.summaries.get(module)
            if imported is not None:
                read.append(module)
                functions.extend(
                    (_reaching_names(f.qualname), f.source) for f in imported.functions if f.words
                )
        return functions, tuple(read)

    # -- per-step -----------------------------------------------------------------------------

    def callers(self, target: FunctionRef) -> list[tuple[str, CallRecord]]:
        """Every call site in the project that may run ``target``."""
        if self._callers is None:
            by_name: dict[str, list[tuple[str, CallRecord]]] = {}
            for summary in self.summaries.values():
                for record in summary.calls:
                    last = record.callee.rpartition(".")[2]
                    by_name.setdefault(last, []).append((summary.path, record))
            self._callers = by_name
        name = target.qualname.rpartition(".")[2]
        # The answer depends on every call of that name anywhere: a new caller changes it.
        self.used.add(f"callers:{name}")
        candidates = self._callers.get(name, [])
        if name == "__init__":
            owner = target.qualname.partition(".")[0]
            candidates = candidates + self._callers.get(owner, [])
        used = set(self.used)
        sites = [
            (path, record)
            for path, record in candidates
            if target in self.call_targets(path, record)
        ]
        self.used = used | {path for path, _ in sites}
        return sites

    def dependency_digest(self, dependency: str) -> str:
        """The current hash of one thing a cached result depends on (see `used`): a summary, a
        caller query, or a config file or folder (``file:<path>``) a rule read."""
        if dependency.startswith("file:"):
            return _file_digest(dependency[len("file:") :])
        if dependency.startswith("callers:"):
            if self._caller_digests is None:
                self._caller_digests = caller_digests(self.summaries)
            return self._caller_digests.get(dependency[len("callers:") :], "none")
        if isinstance(self.summaries, Summaries):
            return self.summaries.digest(dependency) or "missing"
        summary = self.summaries.get(dependency)
        return summary.digest() if summary is not None else "missing"

    def per_step_reason(self, context: ModuleContext, function: cst.FunctionDef) -> str | None:
        """Why ``function`` (of the module being linted) runs every step because of callers
        anywhere in the project, or None."""
        index = module_index(context)
        qualname = qualified_name(index, function)
        path = os.path.abspath(context.path)
        if qualname is None or path not in self.summaries:
            return None
        return self._called_per_step(FunctionRef(path, qualname), path, 0, frozenset())

    def _called_per_step(
        self, target: FunctionRef, here: str, depth: int, seen: frozenset[FunctionRef]
    ) -> str | None:
        name = target.qualname.rpartition(".")[2]
        for path, record in self.callers(target):
            where = "" if path == here else f" of {self.display(path)}"
            reason, _open = self.call_reason(path, record)
            if reason is not None:
                return f"in `{name}()`, called {reason}{where}"
        if depth >= MAX_CALL_DEPTH:
            return None
        for path, record in self.callers(target):
            caller = FunctionRef(path, record.caller)
            if not self.call_reason(path, record)[1] or not record.caller or caller in seen:
                continue
            summary = self.summary(path)
            function = summary.function(record.caller) if summary else None
            if function is None:
                continue
            function_reason = self.function_reason(path, function)
            if function_reason is not None and path != here:
                where = f" of {self.display(path)}"
                return f"in `{name}()`, called from `{record.caller}`{where}, {function_reason}"
            why = self._called_per_step(caller, here, depth + 1, seen | {target})
            if why is not None:
                return f"in `{name}()`, called {why}"
        return None

    def call_reason(self, path: str, record: CallRecord) -> tuple[str | None, bool]:
        """Why the call site ``record`` of ``path`` runs every step (or None), and whether it
        runs whenever its function runs: from its summary, or for an outline from the full
        summary made now (see `linter.model.project._outline`)."""
        summary = self.summaries.get(path)
        if summary is None or not summary.deferred:
            return record.reason, record.open
        full = self._full(path, summary)
        if full is None:
            return None, False
        return full.sites.get((record.line, record.column, record.callee), (None, False))

    def function_reason(self, path: str, function: FunctionRecord) -> str | None:
        """Why ``function`` of ``path`` runs every step from within its module, or None (as
        `call_reason`, for a function)."""
        summary = self.summaries.get(path)
        if summary is None or not summary.deferred:
            return function.reason
        full = self._full(path, summary)
        return full.functions.get(function.qualname) if full is not None else None

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

    # -- callers' arguments --------------------------------------------------------------------

    def calls_from_other_modules(
        self, context: ModuleContext, function: cst.FunctionDef, via: cst.CSTNode
    ) -> list[cst.Call]:
        """The calls of ``function`` (of the module being linted) in functions of other
        modules, each parsed from its caller's summary and attached to ``context`` under
        ``via`` (the parameter asked about), so an analysis reads what they pass to it as it
        reads a local call's arguments. Calls at a module's top level are not summarised."""
        index = module_index(context)
        qualname = qualified_name(index, function)
        path = os.path.abspath(context.path)
        if qualname is None or path not in self.summaries:
            return []
        found = []
        for caller_path, record in self.callers(FunctionRef(path, qualname)):
            summary = self.summary(caller_path)
            caller = summary.function(record.caller) if summary and record.caller else None
            if caller_path == path or caller is None:
                continue
            parsed = self._parsed_function(caller_path, caller.qualname, caller.source)
            if parsed is None:
                continue
            nodes = self._caller_nodes.get(key := (caller_path, caller.qualname))
            if nodes is None:
                root = next(s for s in parsed.body if isinstance(s, cst.FunctionDef))
                # Walked once per run: each parameter asked about attaches the same caller
                # again (26k attaches of 1,100 callers over 95 real repositories).
                nodes = self._caller_nodes[key] = (root, *descendants(root))
            calls = self._calls_by_line.get(key)
            if calls is None:
                calls = self._calls_by_line[key] = _calls_by_line(parsed, caller.source, nodes)
            call = calls.get((record.line - caller.line + 1, record.callee))
            if call is None:
                continue
            site = ForeignSite(via, self.display(caller_path), caller.qualname, caller.line, parsed)
            context.attach(nodes[0], via, site, nodes)
            found.append(call)
        return found

    def _parsed_function(self, path: str, qualname: str, source: str) -> cst.Module | None:
        """A summarised function's source, parsed once per run (its nodes stay the same
        objects, so every module that asks shares them)."""
        key = (path, qualname)
        if key not in self._parsed:
            try:
                module = parse_module(source)
            except Exception:  # a summary from another libcst version
                module = None
            if module is not None and not any(isinstance(s, cst.FunctionDef) for s in module.body):
                module = None
            self._parsed[key] = module
        return self._parsed[key]

    # -- grafting -----------------------------------------------------------------------------

    def graft(
        self, context: ModuleContext, call: cst.Call, words: tuple[str, ...] = ()
    ) -> cst.FunctionDef | None:
        """The function of another module that ``call`` runs, parsed from its summary and hung
        under ``call`` (see the module docstring), if its source mentions one of ``words`` (any,
        when empty); None when the project cannot say which function it is."""
        grafts: dict[cst.Call, cst.FunctionDef | None] = context.grafts
        if call in grafts:
            return grafts[call]
        found = self._graft(context, call, words)
        if found is not None or not words:
            grafts[call] = found
        return found

    def _graft(
        self, context: ModuleContext, call: cst.Call, words: tuple[str, ...]
    ) -> cst.FunctionDef | None:
        index = module_index(context)
        if call in context.graft_targets:
            found = context.graft_targets[call]
        else:
            found = context.graft_targets[call] = self._graft_target(context, call)
        if found is None:
            return None
        target_path, target_qualname = found
        summary = self.summary(target_path)
        function_record = summary.function(target_qualname) if summary else None
        if function_record is None or (words and not set(words) & set(function_record.words)):
            return None
        module = self._graft_tree(context, found, function_record.source)
        if module is None:
            return None
        grafted = next((s for s in module.body if isinstance(s, cst.FunctionDef)), None)
        if grafted is None:
            return None
        site = ForeignSite(
            call, self.display(target_path), target_qualname, function_record.line, module
        )
        context.attach(grafted, call, site, index.attach(grafted, call))
        context.graft_origins[grafted] = found
        return grafted

    def _graft_tree(
        self, context: ModuleContext, key: tuple[str, str], source: str
    ) -> cst.Module | None:
        """A tree of the function ``key`` that no other call of this file has grafted: each
        call site needs its own (its nodes' parents and order place them at that call), while
        the next file linted reuses the trees (composer's trainer tests graft `Trainer.fit` at
        123 calls of one file; 2,097 of 2,962 graft parses on a 55-repository tree repeated an
        earlier parse). At most `_GRAFT_COPIES` trees per function stay kept."""
        used = context.graft_copies.get(key, 0)
        context.graft_copies[key] = used + 1
        trees = self._grafted.setdefault(key, [])
        if used < len(trees):
            return trees[used]
        module = self._copy_of(key, trees[0]) if trees else None
        if module is None:
            try:
                module = parse_module_anew(source)
            except Exception:  # a summary from another libcst version: nothing to graft
                return None
        if len(trees) < _GRAFT_COPIES:
            trees.append(module)
        return module

    def _copy_of(self, key: tuple[str, str], module: cst.Module) -> cst.Module | None:
        """A tree equal to ``module`` (the first tree of the function ``key``) that shares no
        node with it, or None. Unpickling our own tree, pickled once in this process, builds
        the nodes without parsing (or validating) them again: about a third of a parse's time,
        for the functions grafted at several calls of one file (123 calls of composer's
        ``Trainer.fit`` in one test file)."""
        try:
            blob = self._pickled.get(key)
            if blob is None:
                blob = self._pickled[key] = pickle.dumps(module, pickle.HIGHEST_PROTOCOL)
            copied = pickle.loads(blob)
        except (pickle.PicklingError, RecursionError, TypeError, AttributeError):
            return None
        return copied if isinstance(copied, cst.Module) else None

    def _graft_target(self, context: ModuleContext, call: cst.Call) -> tuple[str, str] | None:
        """(path, qualified name) of the one function of another module ``call`` runs."""
        index = module_index(context)
        callee = written_callee(call)
        path = os.path.abspath(context.path)
        if callee is None or path not in self.summaries:
            return None
        if call in context.foreign:
            return self._nested_target(context, call, callee, path)
        function = index.enclosing_function(call)
        caller = qualified_name(index, function) if function is not None else ""
        cls = index.enclosing_class(call)
        owner = cls.name.value if cls is not None else None
        constructed = index.shared(constructed_receivers, lambda: constructed_receivers(index))
        receiver = receiver_type(index, constructed, call, function, cls)
        if receiver is None:
            # `loss_scaler = NativeScaler()` ... `loss_scaler(loss, optimizer)`: an object of a
            # project class called runs that class's `__call__` (MAE's and ConvNeXt's scaler
            # wrappers, defined in `util/misc.py`, are called so from `engine.py`).
            receiver = instance_type(constructed, call, function, cls)
            callee = f"{callee}.__call__" if receiver is not None else callee
        record = CallRecord(callee, 0, 0, None, False, caller or "", owner, receiver)
        targets = [t for t in self.call_targets(path, record) if t.path != path]
        if len(targets) != 1:
            return None
        return targets[0].path, targets[0].qualname

    def _nested_target(
        self, context: ModuleContext, call: cst.Call, callee: str, path: str
    ) -> tuple[str, str] | None:
        """The target of a call inside a function grafted from another module, resolved in
        that module (open_clip's `main.py` watches gradients that `train_one_epoch` in
        `training/train.py` scales through its module's `backward()`): a plain function or a
        `self.` method of its class; one level only (a call in a function grafted into a
        grafted one is not followed), and never back into the file being linted."""
        root = context.foreign.root(call)
        origin = context.graft_origins.get(root)
        if origin is None or context.foreign[root].via in context.foreign:
            return None
        module_path, qualname = origin
        owner, _, _method = qualname.rpartition(".")
        summary = self.summary(module_path)
        caller_class = owner if owner and summary and summary.class_named(owner) else None
        record = CallRecord(callee, 0, 0, None, False, qualname, caller_class, None)
        targets = [t for t in self.call_targets(module_path, record) if t.path != path]
        if len(targets) != 1:
            return None
        return targets[0].path, targets[0].qualname


def _reaching_names(qualname: str) -> frozenset[str]:
    """The names a file must spell for a call of it to run the function ``qualname`` of
    another module (`Project.call_targets`): a function's name; the class's for ``__init__``
    (a constructor); a method's name (``x.fit()``, ``self.fit()``, ``Trainer.fit(t)``), as a
    file that names only the class runs none of its other methods, and with the class's for a
    generic name (``forward``, ``step``: an object of no known class runs no project method of
    such a name, `Project._unique_method`)."""
    owner, _, method = qualname.rpartition(".")
    if not owner:
        return frozenset({qualname})
    if method == "__init__":
        return frozenset({owner})
    if method in GENERIC_METHOD_NAMES or method.startswith("__"):
        return frozenset({owner, method})
    return frozenset({method})


#: Trees kept per grafted function: the call sites of one function in one file, past which a
#: file's further sites are parsed and dropped (memory, not speed, sets it).
_GRAFT_COPIES = 8


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


def _calls_by_line(
    module: cst.Module, source: str, nodes: tuple[cst.CSTNode, ...]
) -> dict[tuple[int, str], cst.Call]:
    """(line, callee) -> the first call of that callee starting on that line of ``module`` (the
    parse of ``source``; ``nodes``, its function's code nodes in source order): computed once
    per parsed function, however many of its calls are asked for. The lines are CPython's, as
    the summaries' call lines are (`linter.model.syntax._line_numbers`); generating the positions
    of a
    large caller instead was a third of a cold lint of sd-scripts' SDXL pipeline."""
    calls = [node for node in nodes if isinstance(node, cst.Call)]
    lines = call_lines(source, calls)
    if lines is None:
        positions = positions_of(module)
        line_of = {call: positions[call].start.line for call in calls}
    else:
        line_of = dict(zip(calls, lines, strict=True))
    found: dict[tuple[int, str], cst.Call] = {}
    # In `walk`'s order, which decides between two calls of one callee on one line.
    for node in walk(module):
        if isinstance(node, cst.Call) and node in line_of:
            callee = written_callee(node)
            if callee is not None:
                found.setdefault((line_of[node], callee), node)
    return found
