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


def follows_device_sync(index: ModuleIndex, aliases: ImportAliases, node: cst.CSTNode) -> bool:
    """A device sync runs before ``node`` on every path within its loop body or function."""
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.IndentedBlock | cst.Module):
            for statement in ancestor.body:
                if statement is child:
                    break
                if is_device_sync(statement, aliases):
                    return True
        if isinstance(ancestor, cst.For | cst.While | cst.FunctionDef | cst.Lambda):
            return False
        child = ancestor
    return False
