"""Files to modules: which of a project's files an import statement names (where the project
starts is `linter.model.project._roots`'s question).

Resolution is static, as Python's import system would find a project-local module when the
project is run from its root or a script from its own folder: the importing script's folder, the
folders a ``sys.path.insert(0, ...)`` adds (a literal, or a path built from ``__file__``), the
project root and ``src/`` are searched in that order; packages may lack ``__init__.py``
(namespace packages). Nothing is imported or run.
An import that names no file of the project (``torch``, a typo, a module built at run time)
resolves to None: unknown, never a guess.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Folders under the root that hold the packages in a ``src/`` layout.
SOURCE_FOLDERS = ("src",)

#: ``import a.b as c, d`` / ``from .a import b`` at the start of a line (the textual scan).
_IMPORT_LINE = re.compile(
    r"^[ \t]*(?:from[ \t]+(?P<from>\.*[\w.]*)[ \t]+import[ \t]+(?P<names>[^#\n;]+)"
    r"|import[ \t]+(?P<modules>[^#\n;]+))",
    re.MULTILINE,
)


def scan_imports(text: str) -> list[tuple[str, int, tuple[str, ...]]]:
    """(module, level, names) for each import the text's lines spell (a superset is fine: the
    scan only decides which files to summarise, and how far up a file's project reaches)."""
    found = []
    for match in _IMPORT_LINE.finditer(text):
        if match["from"] is not None:
            module = match["from"]
            level = len(module) - len(module.lstrip("."))
            names = tuple(
                part.split(" as ")[0].strip(" ()\\\t")
                for part in match["names"].split(",")
                if part.strip(" ()\\\t")
            )
            found.append((module.lstrip("."), level, names))
        else:
            for part in match["modules"].split(","):
                module = part.split(" as ")[0].strip(" ()\\\t")
                if module:
                    found.append((module, 0, ()))
    return found


@dataclass(frozen=True, slots=True)
class ImportTarget:
    """What one imported name refers to in the project."""

    #: The project file (absolute path) holding the module.
    path: str
    #: The name inside that module (``train_one_epoch`` of ``from engine import
    #: train_one_epoch``), or None when the imported name is the module itself.
    attribute: str | None = None


class ModuleFiles:
    """The project's Python files, answering "which file is module ``a.b``, seen from here?"."""

    def __init__(self, root: str, files: Iterable[str]) -> None:
        self.root = os.path.abspath(root)
        #: Every project file, absolute and normalised.
        self.files: frozenset[str] = frozenset(os.path.abspath(f) for f in files)
        self._folders = frozenset(os.path.dirname(f) for f in self.files)
        #: Every name a module path found here can start with: the folder names on the
        #: project files' paths and the files' stems. An absolute import starting with another
        #: name (``torch``, ``os``) is not the project's, without a look in each search root
        #: (most of a tree's imports, and most of the time resolving them took).
        self._heads = frozenset(
            part for folder in self._folders for part in folder.split(os.sep)
        ) | frozenset(os.path.splitext(os.path.basename(f))[0] for f in self.files)
        self._cache: dict[tuple[str, str, int, tuple[str, ...]], ImportTarget | None] = {}
        self._roots: dict[tuple[str, tuple[str, ...]], list[str]] = {}

    def search_roots(self, importer: str, extra: Sequence[str] = ()) -> list[str]:
        """Folders searched for an absolute import in ``importer``, first match wins."""
        folder = os.path.dirname(os.path.abspath(importer))
        key = (folder, tuple(extra))
        known = self._roots.get(key)
        if known is None:
            known = self._roots[key] = self._search_roots(importer, extra)
        return known

    def _search_roots(self, importer: str, extra: Sequence[str]) -> list[str]:
        roots = [os.path.dirname(os.path.abspath(importer))]
        for folder in extra:
            base = folder if os.path.isabs(folder) else os.path.join(roots[0], folder)
            roots.append(os.path.normpath(base))
        roots.append(self.root)
        roots.extend(os.path.join(self.root, name) for name in SOURCE_FOLDERS)
        roots.extend(self._package_tops(importer))
        return list(dict.fromkeys(roots))

    def _package_tops(self, importer: str) -> list[str]:
        """The folder above the outermost package around ``importer`` (``pkg/sub/mod.py`` with
        ``__init__.py`` files: the folder holding ``pkg``), where ``pkg.sub.mod`` is importable."""
        folder = os.path.dirname(os.path.abspath(importer))
        top = None
        while os.path.join(folder, "__init__.py") in self.files:
            top = os.path.dirname(folder)
            folder = top
        return [top] if top else []

    def resolve(
        self,
        importer: str,
        module: str,
        level: int = 0,
        name: str | None = None,
        extra_roots: Sequence[str] = (),
    ) -> ImportTarget | None:
        """The project file behind ``import module`` (``name`` None) or ``from module import name``
        in ``importer``; ``level`` counts the leading dots of a relative import."""
        # The answer depends on the importer's folder alone (relative imports start there; the
        # search roots are its folder's): files of one folder share it.
        key = (
            os.path.dirname(os.path.abspath(importer)),
            module,
            level,
            (name or "", *extra_roots),
        )
        if key not in self._cache:
            self._cache[key] = self._resolve(importer, module, level, name, extra_roots)
        return self._cache[key]

    def _resolve(
        self,
        importer: str,
        module: str,
        level: int,
        name: str | None,
        extra_roots: Sequence[str],
    ) -> ImportTarget | None:
        parts = [part for part in module.split(".") if part]
        if level:
            base = os.path.dirname(os.path.abspath(importer))
            for _ in range(level - 1):
                base = os.path.dirname(base)
            roots = [base]
        else:
            if not parts or parts[0] not in self._heads:
                return None
            roots = self.search_roots(importer, extra_roots)
        for root in roots:
            found = self._in_root(root, parts, name)
            if found is not None:
                return found
        return None

    def _in_root(self, root: str, parts: list[str], name: str | None) -> ImportTarget | None:
        folder = os.path.join(root, *parts)
        if name is not None:
            # `from pkg import mod` names a submodule when such a file exists, else an attribute.
            for candidate in (os.path.join(folder, f"{name}.py"),):
                if candidate in self.files:
                    return ImportTarget(candidate)
            if os.path.join(folder, name, "__init__.py") in self.files:
                return ImportTarget(os.path.join(folder, name, "__init__.py"))
        if parts:
            module_file = folder + ".py"
            if module_file in self.files:
                return ImportTarget(module_file, name)
        package = os.path.join(folder, "__init__.py")
        if package in self.files:
            return ImportTarget(package, name)
        if parts and folder in self._folders and name is not None:
            # A namespace package's submodule was not found above: the name is unknown.
            return None
        return None
