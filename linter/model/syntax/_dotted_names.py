"""Dotted names of expressions, and what they mean under the module's own imports.

The rules resolve ``from torch.cuda import amp as A`` / ``A.GradScaler`` by reading the import
statements directly: it is all they need, and far cheaper than libcst's QualifiedNameProvider
(which dominated lint time in the issue's measurements).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

import libcst as cst

from linter.model.syntax._module_index import ModuleIndex
from linter.model.syntax._tree import children


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None (calls, subscripts, literals...)."""
    parts: list[str] = []
    # `type(...) is`, not `isinstance`: libcst's node classes are ABCs, and every isinstance
    # that fails goes through ABCMeta (12 million of them in a cold run of the 55-repository
    # sample, most of this function's time). No node class of libcst's is subclassed.
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def words(node: cst.CSTNode) -> Iterator[str]:
    """The names and string literals under ``node`` (``args.fp16 == "bf16"``: ``args``,
    ``fp16``, ``bf16``): what a test or switch talks about."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current.value
        elif isinstance(current, cst.SimpleString):
            value = current.evaluated_value
            if isinstance(value, str):
                yield value
        stack.extend(children(current))


def last_part(name: str) -> str:
    """``c`` of ``a.b.c``."""
    return name.rpartition(".")[2]


def _module_path(node: cst.BaseExpression | None) -> str:
    if node is None:
        return ""
    return dotted_name(node) or ""


class ImportAliases:
    """Maps a local name to the fully qualified name its import binds; with ``reexports``,
    through a project module that re-exports a library's name (`import_aliases`)."""

    def __init__(
        self,
        statements: Iterable[cst.Import | cst.ImportFrom],
        reexports: Callable[[str], str | None] | None = None,
    ) -> None:
        #: local name -> qualified name, e.g. ``GS`` -> ``torch.amp.GradScaler``.
        self.aliases: dict[str, str] = {}
        self._reexports = reexports
        self._reexported: dict[str, str] = {}
        for statement in statements:
            if isinstance(statement, cst.Import):
                for alias in statement.names:
                    full = _module_path(alias.name)
                    if alias.asname is not None:
                        local = _module_path(alias.asname.name)
                        self.aliases[local] = full
                    else:
                        root = full.partition(".")[0]
                        self.aliases.setdefault(root, root)
            elif not statement.relative and not isinstance(statement.names, cst.ImportStar):
                module = _module_path(statement.module)
                for alias in statement.names:
                    imported = _module_path(alias.name)
                    local = (
                        _module_path(alias.asname.name) if alias.asname is not None else imported
                    )
                    self.aliases[local] = f"{module}.{imported}"

    def qualify(self, name: str) -> str:
        """The qualified form of a dotted name; unimported names are returned unchanged."""
        head, dot, rest = name.partition(".")
        full = self.aliases.get(head)
        if full is None:
            return name
        qualified = f"{full}{dot}{rest}"
        if self._reexports is None:
            return qualified
        found = self._reexported.get(qualified)
        if found is None:
            found = self._reexported[qualified] = self._reexports(qualified) or qualified
        return found


def import_aliases(index: ModuleIndex) -> ImportAliases:
    """The `ImportAliases` of the module ``index`` indexes, built once per module; in a
    project, a name imported from a project module that imports it from a library is that
    library's name (GLIP's trainer imports `GradScaler` and `autocast` from
    `maskrcnn_benchmark/utils/amp.py`, which imports them from `torch.cuda.amp`)."""

    def build() -> ImportAliases:
        context = index.context
        project = context.project if context is not None else None
        reexports = None
        if context is not None and project is not None:
            path = os.path.abspath(context.path)

            def reexports(name: str) -> str | None:
                return project.library_name(path, name)

        return ImportAliases(index.nodes(cst.Import) + index.nodes(cst.ImportFrom), reexports)

    return index.shared(import_aliases, build)
