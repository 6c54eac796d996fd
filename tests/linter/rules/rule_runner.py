"""Run one rule on a source string without the engine: parse, build the context, check.

A rule about the other rules' findings (AMP100) cannot run alone: it runs through the engine,
beside every registered rule, and only its own findings are returned.
"""

from __future__ import annotations

import libcst as cst

from linter._engine import lint_text
from linter._rule import FindingsRule, ModuleContext, Rule

#: (line, column, message) of one finding, 1-based like the CLI prints them.
Reported = tuple[int, int, str]


def _check(rule: type[Rule], source: str, path: str) -> tuple[ModuleContext, list]:
    context = ModuleContext(path, source, cst.parse_module(source))
    return context, list(rule().check(context))


def run_rule(rule: type[Rule], source: str, path: str = "snippet.py") -> list[Reported]:
    """Findings as sorted (line, column, message), positions as the engine computes them."""
    if issubclass(rule, FindingsRule):
        from linter.rules import ALL_RULES

        report = lint_text(path, source, [registered() for registered in ALL_RULES])
        assert report.errors == (), report.errors
        return sorted(
            (d.line, d.column, d.message) for d in report.diagnostics if d.code == rule.code
        )
    context, findings = _check(rule, source, path)
    found = []
    for finding in findings:
        start = context.position(finding.node).start
        found.append((start.line, start.column + 1, finding.message))
    return sorted(found)


def run_rule_related(rule: type[Rule], source: str) -> list[tuple[int, list[tuple[int, str]]]]:
    """Per finding: its line and the (line, description) of each related site."""
    context, findings = _check(rule, source, "snippet.py")
    return sorted(
        (
            context.position(finding.node).start.line,
            [(context.position(node).start.line, text) for node, text in finding.related],
        )
        for finding in findings
    )
