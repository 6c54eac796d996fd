"""AMP100 unused-noqa."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar

from linter._fix import SAFE, NodeFix
from linter._noqa import OUR_PREFIX, comment_without_codes
from linter._rule import Example, Finding, Findings, FindingsRule, ModuleContext
from linter.model.syntax import NoqaSite, file_noqa_sites, noqa_sites

#: Why a code is unused, for one code and for several: on a line of code, on a comment's own
#: line, in a file directive.
_WHY_UNUSED = {
    "line": ("has no finding here", "have no finding here"),
    "own line": ("is on a line without code", "are on a line without code"),
    "file": ("has no finding in this file", "have no finding in this file"),
}

#: A noqa comment that names one of our codes: only files with one need parsing for AMP100
#: ("amp" alone is in every "example").
_OUR_NOQA = re.compile(rf"noqa\s*:[^\n#]*\b{OUR_PREFIX}[0-9]", re.IGNORECASE)


class UnusedNoqa(FindingsRule):
    """A `# noqa` code of amp-lint's that suppresses nothing.

    ## What it does
    Flags an amp-lint code (`AMPxxx`) in a `# noqa` comment when no finding of that code
    starts on the comment's line — the bug was fixed, the code moved, or the code was mistyped —
    and a code that names no amp-lint rule at all. Ruff's RUF100 for amp-lint's codes.

    Only codes of rules that ran on the file to the end are judged: a code whose rule is not
    selected, is switched off for the file (`per-file-ignores`), or failed on it, is left alone.
    A bare `# noqa`, other tools' codes (`F841`, `E501`) and the comment's other text are never
    reported or touched. A file directive (`# amp-lint: noqa: AMP001`) is judged the same way
    over the whole file: a code with no finding anywhere in it is reported.

    ## Why is this bad?
    A suppression that outlived its finding hides the next real finding on that line: when the
    training loop changes and the bug comes back, nobody is told. Baselines made with
    `amp-lint --add-noqa` shrink as the old findings are fixed only if the stale codes go.

    ## Example
    ```python
    scaler = torch.amp.GradScaler("cuda")
    print(scaler.get_scale())  # noqa: AMP001
    ```

    ## Use instead
    ```python
    scaler = torch.amp.GradScaler("cuda")
    print(scaler.get_scale())
    ```

    ## Fix safety
    Safe: suppressions do not change what the program does. The fix removes the unused amp-lint
    codes from the directive, and the directive (and the comment) when nothing else is left;
    another tool's codes and any other text in the comment stay.

    ## References
    - ruff's `unused-noqa` (RUF100): https://docs.astral.sh/ruff/rules/unused-noqa/
    """

    code = "AMP100"
    name = "unused-noqa"
    summary = "a '# noqa' names an amp-lint code that suppresses nothing on its line"
    triggers = (OUR_PREFIX,)
    fix_availability = SAFE
    #: The code of every registered rule: what a ``# noqa`` may name. The registry
    #: (`linter.rules`) fills it in where it lists the rules, so that this rule, one of those it
    #: lists, need not import the registry back.
    registered_codes: ClassVar[frozenset[str]] = frozenset()
    valid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    print(scaler.get_scale())  # noqa: AMP001
"""
        ),
        Example("import os  # noqa: F401\nx = 1  # noqa\n"),
    )
    invalid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
print(scaler.get_scale())  # noqa: AMP001
""",
            (4,),
        ),
        Example("import torch\n\nx = torch.ones(3)  # noqa: AMP099, F841\n", (3,)),
        Example("total = 0  # type: ignore  # noqa: AMP001\n", (1,)),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        return _OUR_NOQA.search(text) is not None

    def check_findings(self, context: ModuleContext, findings: Findings) -> Iterable[Finding]:
        known = _registered_codes()
        by_line: dict[int, set[str]] = {}
        for line, code in findings.reported:
            by_line.setdefault(line, set()).add(code)
        for line, site in sorted(noqa_sites(context).items()):
            unused, unknown = self._stale(site, known, findings.ran, by_line.get(line, set()))
            if unused or unknown:
                where = "own line" if site.own_line else "line"
                yield _finding(site, unused, unknown, _WHY_UNUSED[where], "unused noqa")
        anywhere = {code for _line, code in findings.reported}
        for site in file_noqa_sites(context):
            unused, unknown = self._stale(site, known, findings.ran, anywhere)
            if unused or unknown:
                yield _finding(site, unused, unknown, _WHY_UNUSED["file"], "unused file noqa")

    def _stale(
        self, site: NoqaSite, known: frozenset[str], ran: frozenset[str], found: set[str]
    ) -> tuple[list[str], list[str]]:
        """The directive's codes of ours that suppress nothing (their rule ran and found
        nothing where the directive reaches), and those that name no rule."""
        unused: list[str] = []
        unknown: list[str] = []
        for code in site.directive.codes or ():
            upper = code.upper()
            if not upper.startswith(OUR_PREFIX) or upper == self.code:
                continue
            if upper not in known:
                unknown.append(code)
            elif upper in ran and upper not in found:
                unused.append(code)
        return unused, unknown


def _finding(
    site: NoqaSite, unused: list[str], unknown: list[str], why: tuple[str, str], kind: str
) -> Finding:
    parts = []
    if unused:
        parts.append(f"{', '.join(unused)} {why[len(unused) > 1]}")
    if unknown:
        parts.append(
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} no amp-lint code"
        )
    text = comment_without_codes(site.directive, [*unused, *unknown])
    fix = NodeFix("remove the unused codes", (site.replaced(text),), SAFE)
    return Finding(site.comment, f"{kind}: {'; '.join(parts)}", fix=fix)


def _registered_codes() -> frozenset[str]:
    return UnusedNoqa.registered_codes
