"""One walk over a parsed module that every rule shares: parents and the nodes rules look at.

libcst's ParentNodeProvider would give the parents too, but through the metadata machinery; a
plain visitor that records them costs one traversal, done once per module for all rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar, cast

import libcst as cst

from linter.model.syntax._parsed_module import ParsedModule
from linter.model.syntax._tree import code_children, descendants, walk

#: How many same-module calls deep an analysis follows a function to its callers (the loop
#: behind a helper, the model behind a parameter): one limit for every rule.
MAX_CALL_DEPTH = 4

__all__ = ["MAX_CALL_DEPTH", "ModuleIndex", "descendants", "module_index", "walk"]

_Node = TypeVar("_Node", bound=cst.CSTNode)
_Value = TypeVar("_Value")

_COLLECTED = (
    cst.Call,
    cst.FunctionDef,
    cst.ClassDef,
    cst.Assign,
    cst.AnnAssign,
    cst.Import,
    cst.ImportFrom,
    cst.With,
    cst.Subscript,
    cst.Return,
    cst.Assert,
    cst.For,
    cst.While,
    cst.AugAssign,
    cst.AsName,
    cst.NamedExpr,
    cst.CompFor,
)


class ModuleIndex:
    """Parents of every node plus, per node type, the nodes of that type in source order."""

    def __init__(self, module: cst.Module, context: ParsedModule | None = None) -> None:
        self.module = module
        #: The module's context (its path and the project around it), when it has one.
        self.context = context
        #: node -> its parent node (the module has none).
        self.parent: dict[cst.CSTNode, cst.CSTNode] = {}
        #: node type -> nodes of that type, in source order.
        self.by_type: dict[type[cst.CSTNode], list[cst.CSTNode]] = {t: [] for t in _COLLECTED}
        #: collected node -> its rank in source (pre-)order.
        self.order: dict[cst.CSTNode, float] = {}
        self._call_sites: dict[str, list[cst.Call]] | None = None
        #: node -> the innermost function around it (see `enclosing_function`).
        self._function_of: dict[cst.CSTNode, cst.FunctionDef | None] = {}
        #: Analyses several rules ask for, built once per module (see `shared`).
        self._shared: dict[object, object] = {}
        self._walk(module)

    def _walk(self, module: cst.Module) -> None:
        # Pre-order by an explicit stack of plain attribute reads (`_tree.code_children`, layout
        # left out), not a libcst visitor, which rebuilds every node it passes.
        parent, by_type, order = self.parent, self.by_type, self.order
        stack: list[cst.CSTNode] = [module]
        while stack:
            node = stack.pop()
            bucket = by_type.get(type(node))
            if bucket is not None:
                order[node] = len(order)
                bucket.append(node)
            below = code_children(node)
            for child in below:
                parent[child] = node
            below.reverse()
            stack.extend(below)

    def attach(self, root: cst.CSTNode, parent: cst.CSTNode) -> list[cst.CSTNode]:
        """Hang a tree parsed elsewhere (a function of another module) under ``parent``: its
        nodes get parents, and source ranks just after ``parent``'s, so ancestors, order and
        branch questions work on it as on the module's own code. Returns its code nodes."""
        self.parent[root] = parent
        # `root` may have hung elsewhere before: answers about its nodes' functions are stale.
        self._function_of.clear()
        base = self.order.get(parent)
        if base is None:
            base = next((self.order[a] for a in self.ancestors(parent) if a in self.order), 0)
        ranked: list[cst.CSTNode] = []
        stack = [root]
        while stack:
            node = stack.pop()
            ranked.append(node)
            below = code_children(node)
            for child in below:
                self.parent[child] = node
            stack.extend(reversed(below))
        for number, node in enumerate(ranked, start=1):
            self.order[node] = base + number / (len(ranked) + 1)
        return ranked

    def nodes(self, kind: type[_Node]) -> list[_Node]:
        """The collected nodes of type ``kind``, in source order (typed as ``kind``)."""
        return cast("list[_Node]", self.by_type[kind])

    def calls_named(self, name: str) -> list[cst.Call]:
        """Calls by the name they use: ``"f"`` for ``f(...)``, ``".m"`` for ``anything.m(...)``
        (the rules that follow calls filter receivers themselves), in source order."""
        if self._call_sites is None:
            sites: dict[str, list[cst.Call]] = {}
            for call in self.nodes(cst.Call):
                callee = call.func
                if isinstance(callee, cst.Name):
                    sites.setdefault(callee.value, []).append(call)
                elif isinstance(callee, cst.Attribute):
                    sites.setdefault("." + callee.attr.value, []).append(call)
            self._call_sites = sites
        return self._call_sites.get(name, [])

    def shared(self, key: object, build: Callable[[], _Value]) -> _Value:
        """The analysis stored under ``key``, built by ``build()`` on first use: rules that ask
        the same question of one module (which names are scalers, where iterations are) share
        one answer."""
        if key not in self._shared:
            self._shared[key] = build()
        return cast("_Value", self._shared[key])

    def has_shared(self, key: object) -> bool:
        """Whether some rule already asked for the analysis stored under ``key``."""
        return key in self._shared

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Parents of ``node``, innermost first, up to the module."""
        parent = self.parent.get(node)
        while parent is not None:
            yield parent
            parent = self.parent.get(parent)

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The innermost function around ``node``. Asked a million times in a cold run of the
        55-repository sample: each answer is kept for every node walked through to find it."""
        known = self._function_of
        passed: list[cst.CSTNode] = []
        found: cst.FunctionDef | None = None
        parent = self.parent.get(node)
        while parent is not None:
            # `type(...) is`: an isinstance that fails goes through ABCMeta (libcst's node
            # classes are ABCs); FunctionDef has no subclass.
            if type(parent) is cst.FunctionDef:
                found = parent
                break
            if parent in known:
                found = known[parent]
                break
            passed.append(parent)
            parent = self.parent.get(parent)
        for ancestor in passed:
            known[ancestor] = found
        return found

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        """The class whose body directly holds the function around ``node``, if any."""
        function = self.enclosing_function(node)
        if function is None:
            return None
        for ancestor in self.ancestors(function):
            if isinstance(ancestor, cst.ClassDef):
                return ancestor
            if isinstance(ancestor, cst.FunctionDef):
                return None
        return None


# Rules run one after another on the same module; keeping the last index lets them share it
# without holding every module of a run in memory. It is the context's, not the tree's: a
# summary and a lint of one file share the parsed tree (`linter._parse`), not the analyses,
# which depend on the project around the module.
_last: list[tuple[ParsedModule, ModuleIndex]] = []


def module_index(context: ParsedModule) -> ModuleIndex:
    """The shared index of ``context.module``, built on first use."""
    if _last and _last[0][0] is context:
        return _last[0][1]
    index = ModuleIndex(context.module, context)
    _last[:] = [(context, index)]
    return index


@contextmanager
def index_aside() -> Iterator[None]:
    """Index another module meanwhile (an outline's full summary, made in the middle of a lint)
    and keep the last index where it was: building a new index of the module being linted would
    drop its grafts and shared analyses."""
    kept = list(_last)
    try:
        yield
    finally:
        _last[:] = kept
