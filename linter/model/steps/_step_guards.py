"""How an ``if`` test limits the code under it: periodic, once, or only on a non-finite value.

``if step % log_every == 0`` and ``if should_log:`` make code periodic; ``if step == 0`` runs it
once; ``if torch.isnan(grad_norm):`` runs it on the rare overflow steps. A gradient-accumulation
test (``(i + 1) % accum == 0``) and configuration flags (``args.amp``, ``rank == 0``) change
nothing: they fire on every optimizer step. `linter.model.steps._per_step` asks these questions
of the tests around a node; the LR-scheduler and scaler-lifetime analyses ask them too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from linter.model.syntax import children, dotted_name, last_part

#: Names in an ``if`` test that mean gradient accumulation (fires on every optimizer step).
ACCUMULATION_WORDS = re.compile(
    r"accum|grad_acc|gradient_acc|update_freq|micro_?batch|sync_grad|acc_steps",
    re.IGNORECASE,
)


#: Boolean names that mean "this is a log/eval/save step".
PERIODIC_FLAG = re.compile(
    r"^(should|do|time_to|is_time_to|needs?_to|is)_(log|print|eval|evaluate|save|report|"
    r"display|checkpoint)|^(log|logging|print|eval|save|report)_(now|this_step|time)$|"
    r"^is_(log|logging|eval|save|print)(ging)?_step$",
    re.IGNORECASE,
)


#: Step counters; ``if <counter> == <int>`` runs once.
STEP_COUNTER = re.compile(
    r"^(i|it|iter|iters|iteration|step|steps|global_step|batch_idx|batch_i|idx|epoch|n_iter)$"
)


#: Tests true on a non-finite value; code under them runs on the rare overflow/NaN steps only.
_NON_FINITE_TESTS = frozenset({"isnan", "isinf", "isposinf", "isneginf"})


#: Names in an ``if`` test that mean a wall-clock interval (``time.time() - last_log > 30``).
CLOCK_WORDS = re.compile(r"^(time|perf_counter|monotonic)$|elapsed|last_log|last_print", re.I)


@dataclass(frozen=True, slots=True)
class Guard:
    """How an ``if`` test limits the code under it."""

    #: ``periodic`` (every N steps, or a log/eval/save flag), ``once`` (``step == 0``) or
    #: ``rare`` (a non-finite value was found: ``if torch.isnan(grad_norm):``).
    kind: str
    #: True when the test is true on the periodic/once steps (``== 0``), False when inverted.
    fires_when_true: bool


def names_in(node: cst.CSTNode) -> Iterator[str]:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current.value
        stack.extend(children(current))


def _modulo_comparisons(node: cst.CSTNode) -> Iterator[tuple[cst.BinaryOperation, bool]]:
    """Every ``a % b`` in ``node`` with whether it is tested for being zero (positive)."""
    stack: list[tuple[cst.CSTNode, bool]] = [(node, True)]
    while stack:
        current, positive = stack.pop()
        if isinstance(current, cst.UnaryOperation) and isinstance(current.operator, cst.Not):
            stack.append((current.expression, not positive))
            continue
        if isinstance(current, cst.BinaryOperation) and isinstance(current.operator, cst.Modulo):
            # A bare `if x % n:` is true off the period.
            yield current, not positive
            continue
        if isinstance(current, cst.Comparison):
            inverted = any(isinstance(t.operator, cst.NotEqual) for t in current.comparisons)
            for child in (current.left, *(t.comparator for t in current.comparisons)):
                if isinstance(child, cst.BinaryOperation) and isinstance(
                    child.operator, cst.Modulo
                ):
                    yield child, positive != inverted
                else:
                    stack.append((child, positive))
            continue
        stack.extend((child, positive) for child in children(current))


#: id(test) -> (test, its guard): every call's walk up to its function asks again about the same
#: ``if`` tests. The node is kept so that a reused id is never mistaken for it; the memo is
#: dropped when it grows past `_GUARD_MEMO_SIZE` (one large module's tests fit).
_GUARDS: dict[int, tuple[cst.BaseExpression, Guard | None]] = {}


_GUARD_MEMO_SIZE = 20_000


def classify_guard(test: cst.BaseExpression) -> Guard | None:
    """What an ``if`` test means for code under it; None for configuration-like tests."""
    known = _GUARDS.get(id(test))
    if known is not None and known[0] is test:
        return known[1]
    if len(_GUARDS) >= _GUARD_MEMO_SIZE:
        _GUARDS.clear()
    guard = _classify_guard(test)
    _GUARDS[id(test)] = (test, guard)
    return guard


def _classify_guard(test: cst.BaseExpression) -> Guard | None:
    names = list(names_in(test))
    if any(ACCUMULATION_WORDS.search(name) for name in names):
        return None
    for _modulo, positive in _modulo_comparisons(test):
        return Guard("periodic", positive)
    anomaly = _anomaly_polarity(test)
    if anomaly is not None:
        return Guard("rare", anomaly)
    positive = True
    expression: cst.BaseExpression = test
    while isinstance(expression, cst.UnaryOperation) and isinstance(expression.operator, cst.Not):
        positive = not positive
        expression = expression.expression
    flag = _periodic_flag_guard(test)
    if flag is not None:
        return flag
    if any(PERIODIC_FLAG.search(name) for name in names):
        return Guard("periodic", positive)
    if isinstance(expression, cst.Comparison) and any(CLOCK_WORDS.search(n) for n in names):
        return Guard("periodic", positive)
    if isinstance(expression, cst.Comparison) and len(expression.comparisons) == 1:
        target = expression.comparisons[0]
        left = dotted_name(expression.left)
        if (
            isinstance(target.operator, cst.Equal)
            and isinstance(target.comparator, cst.Integer)
            and left is not None
            and STEP_COUNTER.match(last_part(left))
        ):
            return Guard("once", positive)
    return None


def _periodic_flag_guard(test: cst.BaseExpression) -> Guard | None:
    """A log/eval/save flag inside ``and``/``or``/``not``, read with the operators' meaning:
    ``not is_main or not control.should_log`` is true on the off-period steps (so an early
    ``return`` under it leaves the rest periodic); ``is_main and should_log`` is true on
    periodic steps only. None when the structure says neither."""
    positive = True
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        positive, test = not positive, test.expression
    if isinstance(test, cst.BooleanOperation):
        conjunction = isinstance(test.operator, cst.And)
        parts = [_periodic_flag_guard(part) for part in (test.left, test.right)]
        periodic = [g for g in parts if g is not None and g.kind == "periodic"]
        # `a and flag` true => flag true; `a or not flag` false => flag true.
        if any(g.fires_when_true == conjunction for g in periodic):
            return Guard("periodic", conjunction == positive)
        return None
    if isinstance(test, cst.Name | cst.Attribute):
        name = dotted_name(test)
        if name is not None and PERIODIC_FLAG.search(last_part(name)):
            return Guard("periodic", positive)
    return None


def _anomaly_polarity(test: cst.BaseExpression) -> bool | None:
    """True when ``test`` holds only on a non-finite value (``torch.isnan(g)``,
    ``not torch.isfinite(loss)``, ``math.isinf(x) and rank == 0``), False when it holds only on
    finite ones (``torch.isfinite(g).all()``); None when it says neither."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _anomaly_polarity(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = _anomaly_polarity(test.left), _anomaly_polarity(test.right)
        if isinstance(test.operator, cst.And):
            # `isnan(g) and is_main_process` is true only on the non-finite steps.
            return True if True in (left, right) and False not in (left, right) else None
        return True if left is True and right is True else None
    if isinstance(test, cst.Call):
        func = test.func
        # `torch.isnan(x).any()`, `torch.isfinite(x).all()`, `.item()`: the meaning is kept.
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in ("any", "all", "item")
            and isinstance(func.value, cst.Call)
        ):
            return _anomaly_polarity(func.value)
        name = dotted_name(func)
        # `bool(torch.isfinite(norm))` likewise.
        if name == "bool" and len(test.args) == 1:
            return _anomaly_polarity(test.args[0].value)
        if name is not None:
            if last_part(name) in _NON_FINITE_TESTS:
                return True
            if last_part(name) == "isfinite":
                return False
    return None


def is_exit_guard(statement: cst.CSTNode) -> bool:
    """``if not log_step: return``: leaves on the off-period steps."""
    if not (isinstance(statement, cst.If) and exits(statement.body)):
        return False
    guard = classify_guard(statement.test)
    return guard is not None and not guard.fires_when_true


def exits(suite: cst.BaseSuite) -> bool:
    """True when the suite ends by leaving the function or the loop iteration."""
    if isinstance(suite, cst.SimpleStatementSuite):
        last = suite.body[-1] if suite.body else None
    else:
        statement = suite.body[-1] if suite.body else None
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        last = statement.body[-1]
    return isinstance(last, cst.Return | cst.Continue | cst.Break | cst.Raise)
