"""What the syntax layer needs of a parsed file: its path, source, tree and positions.

The file's full context (`linter.model.project._module_context.ModuleContext`) lives a layer up,
with the project around it. The syntax analyses that cache per file, or that name a project
module's re-export of a library name (`linter.model.syntax._dotted_names.import_aliases`), take
this protocol instead, so that no import runs from syntax up to the project.
"""

from __future__ import annotations

from typing import Protocol

import libcst as cst
from libcst.metadata import CodeRange

__all__ = ["LibraryNames", "ParsedModule"]


class LibraryNames(Protocol):
    """The one question syntax asks of a project: is a project name a library's, re-exported?"""

    def library_name(self, path: str, qualified: str) -> str | None: ...


class ParsedModule(Protocol):
    """One parsed file, as the syntax layer reads it."""

    @property
    def path(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def module(self) -> cst.Module: ...

    @property
    def project(self) -> LibraryNames | None: ...

    def position(self, node: cst.CSTNode) -> CodeRange: ...
