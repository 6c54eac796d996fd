"""Render a Google-style ``Args:`` section of a docstring as a Sphinx field list.

The scaler documents its constructor arguments the way ``help()`` reads best, as an ``Args:``
block of ``name: text`` entries (the header may carry a note, ``Args (positional ones as
torch's):``). Plain reStructuredText would turn that block into a malformed definition list, and
the build fails under ``-W``. ``sphinx.ext.napoleon`` would convert it, but it also reparses every
``#:`` attribute comment that contains a colon as ``type: description`` ("Which tensor: a
parameter..." becomes a reference to a class named "Which tensor"), so it is not enabled; this
small hook converts only ``Args`` sections.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx

_HEADER = re.compile(r"^(?P<indent>\s*)Args(?:\s*\((?P<note>[^)]*)\))?:\s*$")
_ENTRY = re.compile(r"^(?P<indent>\s*)(?P<name>\*{0,2}\w+):\s*(?P<text>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def convert_args_sections(lines: list[str]) -> list[str]:
    """``lines`` with each ``Args:`` block replaced by ``:param name: text`` fields."""
    output: list[str] = []
    index = 0
    while index < len(lines):
        header = _HEADER.match(lines[index])
        if not header:
            output.append(lines[index])
            index += 1
            continue
        base = len(header["indent"])
        pad = header["indent"]
        if header["note"]:
            output += [f"{pad}Arguments ({header['note']}):", ""]
        index += 1
        while index < len(lines) and (not lines[index].strip() or _indent(lines[index]) > base):
            entry = _ENTRY.match(lines[index])
            if entry and lines[index].strip():
                output.append(f"{pad}:param {entry['name']}: {entry['text']}")
            elif lines[index].strip():
                output.append(f"{pad}   {lines[index].strip()}")
            else:
                output.append("")
            index += 1
    return output


def _process_docstring(
    app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    lines[:] = convert_args_sections(lines)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("autodoc-process-docstring", _process_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
