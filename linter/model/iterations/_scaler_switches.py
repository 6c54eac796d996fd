"""When a scaler scales: how each scaler name of a module is built, and where it is off.

``GradScaler(enabled=False)`` never scales (its scale is 1, ``step`` divides by 1); a
``GradScaler(enabled=args.amp)`` built under ``if torch.cuda.is_available():`` scales when both
hold. A rule that pairs a plain backward with a scaler's step asks whether the scaler may scale
where the backward runs: not where the backward's own conditions say the scaler is ``None``,
falsy or disabled, nor where they contradict every construction's conditions. A scaler the
module does not show being built (a parameter, ``accelerator.scaler``) is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from linter.model.iterations._iteration import TrainingIterations
from linter.model.syntax import Fact, ModuleIndex, PathFacts, dotted_name
from linter.model.values import GRAD_SCALER_CLASS_NAMES, GRAD_SCALER_CONSTRUCTORS

#: A scaler bound only to ``GradScaler(enabled=False)``: it never scales.
DISABLED: Literal["disabled"] = "disabled"


@dataclass(frozen=True, slots=True)
class Switch:
    """When one construction of a scaler scales: ``GradScaler(enabled=args.amp)`` under
    ``if torch.cuda.is_available():`` scales when both hold."""

    #: What must hold for it to scale (none: it always does).
    facts: frozenset[Fact]
    #: Its ``enabled=`` expression, if not a literal.
    enabled: cst.BaseExpression | None = None


class ScalerSwitches:
    """How each scaler name is built: only ``GradScaler(enabled=False)`` (never scales), or the
    `Switch`es under which its constructions scale."""

    def __init__(self, index: ModuleIndex, model: TrainingIterations) -> None:
        self._index = index
        self._aliases = model.aliases
        self._facts = model.facts
        #: dotted name -> the values assigned to it anywhere in the module.
        self._values: dict[str, list[cst.BaseExpression]] = {}
        for assign in index.nodes(cst.Assign):
            for target in assign.targets:
                name = dotted_name(target.target)
                if name is not None:
                    self._values.setdefault(name, []).append(assign.value)
        for ann in index.nodes(cst.AnnAssign):
            name = dotted_name(ann.target)
            if name is not None and ann.value is not None:
                self._values.setdefault(name, []).append(ann.value)

    def of(
        self, scaler: str | None, where: cst.CSTNode
    ) -> Literal["disabled"] | list[Switch] | None:
        """`DISABLED`, the `Switch`es of its constructions, or None when the module does not
        show how it is built. A name bound in the function around ``where`` is read from there
        alone: two functions may each build a local ``scaler`` of their own."""
        values = self._bound(scaler or "", where)
        if len(values) == 1 and (alias := dotted_name(values[0])) is not None:
            values = self._bound(alias, where)  # scaler = self.scaler
        if not values:
            return None
        switches: list[Switch] = []
        for value in values:
            enabled = self._enabled(value)
            if enabled is None:
                return None
            if enabled == DISABLED:
                continue
            # `if __name__ == "__main__":` is the script's entry, taken on every run of it.
            facts = frozenset(f for f in self._facts.conditions(value) if f.subject != "__name__")
            if isinstance(enabled, cst.BaseExpression):
                switches.append(Switch(facts | self._facts.facts.of_test(enabled, True), enabled))
            else:
                switches.append(Switch(facts))
        return switches or DISABLED

    def _bound(self, name: str, where: cst.CSTNode) -> list[cst.BaseExpression]:
        values = self._values.get(name, [])
        function = self._index.enclosing_function(where)
        local = [v for v in values if self._index.enclosing_function(v) is function]
        return local if local and function is not None else values

    def _enabled(self, value: cst.BaseExpression) -> cst.BaseExpression | str | None:
        """A GradScaler constructor's ``enabled=``: `DISABLED` for ``False``, the expression
        for a switch, ``""`` when it is always on; None for what is not a constructor."""
        if not isinstance(value, cst.Call):
            return None
        name = dotted_name(value.func)
        if name is None:
            return None
        qualified = self._aliases.qualify(name)
        if qualified not in GRAD_SCALER_CONSTRUCTORS and name not in GRAD_SCALER_CLASS_NAMES:
            return None
        for arg in value.args:
            if arg.keyword is not None and arg.keyword.value == "enabled":
                flag = arg.value
                if isinstance(flag, cst.Name) and flag.value in ("True", "False"):
                    return DISABLED if flag.value == "False" else ""
                return flag
        return ""


def scaler_switches(index: ModuleIndex, model: TrainingIterations) -> ScalerSwitches:
    """The module's `ScalerSwitches`, built once and shared."""
    return index.shared(ScalerSwitches, lambda: ScalerSwitches(index, model))


def scaler_off(
    facts: PathFacts, conditions: frozenset[Fact], scaler: str, switches: Iterable[Switch]
) -> bool:
    """Where ``conditions`` hold, ``scaler`` is ``None``, falsy or disabled (``if scaler is
    None:``, ``if not scaler.is_enabled():``), or none of its constructions scales
    (``GradScaler(enabled=args.amp)`` and ``if not args.amp:``; a ``GradScaler()`` built under
    ``if args.fp16:`` and ``else:``)."""
    off = {
        Fact(scaler, "is", False),
        Fact(scaler, "==", None),
        Fact(f"{scaler}.is_enabled()", "is", False),
    }
    if conditions & off:
        return True
    switches = list(switches)
    return bool(switches) and all(
        switch.facts and facts.contradict(conditions, switch.facts) for switch in switches
    )
