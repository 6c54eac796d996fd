"""Parsing with libcst without validating again what its parser has just built.

Every libcst node checks its fields when it is constructed (``CSTNode.__post_init__`` calls
``_validate``). That is right for nodes a program builds, and redundant for the nodes the native
parser builds from source it accepted; libcst's own comment on ``__post_init__`` says as much
("avoid validating the tree when parsing a file"). Profiled on 11 real repositories, the
validation was 45% of ``parse_module``'s time. The parse here swaps ``__post_init__`` for a
no-op while the parser runs; every node made afterwards (a rule's fix, `libcst.parse_expression`
elsewhere) is validated as usual. ``_validate`` only raises, it sets nothing, so the nodes are
the ones a validated parse returns. Linting is single-threaded per process, so no other thread
builds nodes meanwhile.

The last module parsed is kept: a run that summarises a file and then lints it (an edited
file, an editor's buffer) parses it once. Trees are immutable, and every analysis of one is
held by the `ModuleContext` it was asked through, so two contexts share the tree and nothing
else.
"""

from __future__ import annotations

import libcst as cst
from libcst._nodes.base import CSTNode

#: The method the parse swaps out (None when this libcst has no such hook: then it validates).
_POST_INIT = CSTNode.__dict__.get("__post_init__")


def _unchecked(self: CSTNode) -> None:
    """A node the parser built needs no check."""


#: (text, its module) of the last parse.
_LAST: list[tuple[str, cst.Module]] = []


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module(text)``, without the per-node validation (see the module's
    docstring); raises what it raises."""
    if _LAST and _LAST[0][0] == text:
        return _LAST[0][1]
    module = _parsed(text)
    _LAST[:] = [(text, module)]
    return module


def parse_module_anew(text: str) -> cst.Module:
    """A tree of ``text`` that no earlier parse shares (a function grafted at several calls of
    one file needs a tree per call); raises what ``parse_module`` raises."""
    return _parsed(text)


def _parsed(text: str) -> cst.Module:
    if _POST_INIT is None:
        return cst.parse_module(text)
    CSTNode.__post_init__ = _unchecked  # type: ignore[method-assign]  # restored below
    try:
        return cst.parse_module(text)
    finally:
        CSTNode.__post_init__ = _POST_INIT  # type: ignore[method-assign]  # the original
