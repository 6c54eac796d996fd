"""Names and what binds them: one scope pass per module, shared by every rule that asks.

libcst's ``ScopeProvider`` answers the same questions through the metadata machinery, at a cost
that dominated lint time when one rule resolved it for every file (the project-model issue
measured about 90 CPU-seconds of a 3.9 M-line corpus). This pass answers only what the rules ask
— which bindings a name may refer to, and which names refer to a binding — with Python's own
rules: function scopes see their enclosing functions and the module, class bodies are not
enclosing scopes for the methods in them, comprehensions have their own scope, ``global`` and
``nonlocal`` move a name to the scope they name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from linter.model.syntax._dotted_names import dotted_name
from linter.model.syntax._module_index import ModuleIndex
from linter.model.syntax._tree import code_children


@dataclass(eq=False)
class Scope:
    """One scope: the module, a function, a class body, a lambda or a comprehension."""

    #: The node that opens it.
    node: cst.CSTNode
    #: The scope around it (None for the module).
    parent: Scope | None
    #: name -> the statements (or nodes) that bind it here, in source order.
    bindings: dict[str, list[cst.CSTNode]] = field(default_factory=dict)
    #: Names declared ``global`` / ``nonlocal`` here.
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)

    @property
    def is_class(self) -> bool:
        return isinstance(self.node, cst.ClassDef)


class Bindings:
    """Which bindings every name reference of a module may mean (see the module docstring)."""

    def __init__(self, index: ModuleIndex) -> None:
        self._index = index
        self.module_scope = Scope(index.module, None)
        #: scope-opening node -> its scope.
        self.scopes: dict[cst.CSTNode, Scope] = {index.module: self.module_scope}
        #: Name node of a reference -> the scope it is read in.
        self._reads: dict[cst.Name, Scope] = {}
        self._walk(index.module, self.module_scope)

    # -- questions ------------------------------------------------------------------------

    def visible(self, name: cst.Name) -> list[cst.CSTNode]:
        """The binding nodes a read of ``name`` may refer to (empty: a builtin or unknown)."""
        scope = self._reads.get(name)
        if scope is None:
            return []
        found = self._resolving_scope(scope, name.value)
        return list(found.bindings.get(name.value, ())) if found is not None else []

    def references(self, binding: cst.CSTNode, name: str) -> list[cst.Name]:
        """The reads of ``name`` that may refer to the binding made by ``binding``."""
        return [
            read
            for read, scope in self._reads.items()
            if read.value == name
            and (found := self._resolving_scope(scope, name)) is not None
            and binding in found.bindings.get(name, ())
        ]

    def binding_count(self, binding: cst.CSTNode, name: str) -> int:
        """How many statements bind ``name`` in the scope where ``binding`` binds it."""
        for scope in self.scopes.values():
            nodes = scope.bindings.get(name, [])
            if binding in nodes:
                return len(nodes)
        return 0

    # -- the pass -------------------------------------------------------------------------

    def _resolving_scope(self, scope: Scope, name: str) -> Scope | None:
        current: Scope | None = scope
        first = True
        while current is not None:
            if name in current.globals:
                return self.module_scope
            visible_here = first or not current.is_class
            if visible_here and name in current.bindings and name not in current.nonlocals:
                return current
            first = False
            current = current.parent
        return None

    def _bind(self, scope: Scope, name: str, node: cst.CSTNode) -> None:
        target = scope
        if name in scope.globals:
            target = self.module_scope
        elif name in scope.nonlocals:
            parent = scope.parent
            while parent is not None and (parent.is_class or name not in parent.bindings):
                parent = parent.parent
            target = parent or self.module_scope
        target.bindings.setdefault(name, []).append(node)

    def _walk(self, root: cst.CSTNode, scope: Scope) -> None:
        # Iterative, in source order: (node, scope) pairs; a new scope starts at its node.
        stack: list[tuple[cst.CSTNode, Scope]] = [
            (child, scope) for child in reversed(code_children(root))
        ]
        while stack:
            node, current = stack.pop()
            kind = type(node)
            if kind not in _SPECIAL:
                # Most nodes neither open a scope, bind nor are a name: by the exact type
                # (libcst's node classes are final), not a chain of isinstance checks.
                stack.extend((child, current) for child in reversed(_read_children(node)))
                continue
            inner = current
            if isinstance(node, cst.FunctionDef | cst.ClassDef):
                self._bind(current, node.name.value, node)
                for decorator in node.decorators:
                    stack.append((decorator, current))
                inner = Scope(node, current)
                self.scopes[node] = inner
                if isinstance(node, cst.FunctionDef):
                    for param in _params(node.params):
                        self._bind(inner, param.name.value, param)
                        if param.default is not None:
                            stack.append((param.default, current))
                        if param.annotation is not None:
                            stack.append((param.annotation, current))
                else:
                    for base in node.bases:
                        stack.append((base, current))
                stack.append((node.body, inner))
                continue
            if isinstance(node, cst.Lambda):
                inner = Scope(node, current)
                self.scopes[node] = inner
                for param in _params(node.params):
                    self._bind(inner, param.name.value, param)
                stack.append((node.body, inner))
                continue
            if isinstance(node, cst.ListComp | cst.SetComp | cst.GeneratorExp | cst.DictComp):
                inner = Scope(node, current)
                self.scopes[node] = inner
                stack.extend((child, inner) for child in reversed(code_children(node)))
                continue
            if isinstance(node, cst.Global):
                current.globals.update(item.name.value for item in node.names)
                continue
            if isinstance(node, cst.Nonlocal):
                current.nonlocals.update(item.name.value for item in node.names)
                continue
            for name in _bound_by(node):
                self._bind(current, name, node)
            if isinstance(node, cst.Name):
                self._reads[node] = current
                continue
            stack.extend((child, current) for child in reversed(_read_children(node)))


#: Node types `_bound_by` binds names for.
_BINDERS = (
    cst.Import, cst.ImportFrom, cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor,
    cst.WithItem, cst.NamedExpr, cst.ExceptHandler,
)  # fmt: skip
#: Node types some of whose children are not read (`_read_children`).
_READ_SPECIAL = frozenset(
    {
        cst.Import, cst.ImportFrom, cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For,
        cst.CompFor, cst.AsName, cst.NamedExpr, cst.ExceptHandler,
    }
)  # fmt: skip
#: Node types the walk does more with than reading their children.
_SPECIAL = frozenset(
    {
        cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.GeneratorExp,
        cst.DictComp, cst.Global, cst.Nonlocal, cst.Name, *_BINDERS,
    }
)  # fmt: skip


def _params(params: cst.Parameters) -> Iterator[cst.Param]:
    yield from params.posonly_params
    yield from params.params
    yield from params.kwonly_params
    if isinstance(params.star_arg, cst.Param):
        yield params.star_arg
    if params.star_kwarg is not None:
        yield params.star_kwarg


def _target_names(target: cst.CSTNode) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, cst.Tuple | cst.List):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)


def _bound_by(node: cst.CSTNode) -> Iterator[str]:
    """The names a node binds in its scope."""
    if isinstance(node, cst.Import):
        for alias in node.names:
            if alias.asname is not None:
                yield from _target_names(alias.asname.name)
            else:
                yield (dotted_name(alias.name) or "").partition(".")[0]
    elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
        for alias in node.names:
            name = alias.asname.name if alias.asname is not None else alias.name
            yield from _target_names(name) if isinstance(name, cst.Name) else ()
    elif isinstance(node, cst.Assign):
        for target in node.targets:
            yield from _target_names(target.target)
    elif isinstance(node, cst.AnnAssign | cst.AugAssign | cst.For | cst.CompFor):
        yield from _target_names(node.target)
    elif isinstance(node, cst.WithItem) and node.asname is not None:
        yield from _target_names(node.asname.name)
    elif isinstance(node, cst.NamedExpr):
        yield from _target_names(node.target)
    elif isinstance(node, cst.ExceptHandler) and node.name is not None:
        yield from _target_names(node.name.name)


def _read_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The children of ``node`` that may hold name reads (not attribute names, keyword names,
    import paths or the targets a binding writes)."""
    kind = type(node)
    if kind is cst.Attribute or kind is cst.Arg:
        return [node.value]  # type: ignore[attr-defined]  # both have a value
    if kind not in _READ_SPECIAL:
        return code_children(node)
    if isinstance(node, cst.Import | cst.ImportFrom):
        return []
    if isinstance(node, cst.AssignTarget):
        return _target_reads(node.target)
    if isinstance(node, cst.AnnAssign):
        return [*_target_reads(node.target), node.annotation, *([node.value] if node.value else [])]
    if isinstance(node, cst.AugAssign):
        return [node.target, node.value]
    if isinstance(node, cst.For | cst.CompFor):
        rest = [c for c in code_children(node) if c is not node.target]
        return [*_target_reads(node.target), *rest]
    if isinstance(node, cst.AsName):
        return _target_reads(node.name)
    if isinstance(node, cst.NamedExpr):
        return [node.value]
    if isinstance(node, cst.ExceptHandler):
        return [c for c in code_children(node) if c is not node.name]
    return code_children(node)


def _target_reads(target: cst.CSTNode) -> list[cst.CSTNode]:
    """What a binding target reads: ``a`` of ``a.b = 1`` and ``a[i] = 1``, nothing of ``a = 1``."""
    if isinstance(target, cst.Name):
        return []
    if isinstance(target, cst.Tuple | cst.List):
        return [r for element in target.elements for r in _target_reads(element.value)]
    if isinstance(target, cst.StarredElement):
        return _target_reads(target.value)
    return [target]


def bindings(index: ModuleIndex) -> Bindings:
    """The module's `Bindings`, built once and shared by every rule that asks."""
    return index.shared(Bindings, lambda: Bindings(index))
