"""Which dtypes a run-time dtype may take, and which runs take each.

``dtype=ptdtype`` is not static, but a script often shows where it comes from: a command-line
flag (``--dtype``, ``--precision``) read directly, through a table (nanoGPT's
``ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16,
"float16": torch.float16}[dtype]``), through a conditional
(``torch.bfloat16 if args.precision == "bf16" else torch.float16``) or ``getattr(torch, ...)``.
The flag's ``default`` is what a run with no flags gets (the plain case); each other value in
its ``choices`` is a run the user may ask for (the conditional case, "when run with --dtype
float16"). A key bound to ``"bfloat16" if torch.cuda.is_bf16_supported() else "float16"`` is
bf16 on GPUs with bf16 and fp16 on the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from linter.model.settings._command_line import DeclaredSettings
from linter.model.settings._fp16_switches import (
    BF16_SUPPORT_CHECKS,
    ON_GPUS_WITHOUT_BF16,
    TRUE_ON_GPUS,
)
from linter.model.settings._module_constants import ModuleConstants
from linter.model.syntax import (
    Fact,
    Facts,
    ImportAliases,
    ModuleIndex,
    dotted_name,
    dtype_named,
    import_aliases,
    keyword,
    last_part,
    literal_dtype,
    path_facts,
    positional,
    string_value,
)

#: How deep a chain of names, tables and conditionals is followed.
_MAX_DEPTH = 4


@dataclass(frozen=True, slots=True)
class DtypeChoice:
    """One dtype a run may get."""

    #: ``bf16``, ``fp16``, ``fp32``...
    dtype: str
    #: None for a run with no flags; else which runs, e.g. ``when run with --dtype float16``.
    when: str | None
    #: What holds on those runs (``args.dtype == "float16"``), to compare with branches.
    facts: frozenset[Fact]


@dataclass(frozen=True, slots=True)
class DtypeOptions:
    """Every dtype an expression may take, and the code that decides it."""

    #: One entry per run: the default first, then each other choice.
    choices: tuple[DtypeChoice, ...]
    #: The tables, conditionals and flag declarations read: their other alternatives are
    #: decided by the flag, not requests of their own (``"float16"`` in ``choices=[...]``).
    evaluated: tuple[cst.CSTNode, ...]

    def default(self) -> str | None:
        """The dtype a run with no flags gets, when known."""
        return next((c.dtype for c in self.choices if c.when is None), None)

    def first(self, dtype: str) -> DtypeChoice | None:
        """The run that gets ``dtype``: the default when it does, else the first choice."""
        return next((c for c in self.choices if c.dtype == dtype), None)


@dataclass(frozen=True, slots=True)
class _Key:
    """One value a table key or a flag takes."""

    value: str
    when: str | None
    facts: frozenset[Fact]


class DtypeChoices:
    """Evaluates run-time dtype expressions over the flags that decide them."""

    def __init__(
        self,
        index: ModuleIndex,
        aliases: ImportAliases,
        constants: ModuleConstants,
        settings: DeclaredSettings,
        facts: Facts,
    ) -> None:
        self._index = index
        self._aliases = aliases
        self._constants = constants
        self._settings = settings
        self._facts = facts

    def of(self, node: cst.BaseExpression) -> DtypeOptions | None:
        """The dtypes ``node`` may take; None when no declared flag or GPU check decides it."""
        evaluated: list[cst.CSTNode] = []
        choices = self._dtypes(node, evaluated, 0)
        if not choices:
            return None
        return DtypeOptions(tuple(choices), tuple(evaluated))

    def _dtypes(
        self, node: cst.BaseExpression, evaluated: list[cst.CSTNode], depth: int
    ) -> list[DtypeChoice]:
        if depth > _MAX_DEPTH:
            return []
        bound = self._constants.bound_value(node) if isinstance(node, cst.Name) else None
        if bound is not None:
            return self._dtypes(bound, evaluated, depth + 1)
        if isinstance(node, cst.Name):
            return self._branches(node, evaluated, depth)
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Dict):
            return self._table(node, node.value, evaluated, depth)
        if isinstance(node, cst.IfExp):
            return self._conditional(node, evaluated, depth)
        if isinstance(node, cst.Call) and dotted_name(node.func) == "getattr" and node.args:
            module = dotted_name(node.args[0].value)
            if module is None or self._aliases.qualify(module) != "torch" or len(node.args) < 2:
                return []
            node = node.args[1].value
        keys = self._keys(node, evaluated, depth)
        return [
            DtypeChoice(dtype, key.when, key.facts)
            for key in keys
            if (dtype := dtype_named(key.value)) is not None
        ]

    def _branches(
        self, node: cst.Name, evaluated: list[cst.CSTNode], depth: int
    ) -> list[DtypeChoice]:
        """``weight_dtype = torch.float32``, then ``if accelerator.mixed_precision == "fp16":
        weight_dtype = torch.float16`` / ``elif ... == "bf16": weight_dtype = torch.bfloat16``
        (diffusers' training scripts): the chain of conditionals written as statements. Only
        that shape: one binding outside any ``if`` (the default), the others alone in the arms
        of ``==`` tests of one setting, all before ``node``."""
        index = self._index
        function = index.enclosing_function(node)
        default: str | None = None
        arms: dict[str, str] = {}
        subject: cst.BaseExpression | None = None
        read: list[cst.CSTNode] = []  # the bindings and tests the flag decides
        for assign in index.nodes(cst.Assign):
            if index.enclosing_function(assign) is not function or not any(
                dotted_name(target.target) == node.value for target in assign.targets
            ):
                continue
            dtype = literal_dtype(assign.value, self._aliases)
            if dtype is None or path_facts(index).precedes_in_source(node, assign):
                return []
            block = index.parent.get(index.parent.get(assign))  # type: ignore[arg-type]  # None has no parent
            owner = index.parent.get(block) if block is not None else None
            if isinstance(owner, cst.If) and block is owner.body:
                compared = _compared(owner.test)
                if compared is None or compared[1] in arms:
                    return []
                if subject is not None and not compared[0].deep_equals(subject):
                    return []
                subject, arms[compared[1]] = compared[0], dtype
                read += [owner.test, assign]
            elif owner is function or isinstance(owner, cst.Module):
                if default is not None:
                    return []
                default = dtype
            else:
                return []
        if default is None or subject is None:
            return []
        keys = self._keys(subject, evaluated, depth + 1)
        if keys:
            evaluated.extend(read)
        return [DtypeChoice(arms.get(key.value, default), key.when, key.facts) for key in keys]

    def _table(
        self,
        node: cst.Subscript,
        table: cst.Dict,
        evaluated: list[cst.CSTNode],
        depth: int,
    ) -> list[DtypeChoice]:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return []
        entries = _string_table(table)
        if entries is None:
            return []
        keys = self._keys(node.slice[0].slice.value, evaluated, depth)
        evaluated.append(table)
        found = []
        for key in keys:
            value = entries.get(key.value)
            dtype = literal_dtype(value, self._aliases) if value is not None else None
            if dtype is not None:
                found.append(DtypeChoice(dtype, key.when, key.facts))
        return found

    def _conditional(
        self, node: cst.IfExp, evaluated: list[cst.CSTNode], depth: int
    ) -> list[DtypeChoice]:
        """``torch.bfloat16 if args.precision == "bf16" else torch.float16``: each value of the
        flag picks an arm."""
        test = node.test
        if not (
            isinstance(test, cst.Comparison)
            and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal | cst.NotEqual)
        ):
            return []
        compared = string_value(test.comparisons[0].comparator)
        if compared is None:
            return []
        equal = isinstance(test.comparisons[0].operator, cst.Equal)
        when_true = literal_dtype(node.body, self._aliases)
        when_false = literal_dtype(node.orelse, self._aliases)
        if when_true is None or when_false is None:
            return []
        keys = self._keys(test.left, evaluated, depth)
        evaluated.append(node)
        return [
            DtypeChoice(
                when_true if (key.value == compared) == equal else when_false, key.when, key.facts
            )
            for key in keys
        ]

    def _keys(
        self, node: cst.BaseExpression, evaluated: list[cst.CSTNode], depth: int
    ) -> list[_Key]:
        """The string values a key takes: a flag's default and choices, a name bound once to a
        literal, or to ``"bfloat16" if <bf16 support check> else "float16"``."""
        if depth > _MAX_DEPTH:
            return []
        bound = self._constants.bound_value(node) if isinstance(node, cst.Name) else None
        if bound is not None:
            return self._keys(bound, evaluated, depth + 1)
        literal = string_value(node)
        if literal is not None:
            return [_Key(literal, None, frozenset())]
        if isinstance(node, cst.IfExp):
            return self._gpu_keys(node, evaluated)
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Dict):
            return self._renamed_keys(node, node.value, evaluated, depth)
        setting = self._settings.of(node)
        if setting is None:
            return []
        subject = self._facts.subject(node)
        default = string_value(setting.default)
        keys = (
            []
            if default is None
            else [_Key(default, None, frozenset({Fact(subject, "==", default)}))]
        )
        for choice in setting.choices or ():
            if choice != default:
                fact = frozenset({Fact(subject, "==", choice)})
                keys.append(_Key(choice, f"when run with {setting.flag} {choice}", fact))
        if keys and setting.declaration is not None:
            evaluated.append(setting.declaration)
        return keys

    def _renamed_keys(
        self, node: cst.Subscript, table: cst.Dict, evaluated: list[cst.CSTNode], depth: int
    ) -> list[_Key]:
        """``{"bf16": "bfloat16", ...}[args.dtype]``: each key's value through a table of names."""
        entries = _string_table(table)
        if (
            entries is None
            or len(node.slice) != 1
            or not isinstance(node.slice[0].slice, cst.Index)
        ):
            return []
        keys = self._keys(node.slice[0].slice.value, evaluated, depth + 1)
        evaluated.append(table)
        return [
            _Key(string_value(entries[key.value]) or "", key.when, key.facts)
            for key in keys
            if key.value in entries
        ]

    def _gpu_keys(self, node: cst.IfExp, evaluated: list[cst.CSTNode]) -> list[_Key]:
        """``"bfloat16" if torch.cuda.is_bf16_supported() else "float16"``."""
        test, arms = node.test, (string_value(node.body), string_value(node.orelse))
        supported = True
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, supported = test.expression, not supported
        # nanoGPT: `torch.cuda.is_available() and torch.cuda.is_bf16_supported()`.
        while (
            supported
            and isinstance(test, cst.BooleanOperation)
            and isinstance(test.operator, cst.And)
            and isinstance(test.left, cst.Call)
            and dotted_name(test.left.func) in TRUE_ON_GPUS
        ):
            test = test.right
        name = dotted_name(test.func) if isinstance(test, cst.Call) else None
        if name is None or last_part(name) not in BF16_SUPPORT_CHECKS or None in arms:
            return []
        evaluated.append(node)
        with_bf16, without = arms if supported else arms[::-1]
        return [
            _Key(with_bf16, None, frozenset()),  # type: ignore[arg-type]  # None is ruled out above
            _Key(without, ON_GPUS_WITHOUT_BF16, frozenset()),  # type: ignore[arg-type]  # None is ruled out above
        ]


def _compared(test: cst.BaseExpression) -> tuple[cst.BaseExpression, str] | None:
    """``(X, "fp16")`` of the test ``X == "fp16"``."""
    if not (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Equal)
    ):
        return None
    compared = string_value(test.comparisons[0].comparator)
    return None if compared is None else (test.left, compared)


