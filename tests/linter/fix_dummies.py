"""Test-only rules with fixes, so the fix machinery is tested apart from AMP001's one fix.

A module of its own (not a conftest) so that worker processes can unpickle the rule classes.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
import libcst.matchers as m

from linter import Finding, ModuleContext, NodeFix, Rule


class _NameRule(Rule):
    """Flags every Name spelled `target`; subclasses say how to fix it."""

    target = ""
    triggers = ("",)
    valid = ()
    invalid = ()

    def fix(self, node: cst.Name) -> NodeFix | None:
        return None

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        for node in m.findall(context.module, m.Name(self.target)):
            assert isinstance(node, cst.Name)
            yield Finding(node, f"{self.target} found", fix=self.fix(node))


class PrintToLog(Rule):
    """Flags `print(...)`; the safe fix renames the callee to `log`."""

    code = "TST101"
    name = "print-to-log"
    summary = "print instead of log"
    triggers = ("print",)
    valid = ()
    invalid = ()

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        for call in m.findall(context.module, m.Call(func=m.Name("print"))):
            assert isinstance(call, cst.Call)
            fix = NodeFix("rename to log", ((call.func, cst.Name("log")),))
            yield Finding(call, "print called", fix=fix)


class WholeCall(Rule):
    """Flags `show(...)`; the fix replaces the whole call, so nested calls' fixes overlap."""

    code = "TST102"
    name = "whole-call"
    summary = "show instead of log"
    triggers = ("show",)
    valid = ()
    invalid = ()

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        for call in m.findall(context.module, m.Call(func=m.Name("show"))):
            assert isinstance(call, cst.Call)
            new = call.with_changes(func=cst.Name("log"))
            yield Finding(call, "show called", fix=NodeFix("use log", ((call, new),)))


class Shout(_NameRule):
    """An unsafe fix: `shout` -> `SHOUT`."""

    code = "TST103"
    name = "shout"
    summary = "shout"
    target = "shout"

    def fix(self, node: cst.Name) -> NodeFix:
        return NodeFix("upper-case it", ((node, cst.Name("SHOUT")),), "unsafe")


class BrokenFix(_NameRule):
    """A fix whose result does not parse."""

    code = "TST104"
    name = "broken-fix"
    summary = "broken fix"
    target = "breakme"

    def fix(self, node: cst.Name) -> NodeFix:
        return NodeFix("break it", ((node, cst.Name("if")),))


class StubbornFix(_NameRule):
    """A fix that leaves its finding in place."""

    code = "TST105"
    name = "stubborn-fix"
    summary = "stubborn fix"
    target = "stubborn"

    def fix(self, node: cst.Name) -> NodeFix:
        return NodeFix("no-op", ((node, cst.Name("stubborn")),))


class Growing(_NameRule):
    """A fix that makes a new finding every time: fixing must stop after 10 rounds."""

    code = "TST106"
    name = "growing"
    summary = "growing"
    target = "grow"

    def fix(self, node: cst.Name) -> NodeFix:
        wrapped = cst.Tuple([cst.Element(cst.Integer("0")), cst.Element(cst.Name("grow"))])
        return NodeFix("wrap it", ((node, wrapped),))


#: The registry the fix tests install in place of ``linter.rules.ALL_RULES``.
FIX_RULES: tuple[type[Rule], ...] = (PrintToLog, WholeCall, Shout, BrokenFix, StubbornFix, Growing)
