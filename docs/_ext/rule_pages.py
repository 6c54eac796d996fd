"""Write one Markdown page per registered lint rule, and a rules index, before Sphinx reads.

Everything on a rule page comes from the rule class: its code, name and summary, the ruff-style
sections of its docstring, its ``invalid``/``valid`` examples (the same snippets its tests run), its
``options`` and its ``fix_availability``; the fix shown before/after is the linter's own fix of the
first invalid example that has one, applied at build time. Whether a rule is on by default is
asked of the selection code with the default settings. The pages are generated into
``reference/rules/`` (git-ignored) on every build, so adding a rule to ``linter.rules.ALL_RULES``
is all it takes to document it, in the index too.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

from linter._fix import SAFE, UNSAFE
from linter._rule import FIX_AVAILABILITIES, NO_FIX, Example, Rule, RuleOption
from linter._selection import OFF_BY_DEFAULT, enabled_rules, how_to_enable
from linter.api import fix_source
from linter.config import Settings
from linter.model.project._across_files import ACROSS_FILES
from linter.rules import ALL_RULES

logger = logging.getLogger(__name__)

#: Folder, relative to the docs source, that this extension owns entirely.
RULES_DIR = Path("reference", "rules")
#: Docstring sections every rule must have, in page order (ruff's headings).
REQUIRED_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead")
#: How the index and the pages name each fix availability, and the command that applies it.
FIX_LABELS = {SAFE: "safe", UNSAFE: "unsafe", NO_FIX: "none"}
FIX_COMMANDS = {SAFE: "amp-lint --fix", UNSAFE: "amp-lint --fix --unsafe-fixes"}
#: Snippets (relative to the docs source) shown as an admonition at the top of a rule's page.
RULE_SNIPPETS: dict[str, tuple[str, ...]] = {"AMP002": ("_snippets/scale_below_one.md",)}

_HEADING = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)


def page_name(rule: type[Rule]) -> str:
    """Document name of a rule's page, relative to ``RULES_DIR``."""
    return rule.code.lower()


