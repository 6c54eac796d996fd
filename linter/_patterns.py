"""Glob patterns for `exclude` and `per-file-ignores`, matched against paths relative to a root.

A pattern with a ``/`` is anchored at the root (``tests/fixtures/**``); a pattern without one
matches a path's last component anywhere (``build``, ``test_*.py``). ``**`` crosses folders,
``*`` and ``?`` do not, ``[...]`` is a character class (``[!...]`` negates).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field


def _translate(pattern: str) -> str:
    """The regular expression (for `re.fullmatch`) equivalent to a glob."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == n:
            # "dir/**" also matches "dir" itself, so a folder walk can prune it.
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class PathPattern:
    """One glob; `matches` takes a relative POSIX path."""

    #: The glob as the user wrote it.
    pattern: str
    #: Whether the glob names a path from the root (it contains ``/``) or a last component.
    anchored: bool = field(init=False)
    #: The compiled equivalent.
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        body = self.pattern.replace("\\", "/") if os.sep == "\\" else self.pattern
        body = body.removeprefix("./").rstrip("/") or "."
        object.__setattr__(self, "anchored", "/" in body)
        object.__setattr__(self, "regex", re.compile(_translate(body), re.DOTALL))

    def matches(self, relative: str) -> bool:
        """Whether ``relative`` (a POSIX path from the root, or absolute) matches."""
        if self.anchored:
            return self.regex.fullmatch(relative) is not None
        # The last component, as PurePosixPath(relative).name gives it, without building a path
        # object for every file of a walk (that was most of a cached run's time).
        name = relative.rstrip("/").rpartition("/")[2]
        return self.regex.fullmatch("" if name == "." else name) is not None


def relative_to_root(path: str, root: str) -> str:
    """``path`` as a POSIX path relative to ``root``, or absolute when it lies outside it."""
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute, root)
    except ValueError:  # another drive, on Windows
        return absolute.replace(os.sep, "/")
    if relative == ".." or relative.startswith(".." + os.sep):
        relative = absolute
    return relative.replace(os.sep, "/")


def any_match(patterns: tuple[PathPattern, ...], relative: str) -> bool:
    """Whether any of ``patterns`` matches ``relative``."""
    return any(pattern.matches(relative) for pattern in patterns)
