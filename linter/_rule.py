"""The contract between the engine and the rules.

A rule sees one parsed module through a `ModuleContext` and yields `Finding`s that point at CST
nodes. The engine turns nodes into line/column positions only when there is something to report,
so files without findings never pay for position metadata.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, cast

import libcst as cst
from libcst.metadata import BaseMetadataProvider, CodeRange, MetadataWrapper, PositionProvider

from linter._fix import SAFE, UNSAFE, NodeFix
from linter._positions import StatementPositions
from linter.model.syntax._tree import descendants

if TYPE_CHECKING:
    from linter.model.project._project import ForeignSite, Project

#: The rule offers no fix.
NO_FIX = "none"
#: What a rule's `Rule.fix_availability` may say: the most its findings' fixes can be.
FIX_AVAILABILITIES = (SAFE, UNSAFE, NO_FIX)


@dataclass(frozen=True, slots=True)
class Example:
    """A small, complete module used both as a test case and on the rule's docs page."""

    #: Source code of the snippet.
    code: str
    #: 1-based lines where the rule must report; empty for a valid example.
    lines: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class RuleOption:
    """A setting users can change in ``[tool.amp-lint.<rule-name>]``."""

    #: kebab-case key in pyproject.toml.
    name: str
    #: The Python type the value must have (``list`` means a list of strings).
    type: type
    #: Value used when the user sets nothing.
    default: Any
    #: One sentence for the docs.
    doc: str


@dataclass(frozen=True, slots=True)
class Finding:
    """What a rule reports: the node to point at, and why."""

    #: Node whose start position becomes the diagnostic's line/column.
    node: cst.CSTNode
    #: One-line message.
    message: str
    #: Second sites, as (node, short description) pairs.
    related: tuple[tuple[cst.CSTNode, str], ...] = field(default=())
    #: How to fix it, when the rule knows: node replacements, safe or unsafe.
    fix: NodeFix | None = None


class ForeignNodes(Mapping[cst.CSTNode, "ForeignSite"]):
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
        self, path: str, source: str, module: cst.Module, project: Project | None = None
    ) -> None:
        self.path = path
        self.source = source
        self.module = module
        #: The project around this module (summaries of its other modules), or None when the
        #: module is linted alone.
        self.project = project
        #: Local call -> the function of another module grafted under it (see ``Project.graft``).
        self.grafts: dict[cst.Call, cst.FunctionDef | None] = {}
        #: Local call -> (path, qualified name) of the one function of another module it runs,
        #: or None: the project's answer, whatever words a later graft asks for.
        self.graft_targets: dict[cst.Call, tuple[str, str] | None] = {}
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
                from linter.model.syntax._module_index import module_index

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
            from linter.model.syntax._line_numbers import line_numbers_cached
            from linter.model.syntax._module_index import module_index

            self._lines = line_numbers_cached(self.source, module_index(self)) or {}
        found = self._lines.get(node) if node not in self.foreign else None
        if found is not None:
            return found
        where = self.position(node.name if isinstance(node, cst.FunctionDef) else node).start
        return where.line, where.column + 1

    def foreign_position(self, node: cst.CSTNode) -> tuple[str, int, int] | None:
        """(path, 1-based line, 1-based column) of a grafted node in its own file, else None."""
        site = self.foreign.get(node)
        if site is None:
            return None
        where = positions_of(site.module)
        start = where[node].start if node in where else where[site.module].start
        return site.path, site.first_line + start.line - 1, start.column + 1


@dataclass(frozen=True, slots=True)
class Findings:
    """What the other rules found in one module, suppressed findings included: the input of a
    `FindingsRule` (a rule about the suppressions themselves)."""

    #: (1-based line, code) of every finding, before noqa comments were applied.
    reported: frozenset[tuple[int, str]]
    #: Codes of the rules that ran on the module to the end (a rule that failed is not here:
    #: what it would have found is unknown).
    ran: frozenset[str]


class Rule(abc.ABC):
    """Base class of every rule. The class docstring is the rule's documentation page.

    The docstring has ruff's sections, each a Markdown heading: ``## What it does``,
    ``## Why is this bad?``, ``## Example``, ``## Use instead`` (and optionally ``## Options``,
    ``## Fix safety`` and ``## References``, a list of links to the public evidence).
    """

    #: Stable code, e.g. ``AMP001``.
    code: ClassVar[str]
    #: kebab-case name, e.g. ``get-scale-every-step``.
    name: ClassVar[str]
    #: One line for ``--list-rules``.
    summary: ClassVar[str]
    #: Plain substrings; a file that contains none of them is not parsed for this rule (the
    #: engine's pre-filter, its main speed-up; see `wants`). ``("",)`` runs the rule on every
    #: file.
    triggers: ClassVar[tuple[str, ...]]
    #: Snippets the rule must not flag.
    valid: ClassVar[tuple[Example, ...]]
    #: Snippets the rule must flag, at the lines each one lists.
    invalid: ClassVar[tuple[Example, ...]]
    #: Settings read from ``[tool.amp-lint.<name>]``.
    options: ClassVar[tuple[RuleOption, ...]] = ()
    #: Whether findings come with a fix, as the rules index and the rule's page show it:
    #: ``"safe"`` (``--fix`` applies it), ``"unsafe"`` (only with ``--unsafe-fixes``) or
    #: ``"none"``. One of `FIX_AVAILABILITIES`; a rule whose fixes are safe except in rare cases
    #: says ``"safe"``. An invalid example must show the fix (the docs render it before/after).
    fix_availability: ClassVar[str] = NO_FIX
    #: Whether a run with no ``select`` runs the rule. A rule that is off by default (it fires
    #: on most code of some shape, rightly but noisily) runs only when a selector picks it:
    #: ``ALL``, a prefix, its code or name, in ``select`` or ``extend-select`` (see
    #: `linter._selection`).
    default_enabled: ClassVar[bool] = True

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        values = {option.name: option.default for option in self.options}
        values.update(settings or {})
        self.settings: Mapping[str, Any] = values

    @classmethod
    def wants(cls, text: str) -> bool:
        """Whether a file with this text may hold a finding; the engine parses only those.

        Parsing is the dominant cost, so a rule whose findings need several words together
        refines this cheap test. By default: the text contains one of `triggers`.
        """
        return any(word in text for word in cls.triggers)

    @abc.abstractmethod
    def check(self, context: ModuleContext) -> Iterable[Finding]:
        """Yield the findings in one module."""


class FindingsRule(Rule):
    """A rule whose question is about the other rules' findings (is this ``# noqa`` still
    needed?). The engine runs it after every other rule, with their findings (`Findings`), and
    applies ``# noqa`` to its own findings too."""

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        """Nothing without the other rules' findings; see `check_findings`."""
        return ()

    @abc.abstractmethod
    def check_findings(self, context: ModuleContext, findings: Findings) -> Iterable[Finding]:
        """Yield the findings in one module, given what the other rules found in it."""


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
