"""Build a docutils table from rows of strings, for directives that generate reference tables."""

from __future__ import annotations

from collections.abc import Sequence

from docutils import nodes


def _cell(content: str | nodes.Node) -> nodes.entry:
    entry = nodes.entry()
    if isinstance(content, nodes.Node):
        entry += content
    else:
        entry += nodes.paragraph(text=content)
    return entry


def build_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str | nodes.Node]],
    *,
    widths: Sequence[int] | None = None,
    classes: Sequence[str] = (),
) -> nodes.table:
    """A table node with one header row; cells are plain text or ready-made nodes."""
    table = nodes.table(classes=list(classes))
    group = nodes.tgroup(cols=len(header))
    table += group
    for width in widths or [1] * len(header):
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    head += nodes.row("", *(_cell(title) for title in header))
    group += head
    body = nodes.tbody()
    for row in rows:
        body += nodes.row("", *(_cell(value) for value in row))
    group += body
    return table
