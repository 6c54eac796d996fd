"""The dtype an expression takes from a loaded config: ``getattr(torch, cfg.dtype)``,
``{"bf16": torch.bfloat16, "fp16": torch.float16}[cfg.precision]``, ``torch.bfloat16 if
training_args.bf16 else torch.float16`` — evaluated under every value each config the code can
load gives the key (`linter.model.settings._config_references.ConfigRead`), so that a verdict such
as
"every shipped config picks bf16" holds for every launch the shipped files allow.

Anything the configs do not decide (a key one option lacks, an ``"auto"``, a value computed in
Python) leaves the dtype unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from linter.model.settings._config_files import precision_of
from linter.model.settings._config_references import ConfigRead, ConfigReference, config_read
from linter.model.settings._module_constants import ModuleConstants
from linter.model.syntax import (
    ImportAliases,
    ModuleIndex,
    dotted_name,
    literal_dtype,
    positional,
    string_value,
)

#: How many names deep an expression is followed (``ctx_dtype = dtype``, ``dtype = getattr(...)``).
_DEPTH = 4


@dataclass(frozen=True, slots=True)
class ConfigDtype:
    """The dtype(s) an expression may take, decided by config values."""

    #: Every dtype a loadable config leads to (``{"bf16"}`` for a bf16-only verdict).
    dtypes: frozenset[str]
    #: The config reads the verdict rests on.
    reads: tuple[ConfigRead, ...]
    #: The expressions evaluated (the argument and the bindings followed): their own mentions of
    #: other dtypes are the alternatives the configs ruled out.
    evaluated: tuple[cst.CSTNode, ...]


class ConfigDtypes:
    """Evaluates dtype expressions of one module against its loaded configs."""

    def __init__(
        self,
        index: ModuleIndex,
        aliases: ImportAliases,
        references: tuple[ConfigReference, ...],
    ) -> None:
        self._index = index
        self._aliases = aliases
        self._references = references
        self._constants = ModuleConstants(index)

    def of(self, node: cst.BaseExpression) -> ConfigDtype | None:
        """The dtypes ``node`` may hold when at least one config read decides it; else None."""
        if not self._references:
            return None
        reads: list[ConfigRead] = []
        evaluated: list[cst.CSTNode] = [node]
        found = self._dtypes(node, reads, evaluated, 0)
        if found is None or not reads:
            return None
        return ConfigDtype(frozenset(found), tuple(reads), tuple(evaluated))

    def _dtypes(
        self, node: cst.BaseExpression, reads: list[ConfigRead], seen: list[cst.CSTNode], depth: int
    ) -> set[str] | None:
        if depth > _DEPTH:
            return None
        spelled = literal_dtype(node, self._aliases)
        if spelled is not None:
            return {spelled}
        if isinstance(node, cst.IfExp):
            test = self._truths(node.test, reads, depth)
            if test is None:
                return None
            found: set[str] = set()
            for truth, branch in ((True, node.body), (False, node.orelse)):
                if truth in test:
                    branch_dtypes = self._dtypes(branch, reads, seen, depth + 1)
                    if branch_dtypes is None:
                        return None
                    found |= branch_dtypes
            return found
        if isinstance(node, cst.Call) and dotted_name(node.func) == "getattr":
            owner, attribute = positional(node, 0), positional(node, 1)
            if owner is None or attribute is None or len(node.args) != 2:
                return None
            if self._aliases.qualify(dotted_name(owner.value) or "") != "torch":
                return None
            return self._strings_to_dtypes(attribute.value, None, reads)
        if isinstance(node, cst.Subscript) and len(node.slice) == 1:
            element = node.slice[0].slice
            table = self._table(node.value, seen)
            if table is None or not isinstance(element, cst.Index):
                return None
            return self._strings_to_dtypes(element.value, table, reads)
        bound = self._constants.bound_value(node) if isinstance(node, cst.Name) else None
        if bound is not None:
            seen.append(bound)
            return self._dtypes(bound, reads, seen, depth + 1)
        return None

    def _strings_to_dtypes(
        self,
        node: cst.BaseExpression,
        table: dict[str, str | None] | None,
        reads: list[ConfigRead],
    ) -> set[str] | None:
        """The dtypes the config strings read by ``node`` name, directly or through ``table``."""
        read = config_read(self._references, self._index, node)
        if read is None:
            return None
        reads.append(read)
        found = set()
        for _config, setting in read.values:
            if not isinstance(setting.value, str):
                return None
            dtype = table.get(setting.value) if table is not None else precision_of(setting.value)
            if dtype is None:
                return None
            found.add(dtype)
        return found

    def _table(
        self, node: cst.BaseExpression, seen: list[cst.CSTNode]
    ) -> dict[str, str | None] | None:
        """A dict literal from strings to dtypes (or a name bound once to one)."""
        if isinstance(node, cst.Name):
            bound = self._constants.bound_value(node)
            if bound is None:
                return None
            seen.append(bound)
            node = bound
        if not isinstance(node, cst.Dict):
            return None
        table: dict[str, str | None] = {}
        for element in node.elements:
            if not isinstance(element, cst.DictElement):
                return None
            key = string_value(element.key)
            if key is None:
                return None
            table[key] = literal_dtype(element.value, self._aliases)
        return table

    def _truths(
        self, test: cst.BaseExpression, reads: list[ConfigRead], depth: int
    ) -> set[bool] | None:
        """The truth values ``test`` takes over the config values it reads."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._truths(test.expression, reads, depth)
            return None if inner is None else {not value for value in inner}
        compared: cst.BaseExpression = test
        relation: tuple[type, object] | None = None
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            if not isinstance(target.operator, cst.Equal | cst.NotEqual):
                return None
            constant = string_value(target.comparator)
            if constant is None:
                return None
            compared, relation = test.left, (type(target.operator), constant)
        read = config_read(self._references, self._index, compared)
        if read is None:
            return None
        reads.append(read)
        truths = set()
        for _config, setting in read.values:
            if relation is None:
                if not isinstance(setting.value, bool):
                    return None
                truths.add(setting.value)
            else:
                equal = setting.value == relation[1]
                truths.add(equal if relation[0] is cst.Equal else not equal)
        return truths
