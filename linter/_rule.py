"""The contract between the engine and the rules.

A rule sees one parsed module through a `ModuleContext` and yields `Finding`s that point at CST
nodes. The engine turns nodes into line/column positions only when there is something to report,
so files without findings never pay for position metadata.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import libcst as cst

from linter._fix import SAFE, UNSAFE, NodeFix
from linter.model.project import ModuleContext, positions_of

__all__ = [
    "FIX_AVAILABILITIES",
    "NO_FIX",
    "Example",
    "Finding",
    "Findings",
    "FindingsRule",
    "ModuleContext",
    "Rule",
    "RuleOption",
    "positions_of",
]

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

    @classmethod
    def wants_with(cls, own: str, imported: str) -> bool:
        """Whether a file whose own text is ``own`` may hold a finding once the functions it
        imports (their source, ``imported``: see `ModuleContext.imported_text`) are read with
        it. By default the two texts are one: an imported function's events may enter the
        file's iterations. A rule whose sites, or part of whose evidence, are always the
        module's own nodes says so here, and a file that merely imports words is not parsed
        for it (on the seven library wheels, 726 of the 914 files parsed were parsed for the
        words of the functions they import alone)."""
        return cls.wants(f"{own}\n{imported}")

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
