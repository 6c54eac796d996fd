"""When is an fp16 switch on? ``fp16=True`` always; ``fp16=torch.cuda.is_available()`` on every
machine that trains; ``mixed_precision=args.mixed_precision`` only when the user asks.

A switch is *certain* when it is on wherever the script trains on a GPU: a literal, a name bound
once to one (``use_fp16 = True``), ``not bf16`` where ``bf16`` is a literal ``False``,
``torch.cuda.is_available()``, a command-line flag whose default turns it on. It is *reachable*
when the script declares that a run may turn it on: a ``--mixed_precision`` flag whose
``choices`` list ``"fp16"``, or ``not torch.cuda.is_bf16_supported()`` (on GPUs without bf16).
Any other expression (``fp16=args.fp16`` behind a ``store_true`` flag, ``enabled=use_amp``) is
a runtime choice the linter cannot see, and is not reported.

Whether a module asks for fp16 anywhere at all, by any spelling (``torch.float16``/``torch.half``
under any import alias, a ``.half()`` cast, an ``fp16=`` switch that is not ``False``, a string
that names fp16 such as ``"16-mixed"``), is asked here too (`asks_for_fp16`): a GradScaler in such
a module may serve that fp16 path, so it is not merely redundant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from linter.model.settings._command_line import DeclaredSettings
from linter.model.syntax import (
    Fact,
    Facts,
    ImportAliases,
    ModuleIndex,
    dotted_name,
    keyword,
    last_part,
    string_value,
    walk,
)

#: Calls true on every machine that trains on a CUDA GPU.
TRUE_ON_GPUS = frozenset({"torch.cuda.is_available", "cuda.is_available"})
#: Calls false on GPUs that lack bf16 (V100, T4): ``not <call>`` turns fp16 on there.
BF16_SUPPORT_CHECKS = frozenset(
    {"is_bf16_supported", "is_bfloat16_supported", "is_torch_bf16_gpu_available"}
)

#: The runs ``not torch.cuda.is_bf16_supported()`` turns fp16 on in, as messages say it.
ON_GPUS_WITHOUT_BF16 = "on a GPU without bf16 support"


@dataclass(frozen=True, slots=True)
class SwitchOn:
    """An fp16 switch that is on, and under which conditions."""

    #: Facts that hold on the runs where the switch is on (compared with branch conditions).
    facts: frozenset[Fact]
    #: None when certain; else the runs that turn it on, e.g. ``when run with --mixed_precision
    #: fp16``.
    when: str | None = None


_ALWAYS = SwitchOn(frozenset())


class Fp16Switches:
    """Evaluates switch expressions (``fp16=...``, ``enabled=...``, ``mixed_precision=...``)."""

    def __init__(self, index: ModuleIndex, settings: DeclaredSettings, facts: Facts) -> None:
        self._index = index
        self._settings = settings
        self._facts = facts

    def truthy(self, node: cst.BaseExpression, depth: int = 0) -> SwitchOn | None:
        """When a boolean switch is true; None when the linter cannot tell."""
        return self._evaluate(node, lambda value: value is True, depth)

    def fixed(self, node: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether the source fixes ``node``'s value (a literal, a comparison of constants, a
        name bound once to one, their negation): no run can change it, so a switch on it that
        `truthy` does not find on is off, not a runtime flag."""
        if depth > 3:
            return False
        if _literal(node) is not _UNKNOWN:
            return True
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            return self.fixed(node.expression, depth + 1)
        if isinstance(node, cst.Comparison):
            return self._comparison(node) is not _UNKNOWN
        value = self._bound_once(node) if isinstance(node, cst.Name) else None
        return value is not None and self.fixed(value, depth + 1)

    def equals(
        self, node: cst.BaseExpression, accepted: Callable[[object], bool], depth: int = 0
    ) -> SwitchOn | None:
        """When a value switch (``"fp16"``, ``16``) takes an accepted value."""
        return self._evaluate(node, accepted, depth)

    def _evaluate(
        self, node: cst.BaseExpression, accepted: Callable[[object], bool], depth: int
    ) -> SwitchOn | None:
        if depth > 3:
            return None
        literal = _literal(node)
        if literal is not _UNKNOWN:
            return _ALWAYS if accepted(literal) else None
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            return self._negation(node.expression, accepted, depth)
        if isinstance(node, cst.Comparison):
            compared = self._comparison(node)
            if compared is _UNKNOWN:
                return None
            return _ALWAYS if accepted(compared) else None
        if isinstance(node, cst.Call):
            name = dotted_name(node.func)
            if name is not None and name in TRUE_ON_GPUS and accepted(True):
                return SwitchOn(self._facts.of_test(node, True))
            return None
        if isinstance(node, cst.Name):
            value = self._bound_once(node)
            if value is None:
                return None
            found = self._evaluate(value, accepted, depth + 1)
            if found is None:
                return None
            return SwitchOn(found.facts | self._facts.of_test(node, True), found.when)
        setting = self._settings.of(node)
        if setting is None:
            return None
        subject = self._facts.subject(node)
        if setting.default is not None:
            default = self._evaluate(setting.default, accepted, depth + 1)
            if default is not None and default.when is None:
                literal = _literal(setting.default)
                fact = (
                    Fact(subject, "is", True) if literal is True else Fact(subject, "==", literal)
                )
                return SwitchOn(frozenset({fact}) if literal is not _UNKNOWN else frozenset())
        for choice in setting.choices or ():
            if accepted(choice):
                return SwitchOn(
                    frozenset({Fact(subject, "==", choice)}),
                    f"when run with {setting.flag} {choice}",
                )
        return None

    def _negation(
        self, inner: cst.BaseExpression, accepted: Callable[[object], bool], depth: int
    ) -> SwitchOn | None:
        if not accepted(True):
            return None
        literal = _literal(inner)
        if literal is _UNKNOWN and isinstance(inner, cst.Name):
            value = self._bound_once(inner)
            literal = _literal(value) if value is not None else _UNKNOWN
        if literal is not _UNKNOWN:
            return _ALWAYS if not literal else None
        if isinstance(inner, cst.Call):
            name = dotted_name(inner.func)
            if name is not None and last_part(name) in BF16_SUPPORT_CHECKS:
                return SwitchOn(self._facts.of_test(inner, False), ON_GPUS_WITHOUT_BF16)
        return None

    def _comparison(self, node: cst.Comparison) -> object:
        """``dtype == "float16"`` where ``dtype`` is bound once to a literal (nanoGPT's
        ``GradScaler(enabled=(dtype == "float16"))``): its truth value, else unknown."""
        if len(node.comparisons) != 1:
            return _UNKNOWN
        target = node.comparisons[0]
        relation = type(target.operator)
        if relation not in (cst.Equal, cst.NotEqual):
            return _UNKNOWN
        left = node.left
        if isinstance(left, cst.Name):
            left = self._bound_once(left) or left
        values = (_literal(left), _literal(target.comparator))
        if _UNKNOWN in values:
            return _UNKNOWN
        return (values[0] == values[1]) == (relation is cst.Equal)

    def _bound_once(self, name: cst.Name) -> cst.BaseExpression | None:
        """The value of a name assigned exactly once in its function (or at module level)."""
        function = self._index.enclosing_function(name)
        values = []
        for scope in (function, None) if function is not None else (None,):
            for assign in self._index.nodes(cst.Assign):
                if self._index.enclosing_function(assign) is not scope:
                    continue
                for target in assign.targets:
                    if isinstance(target.target, cst.Name) and target.target.value == name.value:
                        values.append(assign.value)
            if values:
                break
        return values[0] if len(values) == 1 else None


