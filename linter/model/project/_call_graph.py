"""The project's call graph: who calls a function, what a call runs, which code runs every step.

A call resolves by name through imports, ``self``, a constructed or annotated receiver, or, on an
unknown object, to the one project method of that name; `CallGraph.per_step_reason` follows the
callers of a function across modules as far as the shared depth limit, and `imported_text` tells
the pre-filter what the functions a file imports may bring into its iterations.
"""

from __future__ import annotations

import os
import re

import libcst as cst

from linter.model.project._module_context import (
    FunctionRef,
    ModuleContext,
)
from linter.model.project._project_index import ProjectIndex
from linter.model.project._summary import (
    GENERIC_METHOD_NAMES,
    CallRecord,
    FunctionRecord,
    declared_class,
    qualified_name,
)
from linter.model.syntax import MAX_CALL_DEPTH, module_index

#: An identifier, as a file's text names a function or class.
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


class CallGraph(ProjectIndex):
    """`ProjectIndex` with the calls between the project's functions (built when first asked)."""

    #: Callee name -> every call record of that name, with its module's path.
    _callers: dict[str, list[tuple[str, CallRecord]]] | None = None
    #: Function -> its call sites (`callers`): asked again for each parameter a value comes
    #: through, and each question resolves every call of that name in the project.
    _callers_of: dict[FunctionRef, list[tuple[str, CallRecord]]] | None = None
    #: Method name -> the project's methods of that name.
    _methods: dict[str, list[FunctionRef]] | None = None
    #: path -> the modules its imports connect it to, both ways.
    _components: dict[str, frozenset[str]] | None = None
    #: path -> (the names that reach each imported function with a graft word, and its
    #: source; the modules read): `imported_text` keeps of them what a file's text names,
    #: asked by the pre-filter and again by the lint of the same file.
    _imported: dict[str, tuple[list[tuple[frozenset[str], str]], tuple[str, ...]]] | None = None

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
            if declared_class(record.receiver_type) is not None:
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
        found = self.methods_named(path, name)
        if len(found) == 1:
            self.used.add(found[0].path)
            return found
        return []

    def methods_named(self, path: str, name: str, *, generic: bool = False) -> list[FunctionRef]:
        """Every method named ``name`` among the modules connected to ``path``: the candidates
        of a call of that method on an object whose class nobody states (class-hierarchy
        analysis); none for a generic name (`GENERIC_METHOD_NAMES`, a dunder), which a library
        object answers as often as a project one, unless ``generic``."""
        if not generic and (name in GENERIC_METHOD_NAMES or name.startswith("__")):
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
        # The answer depends on every method of that name: a new one changes it.
        self.used.add(f"methods:{name}")
        reachable = self.component(path)
        return [ref for ref in self._methods.get(name, []) if ref.path in reachable]

    def imported_text(self, path: str, text: str) -> str:
        """The sources of the functions in the project modules ``path`` imports that ``text``
        (the file's source) names: what the pre-filter reads besides the file, since their
        events may enter its iterations. A function enters a caller only through a call that
        names it, a method through a call that names the method, a constructor through its
        class's name (`_reaching_names`): one the file never names brings nothing (a helper
        module's other functions made 931 of 1,575 files of a 55-repository tree pass the
        pre-filter and be parsed for nothing, and a class's methods, brought whenever the class
        was named, 251 of 1,196 more)."""
        if self._imported is None:
            self._imported = {}
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
        if self._callers_of is None:
            self._callers_of = {}
        sites = self._callers_of.get(target)
        if sites is None:
            candidates = self._callers.get(name, [])
            if name == "__init__":
                owner = target.qualname.partition(".")[0]
                candidates = candidates + self._callers.get(owner, [])
            used = set(self.used)
            sites = self._callers_of[target] = [
                (path, record)
                for path, record in candidates
                if target in self.call_targets(path, record)
            ]
            self.used = used
        self.used |= {path for path, _ in sites}
        return sites

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
