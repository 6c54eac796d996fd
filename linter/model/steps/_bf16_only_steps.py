"""Does a scaler's step run only under bf16 autocasts?

A GradScaler that is on only when a bf16 switch is (``GradScaler(enabled=cfg.bf16)``,
``GradScaler() if use_bf16 else None``) or stepped only under one (``if use_bf16:
scaler.step(opt)``), next to autocasts that run bf16 whenever that switch is on
(``dtype=torch.bfloat16``, ``dtype=torch.float16 if not cfg.bf16 else torch.bfloat16``), never
meets fp16 overflows: its steps are not skipped. Which precision such a pairing wastes is
AMP010's; AMP015 need not report a scheduler beside it. An autocast of unknown dtype, or one
that may run fp16 while the switch is on, keeps the scaler's steps skippable.
"""

from __future__ import annotations

import libcst as cst

from linter.model.syntax import (
    BF16,
    Fact,
    ImportAliases,
    ModuleIndex,
    PathFacts,
    dotted_name,
    keyword,
    last_part,
)
from linter.model.values import BF16_WORDS, ModuleAutocasts, ScalerReceivers


def _switches(facts: frozenset[Fact]) -> set[str]:
    """The bf16 switches these facts say are on, by their last name (``cfg.bf16`` -> ``bf16``:
    ``self.config.bf16`` and ``config.bf16`` are one setting seen from two places)."""
    return {
        last_part(fact.subject)
        for fact in facts
        if fact.relation == "is" and fact.value is True and BF16_WORDS.search(fact.subject)
    }


class Bf16OnlySteps:
    """Scaler steps of one module that run only with bf16 autocasts."""

    def __init__(
        self,
        index: ModuleIndex,
        aliases: ImportAliases,
        paths: PathFacts,
        receivers: ScalerReceivers,
    ) -> None:
        self._index = index
        self._paths = paths
        self._autocasts = ModuleAutocasts(index, aliases)
        self._aliases = aliases
        self._constructors = [c for c in index.nodes(cst.Call) if receivers.is_constructor_call(c)]

    def only_bf16(self, step: cst.Call, scaler: str | None) -> bool:
        """``step`` (a ``scaler.step(...)`` call) runs only when a bf16 switch is on, and
        every autocast of the module runs bf16 then."""
        switches = _switches(self._paths.conditions(step))
        for constructor in self._constructors:
            if scaler is not None and self._bound_name(constructor) == scaler:
                switches |= self._constructor_switches(constructor)
        return bool(switches) and self._autocasts_bf16_under(switches)

    def _constructor_switches(self, call: cst.Call) -> set[str]:
        enabled = keyword(call, "enabled")
        found = _switches(self._paths.facts.of_test(enabled.value, True)) if enabled else set()
        found |= _switches(self._paths.conditions(call))
        child: cst.CSTNode = call
        for ancestor in self._index.ancestors(call):
            if isinstance(ancestor, cst.IfExp) and child is not ancestor.test:
                found |= _switches(self._paths.facts.of_test(ancestor.test, child is ancestor.body))
            elif isinstance(ancestor, cst.BaseStatement | cst.BaseSmallStatement):
                break
            child = ancestor
        return found

    def _autocasts_bf16_under(self, switches: set[str]) -> bool:
        autocasts = [a for a in self._autocasts.sites if not a.disabled]
        if not autocasts or self._autocasts.uncalled():
            return False
        for autocast in autocasts:
            if autocast.dtype == BF16:
                continue
            argument = (
                keyword(autocast.node, "dtype") if isinstance(autocast.node, cst.Call) else None
            )
            if argument is None or self._dtype_under(argument.value, switches) != BF16:
                return False
        return True

    def _dtype_under(self, node: cst.BaseExpression, switches: set[str]) -> str | None:
        """The dtype a choice (``a if cfg.bf16 else b``) picks while the switches are on."""
        if not isinstance(node, cst.IfExp):
            return None
        for holds, arm in ((True, node.body), (False, node.orelse)):
            if _switches(self._paths.facts.of_test(node.test, holds)) & switches:
                return self._autocasts.static_dtype(arm)
        return None

    def _bound_name(self, call: cst.Call) -> str | None:
        for ancestor in self._index.ancestors(call):
            if isinstance(ancestor, cst.Assign) and len(ancestor.targets) == 1:
                return dotted_name(ancestor.targets[0].target)
            if isinstance(ancestor, cst.BaseStatement | cst.BaseSmallStatement):
                return None
        return None
