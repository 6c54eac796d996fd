"""One parsed file inside its project: what every analysis of the module being linted holds.

A `ModuleContext` carries the module's path, source and libcst tree, its metadata (resolved
lazily, once per provider), the functions of other modules grafted under its calls, and the
project around it. The project is seen here only through `ProjectQueries`, the questions an
analysis may ask of it, so that this room sits below `linter.model.project._project` (which
answers them) and no import runs upwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

import libcst as cst
from libcst.metadata import BaseMetadataProvider, CodeRange, MetadataWrapper, PositionProvider

from linter._positions import StatementPositions
from linter.model.project._value_records import VALUE_KINDS, ValueRecord
from linter.model.syntax import ModuleIndex, descendants, line_numbers_cached, module_index

__all__ = [
    "ForeignNodes",
    "ForeignSite",
    "ModuleContext",
    "ProjectQueries",
    "context_of",
    "positions_of",
]


@dataclass(frozen=True, slots=True)
class ForeignSite:
    """Where a grafted node really is: a function of another file, hung under a local call."""

    #: The local node the function is grafted under (positions inside map to it): the call
    #: that runs it, or — for a caller of a local function — the parameter it passes.
    via: cst.CSTNode
    #: The function's file, relative to the project root when under it.
    path: str
    #: The called function's qualified name.
    qualname: str
    #: Line of the function's ``def`` in its file (the graft's line 1).
    first_line: int
    #: The small module parsed from the summary's source (for positions inside it).
    module: cst.Module
    #: (path, line, column of the ``def``) of the other functions the call may run, which do
    #: the same (a call on an object of unknown class: `linter.model.project._candidates`).
    alike: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class FunctionRef:
    """A function or method of the project."""

    #: Absolute path of its module's file.
    path: str
    #: ``train_one_epoch`` or ``Trainer.train_step``.
    qualname: str


#: What `ProjectQueries.resolve` finds besides a function: ``("class", path, name)``,
#: ``("module", path)``, ``("function", path, qualname)``, ``("constant", path, name, text)``,
#: or ``()`` for nothing.
Found = tuple[str, ...]


class ProjectQueries(Protocol):
    """The questions an analysis of one module may ask of the project around it
    (`linter.model.project._project.Project` answers them; see its docstring for how)."""

    def display(self, path: str) -> str: ...

    def locate(self, shown: str) -> str: ...

    def resolve(self, path: str, dotted: str, depth: int = 0) -> FunctionRef | Found | None: ...

    def library_name(self, path: str, qualified: str) -> str | None: ...

    def constant(self, context: ModuleContext, dotted: str) -> cst.BaseExpression | None: ...

    def bases(self, path: str, name: str) -> list[tuple[str, str]]: ...

    def values_of(
        self, path: str, kinds: frozenset[str] = VALUE_KINDS
    ) -> tuple[ValueRecord, ...]: ...

    def per_step_reason(self, context: ModuleContext, function: cst.FunctionDef) -> str | None: ...

    def calls_from_other_modules(
        self, context: ModuleContext, function: cst.FunctionDef, via: cst.CSTNode
    ) -> list[cst.Call]: ...

    def graft(
        self, context: ModuleContext, call: cst.Call, words: tuple[str, ...] = ()
    ) -> cst.FunctionDef | None: ...

    def passed_class(
        self, context: ModuleContext, function: cst.FunctionDef, name: str
    ) -> tuple[str, str] | None: ...

    def method_source(self, path: str, cls: str, name: str) -> str | None: ...


class ForeignNodes(Mapping[cst.CSTNode, ForeignSite]):
    """Node of a grafted function -> the site it stands for. Each function's nodes are
    registered once; attaching it again (a caller asked about under each of its arguments: 2,364
    attaches of 182 callers for one sd-scripts pipeline) only moves it to the new site."""

    def __init__(self) -> None:
        self._root_of: dict[cst.CSTNode, cst.CSTNode] = {}
        self._sites: dict[cst.CSTNode, ForeignSite] = {}

    def attach(
        self, root: cst.CSTNode, site: ForeignSite, nodes: Iterable[cst.CSTNode] | None
    ) -> None:
        if self._root_of.get(root) is not root:
            self._root_of.update(
                dict.fromkeys(nodes if nodes is not None else (root, *descendants(root)), root)
            )
        self._sites[root] = site

    def __getitem__(self, node: cst.CSTNode) -> ForeignSite:
        return self._sites[self._root_of[node]]

    def root(self, node: cst.CSTNode) -> cst.CSTNode:
        """The grafted function ``node`` belongs to."""
        return self._root_of[node]

    def __contains__(self, node: object) -> bool:
        return node in self._root_of

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return iter(self._root_of)

    def __len__(self) -> int:
        return len(self._root_of)


class ModuleContext:
    """One parsed file, with libcst metadata resolved lazily and at most once per provider."""

    def __init__(
        self, path: str, source: str, module: cst.Module, project: ProjectQueries | None = None
    ) -> None:
        self.path = path
        self.source = source
        self.module = module
        #: The project around this module (summaries of its other modules), or None when the
        #: module is linted alone.
        self.project = project
        #: Local call -> the function of another module grafted under it (see ``Project.graft``).
        self.grafts: dict[cst.Call, cst.FunctionDef | None] = {}
        #: Local call -> the functions of other modules it may run, (path, qualified name), and
        #: whether they are a receiver's candidates (`Project._graft_targets`): the project's
        #: answer, whatever words a later graft asks for.
        self.graft_targets: dict[cst.Call, tuple[tuple[tuple[str, str], ...], bool]] = {}
        #: (local call, words) whose targets were left undecided, as no candidate has any of
        #: the words (`Project._graft_targets`): asked again with those words, nothing to graft.
        self.graft_undecided: set[tuple[cst.Call, tuple[str, ...]]] = set()
        #: (path, qualified name) -> how many trees of that function are grafted here.
        self.graft_copies: dict[tuple[str, str], int] = {}
        #: Grafted function -> (path, qualified name) of the function it is: a call in it is
        #: resolved in that module (`Project.graft`, a second call deep).
        self.graft_origins: dict[cst.CSTNode, tuple[str, str]] = {}
        #: Node of a grafted function -> where it really is.
        self.foreign = ForeignNodes()
        #: The source of the functions of the project modules this one imports, whose events
        #: and values may enter its analyses (see `filter_text`).
        self.imported_text = ""
        self._wrapper: MetadataWrapper | None = None
        self._resolved: dict[type[BaseMetadataProvider[Any]], Mapping[cst.CSTNode, Any]] = {}
        self._lines: Mapping[cst.CSTNode, tuple[int, int]] | None = None
        self._statements: StatementPositions | None = None

    @property
    def filter_text(self) -> str:
        """What a rule's cheap text test reads: the module's source and `imported_text`."""
        if not self.imported_text:
            return self.source
        return f"{self.source}\n{self.imported_text}"

    def attach(
        self,
        root: cst.CSTNode,
        via: cst.CSTNode,
        site: ForeignSite,
        nodes: Iterable[cst.CSTNode] | None = None,
    ) -> None:
        """Record that ``root`` (a grafted function) and its nodes stand for ``site``: its code
        nodes (``nodes``, when the caller has walked them already), as every question asked of
        a grafted node is asked of one (layout nodes are a module's own: comments, commas)."""
        self.foreign.attach(root, site, nodes)

    @property
    def wrapper(self) -> MetadataWrapper:
        # unsafe_skip_copy keeps node identity, so nodes a rule holds stay valid keys.
        if self._wrapper is None:
            self._wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        return self._wrapper

    def resolve(self, provider: type[BaseMetadataProvider[Any]]) -> Mapping[cst.CSTNode, Any]:
        """Metadata of one provider for every node; computed on first use, then cached."""
        if provider not in self._resolved:
            if provider is PositionProvider:
                self._resolved[provider] = positions_of(self.module)
            else:
                self._resolved[provider] = self.wrapper.resolve(provider)
        return self._resolved[provider]

    def position(self, node: cst.CSTNode) -> CodeRange:
        """Source range of ``node`` (1-based lines, 0-based columns, as libcst gives them); a
        node grafted from another module is placed at the call it was grafted under. Taken
        from the code of the node's statement alone while that can say (`linter._positions`),
        else from the whole module's metadata."""
        target = node
        while (site := self.foreign.get(target)) is not None:
            target = site.via  # a function grafted into a grafted one: its outer call
        if PositionProvider not in self._resolved:
            if self._statements is None:
                self._statements = StatementPositions(
                    self.module, self.source, module_index(self).parent
                )
            found = self._statements.get(target)
            if found is not None:
                return found
        positions: Mapping[cst.CSTNode, CodeRange] = self.resolve(PositionProvider)
        return positions[target]

    def line_and_column(self, node: cst.CSTNode) -> tuple[int, int]:
        """1-based line and column of a call, loop or function (its ``def``) without position
        metadata when CPython's parser can say (see `linter.model.syntax._line_numbers`)."""
        if self._lines is None:
            self._lines = line_numbers_cached(self.source, module_index(self)) or {}
        found = self._lines.get(node) if node not in self.foreign else None
        if found is not None:
            return found
        where = self.position(node.name if isinstance(node, cst.FunctionDef) else node).start
        return where.line, where.column + 1

    def foreign_alike(self, node: cst.CSTNode) -> tuple[tuple[str, int, int], ...]:
        """(path, line, column) of the other functions that do what the grafted one holding ``node``
        does (`ForeignSite.alike`); none for a node of this file."""
        site = self.foreign.get(node)
        return site.alike if site is not None else ()

    def foreign_position(self, node: cst.CSTNode) -> tuple[str, int, int] | None:
        """(path, 1-based line, 1-based column) of a grafted node in its own file, else None."""
        site = self.foreign.get(node)
        if site is None:
            return None
        where = positions_of(site.module)
        start = where[node].start if node in where else where[site.module].start
        return site.path, site.first_line + start.line - 1, start.column + 1


def positions_of(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """``PositionProvider``'s ranges for every node of ``module``, from its code generation alone.

    ``MetadataWrapper.resolve(PositionProvider)`` also runs a full visitor pass over the module
    for the batch of batchable providers, even when that batch is empty (libcst 1.x's
    ``_resolve_impl``): about half the cost, for nothing. The provider's own generation is the
    codegen pass that records the positions; it is run here on its own.
    """
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    # PositionProvider computes plain CodeRanges (no lazy values) in its code generation.
    return cast("Mapping[cst.CSTNode, CodeRange]", PositionProvider()._gen(wrapper))


def context_of(index: ModuleIndex) -> ModuleContext | None:
    """The `ModuleContext` of the module ``index`` indexes, when it has one (an index of a
    bare tree, as tests make, has none): what an analysis holding only the index asks the
    project through."""
    context = index.context
    return context if isinstance(context, ModuleContext) else None
