"""Text edits an editor asks of a buffer: a ``# noqa`` for one line, the few edits that turn one
text into another, and the rule code under the cursor in a ``# noqa:`` comment.

They work on text and 1-based `Edit` positions, as the rest of the linter does, so the language
server only converts positions to the protocol's. What a ``# noqa`` means is the engine's
(`noqa_directives`): an edit here is offered only when the engine reads it as intended.
"""

from __future__ import annotations

import difflib
import re

from linter._engine import noqa_directives
from linter._fix import Edit, apply_edits

#: One line and its line break, as the engine counts lines (``str.splitlines`` also breaks at
#: form feeds and U+2028, which would shift every position after them).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
#: A noqa comment that names codes, to find where one more code goes.
_NOQA_CODES = re.compile(
    r"#\s*noqa\s*:\s*[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*(?=[^\w]|$)", re.IGNORECASE
)
#: A word that looks like a rule code.
_CODE = re.compile(r"[A-Za-z]+[0-9]+")


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` with their line breaks, as the engine numbers them."""
    return _LINE.findall(text)


def _body(text: str, line: int) -> str | None:
    """Line ``line`` (1-based) without its line break; ``None`` past the end."""
    lines = split_lines(text)
    if not 1 <= line <= len(lines):
        return None
    return lines[line - 1].rstrip("\r\n")


def noqa_edit(text: str, line: int, code: str) -> Edit | None:
    """The edit that makes line ``line`` suppress ``code``: extend its ``# noqa: ...`` or add one.

    ``None`` when no edit on that line can (the line continues with a backslash, or ends inside
    a string, so a comment there would not be one) or when it already does.
    """
    body = _body(text, line)
    codes = noqa_directives(text).get(line, frozenset())
    if body is None or codes is None or code in codes or body.rstrip().endswith("\\"):
        return None
    matches = list(_NOQA_CODES.finditer(body)) if codes else []
    if matches:
        end = matches[-1].end() + 1
        edit = Edit(line, end, line, end, f", {code}")
    else:
        kept = len(body.rstrip())
        edit = Edit(line, kept + 1, line, len(body) + 1, f"  # noqa: {code}")
    directive = noqa_directives(apply_edits(text, [edit])).get(line, frozenset())
    return edit if directive is not None and code in directive else None


def noqa_code_at(text: str, line: int, column: int) -> str | None:
    """The code (upper case) under 1-based (``line``, ``column``) when it is one that the line's
    ``# noqa:`` comment names; else ``None``."""
    body = _body(text, line)
    codes = noqa_directives(text).get(line)
    if body is None or not codes:
        return None
    for match in _CODE.finditer(body):
        if match.start() < column <= match.end() + 1:
            comment = body.rfind("#", 0, match.start())
            named = match[0].upper()
            if comment >= 0 and "noqa" in body[comment : match.start()].lower() and named in codes:
                return named
    return None


def line_edits(before: str, after: str) -> list[Edit]:
    """Edits, whole lines each, that turn ``before`` into ``after``; unchanged lines are not
    touched, so an editor keeps its cursor and folds there."""
    old, new = split_lines(before), split_lines(after)
    edits = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            start, end = _line_start(old, i1), _line_start(old, i2)
            edits.append(Edit(*start, *end, "".join(new[j1:j2])))
    return edits


def _line_start(lines: list[str], index: int) -> tuple[int, int]:
    """The 1-based position where 0-based line ``index`` starts (past the end: the text's end)."""
    if index < len(lines):
        return index + 1, 1
    if not lines:
        return 1, 1
    last = lines[-1]
    if last.endswith(("\n", "\r")):
        return len(lines) + 1, 1
    return len(lines), len(last) + 1
