"""The module's ``# noqa`` comments as syntax-tree nodes, so a rule can point at one and propose
replacing it (the text side, what a directive says, is `linter._noqa`'s)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from linter._noqa import NoqaComment, file_noqa_comments, noqa_comments
from linter.model.syntax._module_index import module_index
from linter.model.syntax._parsed_module import ParsedModule
from linter.model.syntax._tree import walk


@dataclass(frozen=True, slots=True)
class NoqaSite:
    """One line's ``# noqa`` directive and the nodes that hold it."""

    #: What the directive says, and where in the comment.
    directive: NoqaComment
    #: The comment node (its text is the whole comment token).
    comment: cst.Comment
    #: The node around it: the line's trailing whitespace, or a line of its own.
    owner: cst.TrailingWhitespace | cst.EmptyLine

    @property
    def own_line(self) -> bool:
        """Whether the comment stands on a line without code (it then suppresses nothing)."""
        return isinstance(self.owner, cst.EmptyLine)

    def replaced(self, text: str | None) -> tuple[cst.CSTNode, cst.CSTNode]:
        """The replacement that gives the comment ``text`` (``None``: no comment at all; the
        whitespace before it goes too, the line break stays)."""
        if text is not None:
            return self.comment, self.comment.with_changes(value=text)
        empty = cst.SimpleWhitespace("")
        return self.owner, self.owner.with_changes(whitespace=empty, comment=None)


def noqa_sites(context: ParsedModule) -> dict[int, NoqaSite]:
    """1-based line to the ``# noqa`` directive on it, for every line that has one."""
    index = module_index(context)
    return index.shared(("noqa_sites",), lambda: _sites(context))


def file_noqa_sites(context: ParsedModule) -> list[NoqaSite]:
    """The ``# amp-lint: noqa: CODES`` file directives, in source order."""
    index = module_index(context)
    return index.shared(("file_noqa_sites",), lambda: _file_sites(context))


def _sites(context: ParsedModule) -> dict[int, NoqaSite]:
    directives = noqa_comments(context.source)
    return {site.directive.line: site for site in _located(context, directives)}


def _file_sites(context: ParsedModule) -> list[NoqaSite]:
    directives = {found.line: found for found in file_noqa_comments(context.source)}
    return sorted(_located(context, directives), key=lambda site: site.directive.line)


def _located(context: ParsedModule, directives: dict[int, NoqaComment]) -> list[NoqaSite]:
    """The comment nodes on the directives' lines (one comment token per line at most)."""
    if not directives:
        return []
    sites = []
    for node in walk(context.module):
        if isinstance(node, (cst.TrailingWhitespace, cst.EmptyLine)) and node.comment is not None:
            line = context.position(node.comment).start.line
            if line in directives:
                sites.append(NoqaSite(directives[line], node.comment, node))
    return sites
