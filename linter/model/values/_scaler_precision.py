"""Is a GradScaler on only for a precision other than bf16?

A scaler next to bf16 autocasts may still be for fp16: it is off (``enabled=False``), on only
for another precision (``enabled=args.fp16``, ``enabled=(dtype == "float16")`` — nanoGPT's
shape — ``enabled=not args.bf16``), switched by a setting of its own
(``enabled=cfg.use_grad_scaler``), or created or used under a branch that picks a precision
(``if amp_dtype == torch.float16:``, ``GradScaler() if fp16 else None``). A plain AMP switch
(``enabled=args.amp``) or a bf16 one (``enabled=use_bf16``) is on exactly when the bf16
autocasts run.
"""

from __future__ import annotations

import re

import libcst as cst

from linter.model.syntax import (
    ImportAliases,
    ModuleIndex,
    PathFacts,
    dotted_name,
    keyword,
    positional,
    words,
)
from linter.model.values._scaler_receivers import ENABLED_POSITION

#: Words in a branch test that say it picks a precision (``if dtype == torch.float16:``,
#: ``if args.fp16:``, ``if precision == "16-mixed":``): a scaler under it is for that choice.
PRECISION_WORDS = re.compile(r"fp16|(?<!b)float16|half|dtype|precision|mixed", re.I)
#: Words of a bf16 switch: a scaler in the arm where it is on is a scaler *for* bf16.
BF16_WORDS = re.compile(r"bf16|bfloat16", re.I)

#: Words of a switch that turns the scaler on or off by itself (``use_grad_scaler``).
SCALER_SWITCH_WORDS = re.compile(r"scal", re.I)

#: Scaler methods whose call under a precision test ties the scaler to that precision.
_USES = frozenset({"scale", "step", "unscale_", "update"})


def _picks_other_than_bf16(paths: PathFacts, test: cst.BaseExpression, holds: bool) -> bool:
    """The arm where ``test`` evaluates to ``holds`` may be a non-bf16 precision: the test is
    about a dtype/fp16/precision, or it is the off arm of a bf16 switch (``if not args.bf16``,
    the ``else`` of ``if use_bfloat16``). The on arm of a bf16 switch runs bf16."""
    said = list(words(test))
    if any(PRECISION_WORDS.search(word) for word in said):
        return True
    if not any(BF16_WORDS.search(word) for word in said):
        return False
    return not any(
        fact.relation == "is" and fact.value is True and BF16_WORDS.search(fact.subject)
        for fact in paths.facts.of_test(test, holds)
    )


def for_another_precision(
    index: ModuleIndex, aliases: ImportAliases, paths: PathFacts, call: cst.Call
) -> bool:
    """The scaler is off, or on only for a precision choice (its ``enabled=``, the branch it is
    created in, or the branch it is used in)."""
    if any(arg.star for arg in call.args):
        return True
    name = dotted_name(call.func) or ""
    position = ENABLED_POSITION.get(aliases.qualify(name))
    enabled = keyword(call, "enabled") or (
        positional(call, position) if position is not None else None
    )
    if enabled is not None and _switched_separately(paths, enabled.value):
        return True
    if _under_precision_choice(index, paths, call):
        return True
    bound = _bound_name(index, call)
    return bound is not None and used_for_another_precision(index, paths, bound)


def used_for_another_precision(index: ModuleIndex, paths: PathFacts, name: str) -> bool:
    """The scaler held by ``name`` scales or steps only under a precision choice (``if
    args.fp16: scaler.scale(loss).backward()``)."""
    return any(
        _under_precision_choice(index, paths, use)
        for use in index.nodes(cst.Call)
        if isinstance(use.func, cst.Attribute)
        and use.func.attr.value in _USES
        and dotted_name(use.func.value) == name
    )


def _switched_separately(paths: PathFacts, enabled: cst.BaseExpression) -> bool:
    """``enabled=`` that may be off while the bf16 autocasts run: a precision choice
    (``dtype == "float16"``, ``args.fp16``, ``not bf16``) or a switch of its own
    (``use_grad_scaler``). A plain AMP switch (``enabled=args.amp``, as the autocasts have) or
    a bf16 one (``enabled=use_bf16``) is on exactly when the autocasts run in bf16."""
    if isinstance(enabled, cst.Name) and enabled.value in ("True", "False"):
        return enabled.value == "False"
    if any(SCALER_SWITCH_WORDS.search(word) for word in words(enabled)):
        return True
    return _picks_other_than_bf16(paths, enabled, True)


def _under_precision_choice(index: ModuleIndex, paths: PathFacts, node: cst.CSTNode) -> bool:
    for statement, arm in paths.arms(node):
        if _picks_other_than_bf16(paths, statement.test, arm is statement.body):
            return True
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.IfExp) and child is not ancestor.test:
            if _picks_other_than_bf16(paths, ancestor.test, child is ancestor.body):
                return True
        elif isinstance(ancestor, cst.BooleanOperation):
            other = ancestor.left if child is ancestor.right else ancestor.right
            if _picks_other_than_bf16(paths, other, isinstance(ancestor.operator, cst.And)):
                return True
        elif isinstance(ancestor, cst.BaseStatement | cst.BaseSmallStatement):
            return False
        child = ancestor
    return False


def _bound_name(index: ModuleIndex, call: cst.Call) -> str | None:
    for ancestor in index.ancestors(call):
        if isinstance(ancestor, cst.Assign) and len(ancestor.targets) == 1:
            return dotted_name(ancestor.targets[0].target)
        if isinstance(ancestor, cst.BaseStatement | cst.BaseSmallStatement):
            return None
    return None
