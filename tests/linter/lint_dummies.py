"""Test-only rules, so the engine, config and CLI are tested independently of AMP001/AMP002.

A module of its own (not a conftest) so that worker processes can unpickle the rule classes.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable

import libcst as cst
import libcst.matchers as m

from linter import Example, Finding, ModuleContext, Rule, RuleOption


class PrintCall(Rule):
    """Flags every ``print(...)`` call, pointing back at its first argument.

    ## What it does
    Reports ``print`` calls.
    """

    code = "TST001"
    name = "print-call"
    summary = "a call of print"
    triggers = ("print",)
    valid = (Example("x = 1\n"),)
    invalid = (Example("print(1)\n", lines=(1,)),)

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        for call in m.findall(context.module, m.Call(func=m.Name("print"))):
            assert isinstance(call, cst.Call)
            related = ((call.args[0].value, "first argument"),) if call.args else ()
            yield Finding(call, "print called", related)


class Exploding(Rule):
    """Raises on every file that mentions ``boom``, as a buggy rule would."""

    code = "TST002"
    name = "exploding"
    summary = "a rule with a bug"
    triggers = ("boom",)
    valid = ()
    invalid = ()

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        raise RuntimeError("the rule has a bug")


class Configurable(Rule):
    """Flags names listed in its ``names`` option (never on by default: the list is empty)."""

    code = "TST003"
    name = "configurable"
    summary = "names listed in the options"
    triggers = ("",)
    valid = ()
    invalid = ()
    options = (
        RuleOption("names", list, [], "names to flag"),
        RuleOption("limit", int, 3, "most findings per file"),
        RuleOption("strict", bool, False, "unused"),
        RuleOption("ratio", float, 0.5, "unused"),
    )

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        wanted = set(self.settings["names"])
        found = [n for n in m.findall(context.module, m.Name()) if n.value in wanted]
        for node in found[: self.settings["limit"]]:
            yield Finding(node, f"name {node.value} is listed")


class EveryName(Rule):
    """Flags every name and string in every file: a worst case for positions (property tests).

    Not comments: libcst 1.9's native parser drops blank lines before an indented comment at the
    very end of a file (``parse_module("A\\n\\n #").code == "A\\n #"``), so positions of
    nodes in that footer are off by the dropped lines; code nodes, all a rule reports, are not.
    """

    code = "TST004"
    name = "every-name"
    summary = "every name"
    triggers = ("",)
    valid = ()
    invalid = ()

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        body = context.module.body
        related = ((body[0], "first statement"),) if body else ()
        for node in m.findall(context.module, m.Name() | m.SimpleString()):
            yield Finding(node, "here", related)


#: The registry the CLI tests install in place of ``linter.rules.ALL_RULES``.
class CollectionPace(Rule):
    """Reports, once per file, the process's youngest-generation collection threshold and
    whether objects are frozen: what a lint worker runs under (see _garbage_collection)."""

    code = "TST004"
    name = "collection-pace"
    summary = "the collector's settings where the file is linted"
    triggers = ("",)
    valid = ()
    invalid = ()

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        frozen = gc.get_freeze_count() > 0
        yield Finding(context.module, f"threshold {gc.get_threshold()[0]} frozen {frozen}")


DUMMY_RULES: tuple[type[Rule], ...] = (PrintCall, Exploding, Configurable)
