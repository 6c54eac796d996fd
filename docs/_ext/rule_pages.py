"""Write one Markdown page per registered lint rule, and a rules index, before Sphinx reads.

Everything on a rule page comes from the rule class: its code, name and summary, the ruff-style
sections of its docstring, its ``invalid``/``valid`` examples (the same snippets its tests run) and
its ``options``. The pages are generated into ``reference/rules/`` (git-ignored) on every build, so
adding a rule to ``linter.rules.ALL_RULES`` is all it takes to document it.
"""

from __future__ import annotations

import inspect
import os
import re
import tempfile
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

from linter._rule import Example, Rule, RuleOption
from linter.rules import ALL_RULES

logger = logging.getLogger(__name__)

#: Folder, relative to the docs source, that this extension owns entirely.
RULES_DIR = Path("reference", "rules")
#: Docstring sections every rule must have, in page order (ruff's headings).
REQUIRED_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead")
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
    parts.append(f"Code `{rule.code}` · name `{rule.name}` · defined in `{rule.__module__}`.\n")
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
    options_prose = sections.get("Options", "")
    parts.append(f"## Options\n\n{options_prose + chr(10) * 2 if options_prose else ''}")
    parts.append(_option_rows(rule, rule.options))
    parts.append(f"## Suppression\n\n{_suppression(rule)}")
    return "\n".join(part for part in parts if part)


def render_index(rules: tuple[type[Rule], ...]) -> str:
    """The Markdown source of the rules index: a table and a toctree of every rule page."""
    if rules:
        rows = "\n".join(
            f"| [{rule.code}]({page_name(rule)}.md) | `{rule.name}` | {rule.summary} |"
            for rule in rules
        )
        table = f"| code | name | what it flags |\n|---|---|---|\n{rows}\n"
    else:
        table = "No rules are registered yet.\n"
    toctree = "\n".join(page_name(rule) for rule in rules)
    return f"""\
# Rules

Every rule amp-lint knows, generated from `linter.rules.ALL_RULES`. Each page shows the rule's
documentation, the test cases it must flag and must accept, its options and how to silence it.

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
