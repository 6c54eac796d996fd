"""Which files a lint run reads.

Folders are walked for the files ``include`` names — ``*.py`` modules and ``*.ipynb`` notebooks
by default (stubs, ``*.pyi``, hold no training code to check) — in a sorted, deterministic
order, skipping the ``exclude``/``extend-exclude`` globs and every virtualenv (a folder holding
``pyvenv.cfg``, whatever its name). Symbolic links to folders are not followed during a walk (as
git, ruff and black do), so a link loop cannot trap it; linked files are read. A file named on
the command line is linted whatever its name or the excludes say, unless ``force_exclude`` is
set: pre-commit names every changed file, and ``--force-exclude`` lets the excludes apply there
too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from linter._diagnostic import FileError
from linter._patterns import PathPattern, any_match, relative_to_root

#: Globs of the files a folder walk collects (the ``include`` setting replaces this list, as in
#: ruff): Python modules and Jupyter notebooks. ``include = ["*.py"]`` leaves notebooks out.
DEFAULT_INCLUDE: tuple[str, ...] = ("*.py", "*.ipynb")


@dataclass(frozen=True, slots=True)
class Discovered:
    """The outcome of expanding the command line's paths."""

    #: Files to lint, as display paths, in walk order without duplicates.
    files: tuple[str, ...]
    #: Paths that could not be listed or do not exist.
    errors: tuple[FileError, ...]


class Excluder:
    """Decides whether a path is excluded, given globs relative to a root folder."""

    def __init__(
        self, patterns: Sequence[str], root: str, include: Sequence[str] = DEFAULT_INCLUDE
    ) -> None:
        self.patterns = tuple(PathPattern(pattern) for pattern in patterns)
        self.include = tuple(PathPattern(pattern) for pattern in include)
        self.root = root
        # Globs without a "/" match a path's last component alone: a walk tests those against
        # the entry's name, without making the path relative to the root for each of a tree's
        # hundred thousand entries.
        self._names_only = not any(p.anchored for p in (*self.patterns, *self.include))

    def collects(self, path: str, name: str | None = None) -> bool:
        """Whether a folder walk lints the file at ``path`` (its name or path is included);
        ``name`` is its last component, when the caller has it."""
        if name is not None and self._names_only:
            return any(p.regex.fullmatch(name) is not None for p in self.include)
        return any_match(self.include, relative_to_root(path, self.root))

    def excluded(self, path: str, *, check_parents: bool = True, name: str | None = None) -> bool:
        """Whether ``path`` or (with ``check_parents``) a folder above it is excluded; ``name``
        as for `collects`."""
        if name is not None and self._names_only and not check_parents:
            return any(p.regex.fullmatch(name) is not None for p in self.patterns)
        relative = relative_to_root(path, self.root)
        if not check_parents:
            return any_match(self.patterns, relative)
        parts = relative.split("/")
        return any(
            any_match(self.patterns, "/".join(parts[:end]) or "/")
            for end in range(len(parts), 0, -1)
        )


def discover(paths: Sequence[str], excluder: Excluder, *, force_exclude: bool) -> Discovered:
    """Expand files and folders into the Python files to lint."""
    files: dict[str, None] = {}
    errors: list[FileError] = []
    for given in paths:
        path = os.path.normpath(given)
        if not os.path.lexists(path):
            errors.append(FileError(given, "no such file or directory"))
        elif force_exclude and excluder.excluded(path):
            continue
        elif os.path.isdir(path):
            _walk(path, excluder, files, errors)
        else:
            # Anything else, a broken or looping link included, is read (and reported) as a file.
            files[path] = None
    return Discovered(tuple(files), tuple(errors))


def _walk(top: str, excluder: Excluder, files: dict[str, None], errors: list[FileError]) -> None:
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError as error:
            errors.append(FileError(folder, f"cannot list folder: {_reason(error)}"))
            continue
        subfolders = []
        for entry in entries:
            path = entry.name if folder == os.curdir else os.path.join(folder, entry.name)
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_folder = False
            name = entry.name
            if is_folder:
                if not excluder.excluded(
                    path, check_parents=False, name=name
                ) and not os.path.exists(os.path.join(path, "pyvenv.cfg")):
                    subfolders.append(path)
            elif (
                excluder.collects(path, name)
                and not _is_folder_link(entry)
                and not excluder.excluded(path, check_parents=False, name=name)
            ):
                files[path] = None
        # Depth first, in name order: push in reverse so the first name is visited first.
        pending.extend(reversed(subfolders))


def _is_folder_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink() and entry.is_dir()
    except OSError:
        return False


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
