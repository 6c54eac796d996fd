"""``# noqa`` comments: reading them, deciding what they suppress, and writing codes into them.

One module that every face of the linter calls — the engine (suppression), AMP100 (unused
codes), ``--add-noqa`` (baselines) and the language server ("disable for this line") — so a
comment means the same thing everywhere. The semantics are ruff's:

- ``# noqa`` on a line suppresses every finding that starts on that line; ``# noqa: AMP001,
  AMP002`` only those codes. It may follow another comment (``# type: ignore  # noqa: AMP001``).
- ``# amp-lint: noqa`` on a line of its own suppresses the whole file, ``# amp-lint: noqa:
  AMP001`` those codes in the whole file (as ``# ruff: noqa`` does for ruff). A trailing one
  (after code) is not a file directive: it would silence the file by accident.

Only real comments count (tokenize finds them), so ``"# noqa"`` in a string is no directive.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from linter._diagnostic import Diagnostic
from linter._fix import Edit

__all__ = [
    "OUR_PREFIX",
    "FileDirective",
    "NoqaComment",
    "Suppressions",
    "add_codes",
    "comment_without_codes",
    "file_directive",
    "file_noqa_comments",
    "noqa_comments",
    "noqa_directives",
    "noqa_edits",
    "without_noqa",
]

#: The prefix of every amp-lint code; codes of other tools in a comment are never touched.
OUR_PREFIX = "AMP"

_NOQA = re.compile(
    r"#\s*noqa(?P<colon>\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)?)?",
    re.IGNORECASE,
)
_FILE_NOQA = re.compile(
    r"^#\s*amp-lint\s*:\s*noqa(?:\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?"
    r"\s*(?:#.*)?$",
    re.IGNORECASE,
)
_CODE_SEPARATOR = re.compile(r"[\s,]+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class Comment:
    """One comment token: where it starts and its text (from ``#`` to the line end)."""

    #: 1-based line.
    line: int
    #: 1-based column of the ``#``.
    column: int
    #: The comment's text.
    text: str
    #: Whether nothing but whitespace precedes it on its line.
    own_line: bool


@dataclass(frozen=True, slots=True)
class NoqaComment:
    """A line's ``# noqa`` directive, as written."""

    #: 1-based line it is on.
    line: int
    #: The whole comment token holding it (other comments on the line included).
    comment: Comment
    #: The codes it names in their order and spelling; ``None`` for a bare noqa.
    codes: tuple[str, ...] | None
    #: Offsets in ``comment.text`` of the directive (from its hash to its codes).
    span: tuple[int, int]
    #: Offsets in ``comment.text`` of the codes list (empty range for a bare one).
    codes_span: tuple[int, int]


@dataclass(frozen=True, slots=True)
class FileDirective:
    """What ``# amp-lint: noqa`` comments suppress in the whole file."""

    #: Every finding (a bare ``# amp-lint: noqa``).
    everything: bool = False
    #: These codes (``# amp-lint: noqa: AMP001``).
    codes: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Suppressions:
    """Everything a file's comments suppress."""

    #: Line to its codes (``None``: a bare noqa).
    lines: Mapping[int, frozenset[str] | None]
    #: The file-level directives.
    file: FileDirective

    @classmethod
    def of(cls, text: str) -> Suppressions:
        comments = _comments(text)
        return cls(_directives(comments), _file_directive(comments))

    def suppresses(self, diagnostic: Diagnostic) -> bool:
        if self.file.everything or diagnostic.code in self.file.codes:
            return True
        if diagnostic.line not in self.lines:
            return False
        codes = self.lines[diagnostic.line]
        return codes is None or diagnostic.code in codes


def without_noqa(diagnostics: Iterable[Diagnostic], text: str) -> list[Diagnostic]:
    """The findings no ``# noqa`` (line or file) suppresses."""
    suppressions = Suppressions.of(text)
    return [d for d in diagnostics if not suppressions.suppresses(d)]


def noqa_directives(text: str) -> dict[int, frozenset[str] | None]:
    """Line number to the codes its ``# noqa`` names (``None``: a bare ``# noqa``, all codes).

    A ``# noqa:`` followed by no valid code is not a directive (ruff warns and ignores it).
    """
    return _directives(_comments(text))


def file_directive(text: str) -> FileDirective:
    """What the file's ``# amp-lint: noqa`` comments suppress everywhere in it."""
    return _file_directive(_comments(text))


def noqa_comments(text: str) -> dict[int, NoqaComment]:
    """Each line's ``# noqa`` directive with its positions (the first one when a comment has
    several), for the tools that rewrite them."""
    found: dict[int, NoqaComment] = {}
    for comment in _comments(text):
        match = _NOQA.search(comment.text)
        if match is None or (match["colon"] is not None and match["codes"] is None):
            continue
        if match["codes"] is None:
            codes, codes_span = None, (match.end(), match.end())
        else:
            codes = tuple(part for part in _CODE_SEPARATOR.split(match["codes"]) if part)
            codes_span = match.span("codes")
        found[comment.line] = NoqaComment(comment.line, comment, codes, match.span(), codes_span)
    return found


def file_noqa_comments(text: str) -> list[NoqaComment]:
    """The ``# amp-lint: noqa: CODES`` file directives that name codes, with their positions
    (a bare one names none, so nothing in it can go stale)."""
    found = []
    for comment in _comments(text):
        match = _FILE_NOQA.match(comment.text.rstrip()) if comment.own_line else None
        if match is None or match["codes"] is None:
            continue
        codes = tuple(part for part in _CODE_SEPARATOR.split(match["codes"]) if part)
        # The directive ends with its codes: a comment after them is not part of it.
        span = (match.start(), match.end("codes"))
        found.append(NoqaComment(comment.line, comment, codes, span, match.span("codes")))
    return found


def comment_without_codes(noqa: NoqaComment, drop: Iterable[str]) -> str | None:
    """The comment's text with ``drop`` taken out of its directive; ``None`` when nothing of the
    comment would be left (the comment held only those codes)."""
    dropped = {code.upper() for code in drop}
    text = noqa.comment.text
    kept = [code for code in noqa.codes or () if code.upper() not in dropped]
    if kept:
        start, end = noqa.codes_span
        return text[:start] + ", ".join(kept) + text[end:]
    start, end = noqa.span
    before, after = text[:start].rstrip(), text[end:]
    if not before:
        rest = after.strip()
        if not rest:
            return None
        return rest if rest.startswith("#") else "# " + rest.lstrip(":;,- ")
    return before + after


def add_codes(
    text: str, codes_by_line: Mapping[int, Iterable[str]]
) -> tuple[list[Edit], list[int]]:
    """Edits that make each line's ``# noqa`` name its codes (an existing directive is extended,
    an existing comment kept), and the lines that cannot carry a trailing comment (their end is
    inside a multi-line string, or they continue with a backslash)."""
    noqas = noqa_comments(text)
    comments = {comment.line: comment for comment in _all_comments(text)}
    blocked = _lines_ending_inside_a_token(text)
    lines = _LINE_BREAK.split(text)
    edits: list[Edit] = []
    refused: list[int] = []
    for line, wanted in sorted(codes_by_line.items()):
        codes = list(dict.fromkeys(code.upper() for code in wanted))
        existing = noqas.get(line)
        if existing is not None:
            if existing.codes is None:
                continue  # a bare noqa already suppresses everything
            have = {code.upper() for code in existing.codes}
            missing = [code for code in codes if code not in have]
            if missing:
                column = existing.comment.column + existing.codes_span[1]
                edits.append(Edit(line, column, line, column, ", " + ", ".join(missing)))
            continue
        if not codes:
            continue
        body = lines[line - 1] if line <= len(lines) else ""
        comment = comments.get(line)
        if line in blocked or (comment is None and body.rstrip().endswith("\\")):
            refused.append(line)
            continue
        end = len(body.rstrip()) + 1
        edits.append(Edit(line, end, line, len(body) + 1, f"  # noqa: {', '.join(codes)}"))
    return edits, refused


def noqa_edits(text: str, diagnostics: Sequence[Diagnostic]) -> tuple[list[Edit], list[int]]:
    """`add_codes` for findings: each finding's code on the line where it starts."""
    wanted: dict[int, list[str]] = {}
    for diagnostic in diagnostics:
        wanted.setdefault(diagnostic.line, []).append(diagnostic.code)
    return add_codes(text, wanted)


def _directives(comments: Iterable[Comment]) -> dict[int, frozenset[str] | None]:
    directives: dict[int, frozenset[str] | None] = {}
    for comment in comments:
        for match in _NOQA.finditer(comment.text):
            if match["colon"] is None:
                directives[comment.line] = None
            elif match["codes"] is not None:
                known = directives.get(comment.line, frozenset())
                if known is None:
                    continue  # a bare noqa on the line already names every code
                codes = frozenset(code.upper() for code in _CODE_SEPARATOR.split(match["codes"]))
                directives[comment.line] = known | codes
    return directives


def _file_directive(comments: Iterable[Comment]) -> FileDirective:
    everything = False
    codes: set[str] = set()
    for comment in comments:
        if not comment.own_line:
            continue
        match = _FILE_NOQA.match(comment.text.strip())
        if match is None:
            continue
        if match["codes"] is None:
            everything = True
        else:
            codes.update(code.upper() for code in _CODE_SEPARATOR.split(match["codes"]) if code)
    return FileDirective(everything, frozenset(codes))


def _comments(text: str) -> list[Comment]:
    """The comments of a file that may hold a directive (none without the word)."""
    return _all_comments(text) if "noqa" in text.lower() else []


def _all_comments(text: str) -> list[Comment]:
    try:
        return [
            Comment(
                token.start[0],
                token.start[1] + 1,
                token.string,
                not token.line[: token.start[1]].strip(),
            )
            for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):
        # libcst accepts a few programs tokenize rejects; then look at each line's text.
        found = []
        for number, line in enumerate(_LINE_BREAK.split(text), start=1):
            if "#" in line:
                column = line.index("#")
                found.append(Comment(number, column + 1, line[column:], not line[:column].strip()))
        return found


def _lines_ending_inside_a_token(text: str) -> set[int]:
    """Lines whose line break is part of a token (a triple-quoted string spanning lines): a
    comment cannot go at their end."""
    blocked: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.DEDENT, tokenize.INDENT):
                continue
            blocked.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    return blocked