def split_sections(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Markdown docstring into its preamble and its ``## Heading`` sections."""
    matches = list(_HEADING.finditer(doc))
    preamble = doc[: matches[0].start()] if matches else doc
    sections = {}
    ends = [following.start() for following in matches[1:]] + [len(doc)] * bool(matches)
    for match, end in zip(matches, ends, strict=True):
        sections[match.group(1)] = doc[match.end() : end].strip()
    return preamble.strip(), sections


def _fence(code: str, lines: tuple[int, ...]) -> str:
    options = f":emphasize-lines: {','.join(map(str, lines))}\n" if lines else ""
    return f"````{{code-block}} python\n{options}\n{code.rstrip()}\n````\n"


def _examples(title: str, examples: tuple[Example, ...], intro: str) -> str:
    if not examples:
        return ""
    blocks = "\n".join(_fence(example.code, example.lines) for example in examples)
    return f"### {title}\n\n{intro}\n\n{blocks}"


def _option_rows(rule: type[Rule], options: tuple[RuleOption, ...]) -> str:
    if not options:
        return "This rule has no options.\n"
    rows = "\n".join(
        f"| `{option.name}` | `{option.type.__name__}` | `{option.default!r}` | {option.doc} |"
        for option in options
    )
    example = "\n".join(f"{option.name} = {_toml(option.default)}" for option in options)
    return (
        f"Set in `pyproject.toml` under `[tool.amp-lint.{rule.name}]`:\n\n"
        "| option | type | default | meaning |\n|---|---|---|---|\n"
        f"{rows}\n\n```toml\n[tool.amp-lint.{rule.name}]\n{example}\n```\n"
    )


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return str(value)


def _suppression(rule: type[Rule]) -> str:
    return f"""\
On one line, add `# noqa: {rule.code}` to the line the finding is reported on (a bare `# noqa`
silences every rule there). For a whole file or folder, use `per-file-ignores`; for the whole
project, `ignore`:

```toml
[tool.amp-lint]
ignore = ["{rule.code}"]

[tool.amp-lint.per-file-ignores]
"scripts/legacy_*.py" = ["{rule.code}"]
```

See {{doc}}`../configuration` for every setting.
"""


def on_by_default(rule: type[Rule]) -> bool:
    """Whether a run with no configuration runs ``rule``, as the selection code decides."""
    defaults = Settings()
    return bool(enabled_rules((rule,), defaults.select, defaults.ignore, defaults.extend_select))


@dataclass(frozen=True, slots=True)
class FixShowcase:
    """An invalid example of a rule and the same code after the rule's fix."""

    #: The example, as the rule's tests lint it.
    before: Example
    #: Its source after ``--fix`` (with ``--unsafe-fixes`` for an unsafe fix).
    after: str


def fix_showcase(rule: type[Rule]) -> FixShowcase | None:
    """The first invalid example that the rule's own fix changes, fixed by the real engine."""
    if rule.fix_availability not in FIX_COMMANDS:
        return None
    for example in rule.invalid:
        fixed = fix_source(example.code, rules=(rule,), select=[rule.code], unsafe_fixes=True).text
        if fixed != example.code:
            return FixShowcase(example, fixed)
    return None


def _check_fix_metadata(rule: type[Rule], showcase: FixShowcase | None) -> None:
    if rule.fix_availability not in FIX_AVAILABILITIES:
        logger.warning(
            "rule %s: fix_availability %r is not one of %s",
            rule.code,
            rule.fix_availability,
            ", ".join(FIX_AVAILABILITIES),
            type="ampscale",
            subtype="rule-docs",
        )
    elif rule.fix_availability != NO_FIX and showcase is None:
        logger.warning(
            "rule %s: fix_availability is %r but no invalid example is changed by its fix; "
            "add one, so that the page can show the fix",
            rule.code,
            rule.fix_availability,
            type="ampscale",
            subtype="rule-docs",
        )


def _changed_lines(before: str, after: str) -> tuple[int, ...]:
    """1-based lines of ``after`` that the fix wrote."""
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    return tuple(
        line + 1
        for tag, _, _, start, end in matcher.get_opcodes()
        if tag != "equal"
        for line in range(start, end)
    )


def _fix_section(rule: type[Rule], showcase: FixShowcase, safety: str) -> str:
    command = FIX_COMMANDS[rule.fix_availability]
    kind = (
        "safe: it keeps the program's meaning, and `amp-lint --fix` applies it"
        if rule.fix_availability == SAFE
        else "unsafe: it changes behaviour in a way to review, so only "
        "`amp-lint --fix --unsafe-fixes` applies it (`--diff --unsafe-fixes` shows it)"
    )
    safety = f"{safety}\n\n" if safety else ""
    return f"""\
## Fix

This rule's fix is {kind}. See {{doc}}`../../guides/fixing`.

{safety}Below, one of the rule's own test cases, and what `{command}` makes of it
(generated by running the fix when these docs were built):

:::::{{tab-set}}
::::{{tab-item}} Before
{_fence(showcase.before.code, showcase.before.lines)}::::
::::{{tab-item}} After `{command}`
{_fence(showcase.after, _changed_lines(showcase.before.code, showcase.after))}::::
:::::
"""


def _metadata_line(rule: type[Rule]) -> str:
    fix = FIX_LABELS.get(rule.fix_availability, rule.fix_availability)
    default = "on" if on_by_default(rule) else "off"
    return (
        f"Code `{rule.code}` · name `{rule.name}` · fix: **{fix}** · {default} by default · "
        f"defined in `{rule.__module__}`.\n"
    )


def render_rule_page(rule: type[Rule]) -> str:
    """The Markdown source of one rule's page."""
    preamble, sections = split_sections(inspect.cleandoc(rule.__doc__ or ""))
    missing = [title for title in REQUIRED_SECTIONS if title not in sections]
    if missing:
        logger.warning(
            "rule %s (%s): docstring lacks section(s) %s",
            rule.code,
            rule.__module__,
            ", ".join(f"'## {title}'" for title in missing),
            type="ampscale",
            subtype="rule-docs",
        )
    parts = [f"# {rule.code}: {rule.name}\n", f"{rule.summary}\n"]
    snippets = RULE_SNIPPETS.get(rule.code, ())
    parts += [f"```{{include}} ../../{snippet}\n```\n" for snippet in snippets]
    # A one-line preamble is the docstring's summary line, which ``summary`` already says.
    if "\n" in preamble:
        parts.append(f"{preamble}\n")
    parts.append(_metadata_line(rule))
    if not on_by_default(rule):
        parts.append(
            f":::{{note}}\nThis rule is **{OFF_BY_DEFAULT}**: a run with no `select` does not "
            f"check it. To {how_to_enable(rule)}.\n:::\n"
        )
    for title in ("What it does", "Why is this bad?"):
        parts.append(f"## {title}\n\n{sections.get(title, '')}\n")
    parts.append(f"## Example\n\n{sections.get('Example', '')}\n")
    parts.append(
        _examples(
            "Every case the rule flags",
            rule.invalid,
            "These are the rule's own test cases; highlighted lines are where it reports.",
        )
    )
    parts.append(f"## Use instead\n\n{sections.get('Use instead', '')}\n")
    parts.append(
        _examples(
            "Every case the rule accepts",
            rule.valid,
            "Also the rule's own test cases: none of these may be reported.",
        )
    )
    across = ACROSS_FILES.get(rule.code)
    if across:
        parts.append(f"## Across files\n\n{across} See [](../../explanation/project-model.md).\n")
    showcase = fix_showcase(rule)
    _check_fix_metadata(rule, showcase)
    if showcase is not None:
        parts.append(_fix_section(rule, showcase, sections.get("Fix safety", "")))
    options_prose = sections.get("Options", "")
    parts.append(f"## Options\n\n{options_prose + chr(10) * 2 if options_prose else ''}")
    parts.append(_option_rows(rule, rule.options))
    parts.append(f"## Suppression\n\n{_suppression(rule)}")
    if sections.get("References"):
        parts.append(f"## References\n\n{sections['References']}\n")
    return "\n".join(part for part in parts if part)


def render_index(rules: tuple[type[Rule], ...]) -> str:
    """The Markdown source of the rules index: a table and a toctree of every rule page."""
    if rules:
        rows = "\n".join(
            f"| [{rule.code}]({page_name(rule)}.md) | `{rule.name}` "
            f"| {rule.summary.replace('|', chr(92) + '|')} "
            f"| {FIX_LABELS.get(rule.fix_availability, rule.fix_availability)} "
            f"| {'on' if on_by_default(rule) else 'off'} |"
            for rule in rules
        )
        table = f"| code | name | what it flags | fix | default |\n|---|---|---|---|---|\n{rows}\n"
    else:
        table = "No rules are registered yet.\n"
    toctree = "\n".join(page_name(rule) for rule in rules)
    return f"""\
# Rules

Every rule amp-lint knows, generated from `linter.rules.ALL_RULES`. Each page shows the rule's
documentation, the test cases it must flag and must accept, its fix before and after, its options,
how to silence it and the public evidence behind it.

**fix**: *safe* fixes keep the program's meaning and `amp-lint --fix` applies them; *unsafe* ones
change behaviour in a way to review and need `--unsafe-fixes` too ({{doc}}`../../guides/fixing`).
**default**: whether a run with no configuration checks the rule; `select`, `ignore` and
`extend-select` change that ({{doc}}`../configuration`). A rule that is *off* by default runs
only when a selector picks it: `--extend-select` with its code, or `--select ALL`.

{table}
```{{toctree}}
:hidden:

{toctree}
```
"""


def _write_if_changed(path: Path, text: str) -> None:
    # Unchanged files keep their mtime, so incremental builds do not reread every rule page; the
    # atomic replace keeps two concurrent builds from reading a half-written page.
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=path.parent, delete=False, suffix=".tmp"
    ) as handle:
        handle.write(text)
    os.replace(handle.name, path)


def generate_rule_pages(app: Sphinx) -> None:
    """Write the index and one page per rule; remove pages of rules that no longer exist."""
    folder = Path(app.srcdir, RULES_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    pages = {"index.md": render_index(ALL_RULES)}
    pages |= {f"{page_name(rule)}.md": render_rule_page(rule) for rule in ALL_RULES}
    for name, text in pages.items():
        _write_if_changed(folder / name, text)
    for stale in folder.glob("*.md"):
        if stale.name not in pages:
            stale.unlink()


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("builder-inited", generate_rule_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
