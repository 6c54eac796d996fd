"""Has the host already waited for the device, on every path, before a node in its iteration?

An explicit ``torch.cuda.synchronize()`` (``torch.<device>.synchronize()``, under any import
alias) written as a statement of its own before a node — in the node's block or in a block
around it, up to the loop or function that holds it — runs on every path to the node: a
device-to-host read after it waits for nothing the sync did not already wait for. A sync under
a condition, inside a ``with``/``try`` of its own, or after the node does not count; neither
does a ``.item()``, which waits only for the tensor it copies.
"""

from __future__ import annotations

import libcst as cst

from linter.model.syntax import ImportAliases, ModuleIndex, dotted_name


def is_device_sync(statement: cst.BaseStatement, aliases: ImportAliases) -> bool:
    """``torch.cuda.synchronize()`` (any device, any alias) as a statement line of its own."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            name = aliases.qualify(dotted_name(small.value.func) or "")
            head, _dot, tail = name.rpartition(".")
            if tail == "synchronize" and head.startswith("torch.") and head.count(".") == 1:
                return True
    return False


class DeviceSyncs:
    """Answers `follows` for the nodes of one module. Each block is read once, whatever the
    number of nodes asked about in it: where its first sync stands, and where each of its
    statements stands (a loop of 20,000 reads asked 20,000 times over its body was quadratic).
    """

    def __init__(self, index: ModuleIndex, aliases: ImportAliases) -> None:
        self._index = index
        self._aliases = aliases
        #: Per block: the position of its first sync statement (None: none), and of each
        #: statement.
        self._blocks: dict[int, tuple[int | None, dict[int, int]]] = {}

    def follows(self, node: cst.CSTNode) -> bool:
        """A device sync runs before ``node`` on every path within its loop body or function."""
        child = node
        for ancestor in self._index.ancestors(node):
            if isinstance(ancestor, cst.IndentedBlock | cst.Module):
                first_sync, positions = self._block(ancestor)
                at = positions.get(id(child))
                if first_sync is not None and at is not None and first_sync < at:
                    return True
            if isinstance(ancestor, cst.For | cst.While | cst.FunctionDef | cst.Lambda):
                return False
            child = ancestor
        return False

    def _block(self, block: cst.IndentedBlock | cst.Module) -> tuple[int | None, dict[int, int]]:
        known = self._blocks.get(id(block))
        if known is None:
            statements = block.body
            first_sync = next(
                (at for at, one in enumerate(statements) if is_device_sync(one, self._aliases)),
                None,
            )
            known = first_sync, {id(one): at for at, one in enumerate(statements)}
            self._blocks[id(block)] = known
        return known