_UNKNOWN = object()


def _literal(node: cst.BaseExpression) -> object:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    return _UNKNOWN


#: Strings that ask for fp16 somewhere else in the file (a Trainer, Accelerate, Lightning).
FP16_STRINGS = frozenset({"fp16", "float16", "half", "16-mixed", "16-true"})


FP16_NAMES = frozenset({"torch.float16", "torch.half"})


def asks_for_fp16(index: ModuleIndex, aliases: ImportAliases, ruled_out: set[cst.CSTNode]) -> bool:
    """fp16 requested another way: ``torch.float16``, ``.half()``, ``fp16=...``, ``"16-mixed"``
    (``ruled_out``: the alternatives of a dtype that every shipped config decides)."""
    for call in index.nodes(cst.Call):
        if call in ruled_out:
            continue
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "half" and not call.args:
            return True
        fp16 = keyword(call, "fp16")
        if fp16 is not None and not (
            isinstance(fp16.value, cst.Name) and fp16.value.value == "False"
        ):
            return True
        for arg in call.args:
            if string_value(arg.value) in FP16_STRINGS:
                return True
    for node in walk(index.module):
        if node in ruled_out:
            continue
        if isinstance(node, cst.Attribute | cst.Name):
            name = dotted_name(node)
            if name is not None and aliases.qualify(name) in FP16_NAMES:
                return True
        elif isinstance(node, cst.SimpleString) and string_value(node) in FP16_STRINGS:
            return True
    return False