def _string_table(table: cst.Dict) -> dict[str, cst.BaseExpression] | None:
    """A dict literal keyed by strings, as key -> value expression; None for any other key. A
    ``None`` key (the run without the flag, glue-factory's ``None: torch.float32``) is left
    out: the keys looked up are the strings a flag takes, and its ``None`` default is none."""
    entries: dict[str, cst.BaseExpression] = {}
    for element in table.elements:
        if isinstance(element, cst.DictElement) and _is_none(element.key):
            continue
        name = string_value(element.key) if isinstance(element, cst.DictElement) else None
        if name is None:
            return None
        entries[name] = element.value
    return entries


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def dtype_choices(index: ModuleIndex) -> DtypeChoices:
    """The module's `DtypeChoices`, built once and shared by every rule that asks."""

    def build() -> DtypeChoices:
        aliases = import_aliases(index)
        settings = DeclaredSettings(index)
        constants = ModuleConstants(index, settings)
        return DtypeChoices(index, aliases, constants, settings, path_facts(index).facts)

    return index.shared(DtypeChoices, build)


def argument_options(index: ModuleIndex, call: cst.Call) -> DtypeOptions | None:
    """The options of a call's run-time ``dtype=`` (or its second positional argument, as
    ``torch.autocast("cuda", torch.bfloat16)`` takes it)."""
    argument = keyword(call, "dtype") or positional(call, 1)
    return dtype_choices(index).of(argument.value) if argument is not None else None


def runs_choosing(
    index: ModuleIndex, calls: list[cst.Call], dtype: str
) -> tuple[DtypeChoice | None, tuple[cst.CSTNode, ...]] | None:
    """Whether the run-time dtypes of ``calls`` (autocasts) are all ``dtype`` on one run: the
    run (None: the default run, or a run whose condition says which) and the code that
    decided it; None when some call's dtype is unknown, or no one run gives all of them."""
    chosen: list[DtypeChoice] = []
    evaluated: list[cst.CSTNode] = []
    for call in calls:
        options = argument_options(index, call)
        found = options.first(dtype) if options is not None else None
        if options is None or found is None:
            return None
        chosen.append(found)
        evaluated.extend(options.evaluated)
    conditions = {choice.when for choice in chosen} - {None}
    if len(conditions) > 1:
        return None
    run = next((choice for choice in chosen if choice.when is not None), None)
    return run, tuple(evaluated)
