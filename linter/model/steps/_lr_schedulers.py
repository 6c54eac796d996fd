"""Learning-rate schedulers: which calls step one, and whether a step is held back when the
optimizer step it follows was skipped.

`GradScaler.step(optimizer)` skips the optimizer step when the gradients hold inf/NaN, and says so
only through its return value (``None``) and the scale going down in ``update()``. A scheduler
stepped after it regardless advances the schedule for a step that never happened. Code that
knows this holds the scheduler back with a *skip check*:

- a test that reads the scaler's scale or skip flag: ``if scale_before <= scaler.get_scale():``,
  ``if not scaler.step_skipped():`` (ampscale), ``scaler._found_inf_per_device(...)``;
- a test of a name bound from one (``optimizer_was_run = scale_before <= scaler.get_scale()``) or
  from ``scaler.step(...)``'s return value, or a name that says so (``skipped``, ``overflow``,
  ``found_inf``, ``optimizer_step_was_skipped``), or a non-finite check (``torch.isfinite``) after
  the scaled backward (one on the loss before it misses the overflow the scale causes);
- the same tests in an early ``continue``/``return`` before the scheduler's step.

Schedulers that hold themselves back are not manual steps: ampscale's ``SkipAwareScheduler``, a
scheduler returned by ``accelerator.prepare`` (Accelerate's ``AcceleratedScheduler`` skips when
the optimizer step was skipped) or by ``deepspeed.initialize`` (the engine steps it).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator

import libcst as cst

from linter.model.steps._step_guards import ACCUMULATION_WORDS, classify_guard, exits
from linter.model.syntax import (
    ImportAliases,
    ModuleIndex,
    dotted_name,
    import_aliases,
    last_part,
    walk,
)
from linter.model.values import ScalerReceivers

#: Qualified-name shapes of scheduler factories: torch's ``torch.optim.lr_scheduler.*``,
#: transformers' ``get_*_schedule_with_warmup``/``get_scheduler``, timm's and detectron2's
#: ``create_scheduler``/``build_lr_scheduler``, and classes named ``...LR``/``...Scheduler``.
SCHEDULER_CONSTRUCTOR = re.compile(
    r"(^|\.)lr_scheduler\.|(^|\.)get_\w*schedule|schedul\w*$|[a-z]LR$", re.IGNORECASE
)
#: Names that hold a scheduler by convention: ``scheduler``, ``lr_scheduler``, ``self.sched``,
#: ``scheduler_g``, ``warmup_scheduler``.
SCHEDULER_NAME = re.compile(r"^_*(\w+_)?(lr_)?sched(uler)?(_\w+|\d+)?$", re.IGNORECASE)
#: ampscale's scheduler wrapper that advances only for applied optimizer steps.
SKIP_AWARE_CONSTRUCTORS = frozenset(
    {"scaler.SkipAwareScheduler", "ampscale.SkipAwareScheduler", "SkipAwareScheduler"}
)
#: Calls whose results include a scheduler that the framework holds back or steps itself.
FRAMEWORK_OWNERS = frozenset({"prepare", "initialize"})
#: Scaler methods and attributes whose value says whether the last step was skipped.
SKIP_SIGNALS = frozenset(
    {"get_scale", "step_skipped", "peek_scale", "_scale", "_found_inf_per_device", "found_inf"}
)
#: Names that say the step was (not) applied.
SKIP_WORDS = re.compile(
    r"skip|was_run|overflow|found_inf|(^|_)(infs?|nan)($|_)|isnan|finite|stepped|did_step|"
    r"step_applied",
    re.IGNORECASE,
)


class Hold(enum.Enum):
    """What the code between a scheduler step and its iteration's start says about skipping."""

    #: Nothing holds the step back: it runs on a skipped optimizer step too.
    NEVER = "never"
    #: A skip check holds it back.
    SKIP_CHECK = "skip check"
    #: A test the model cannot read (a periodic guard, an unknown flag): unknown stays unknown.
    UNKNOWN = "unknown"


class LrSchedulers:
    """The scheduler steps of one module and the skip checks around them."""

    def __init__(
        self, index: ModuleIndex, aliases: ImportAliases, receivers: ScalerReceivers
    ) -> None:
        self._index = index
        self._aliases = aliases
        self._receivers = receivers
        #: Dotted names assigned a scheduler constructor.
        self.constructed: set[str] = set()
        #: Dotted names bound to a scheduler that holds itself back (see the module docstring),
        #: with the function that binds them (None: the module). A plain name is that
        #: function's local: a parameter of the same name elsewhere is another scheduler.
        self.self_holding: set[tuple[cst.CSTNode | None, str]] = set()
        #: Names bound from the scaler's skip signals or ``scaler.step()``'s result.
        self._skip_flags: set[str] = set()
        #: Dotted names assigned something that is no scheduler (``sched = Config()``).
        self._other: set[str] = set()
        for assign in index.nodes(cst.Assign):
            self._record(assign)

    def _record(self, assign: cst.Assign) -> None:
        value = assign.value
        targets = [
            name
            for target in assign.targets
            for element in _elements(target.target)
            if (name := dotted_name(element)) is not None
        ]
        callee = dotted_name(value.func) if isinstance(value, cst.Call) else None
        qualified = self._aliases.qualify(callee) if callee else ""
        if qualified in SKIP_AWARE_CONSTRUCTORS or last_part(qualified) in FRAMEWORK_OWNERS:
            function = self._index.enclosing_function(assign)
            self.self_holding.update(
                (function if "." not in name else None, name) for name in targets
            )
            return  # a scheduler, though its class says "Skip": no flag
        if qualified and SCHEDULER_CONSTRUCTOR.search(qualified):
            self.constructed.update(targets)
            return
        if qualified[:1].isupper() or last_part(qualified)[:1].isupper():
            self._other.update(targets)
        if self.reads_skip_signal(value):
            self._skip_flags.update(targets)

    def is_scheduler(self, node: cst.BaseExpression) -> bool:
        """``node`` holds an LR scheduler that does not hold itself back."""
        name = dotted_name(node)
        if name is None or self._holds_itself_back(name, node):
            return False
        if name in self.constructed:
            return True
        return name not in self._other and SCHEDULER_NAME.match(last_part(name)) is not None

    def _holds_itself_back(self, name: str, node: cst.CSTNode) -> bool:
        # The function that binds it, or one it encloses (a closure reads its locals).
        return (None, name) in self.self_holding or any(
            (ancestor, name) in self.self_holding
            for ancestor in self._index.ancestors(node)
            if isinstance(ancestor, cst.FunctionDef)
        )

    def steps(self) -> Iterator[cst.Call]:
        """``<scheduler>.step()`` calls with no arguments (``step(metric)`` is a plateau
        scheduler, ``step(epoch)`` an epoch schedule), in source order."""
        for call in self._index.calls_named(".step"):
            if not call.args and self.is_scheduler(call.func.value):  # type: ignore[attr-defined]
                yield call

    def counted_steps(self, scopes: Iterable[cst.CSTNode]) -> dict[cst.Call, cst.CSTNode]:
        """``<scheduler>.step(counter)`` calls, each with the one of ``scopes`` (iterations'
        loops or functions) around it whose passes advance the counter: a name the scope
        increments (``self.stats.steps += 1``, joeynmt) or the loop's own index (``for i, batch
        in enumerate(loader)``). Such a scheduler advances as one stepped without an argument
        does; a metric (``step(val_loss)``) or an epoch (``step(epoch)``) does not."""
        candidates = [
            call
            for call in self._index.calls_named(".step")
            if len(call.args) == 1
            and not call.args[0].keyword
            and not call.args[0].star
            and dotted_name(call.args[0].value) is not None
            and self.is_scheduler(call.func.value)  # type: ignore[attr-defined]
        ]
        if not candidates:
            return {}
        wanted = set(scopes)
        increments = [
            node
            for node in self._index.nodes(cst.AugAssign)
            if isinstance(node.operator, cst.AddAssign)
        ]
        found: dict[cst.Call, cst.CSTNode] = {}
        for call in candidates:
            counter = dotted_name(call.args[0].value)
            for scope in self._index.ancestors(call):
                if scope not in wanted:
                    continue
                bumped = any(
                    dotted_name(node.target) == counter and scope in self._index.ancestors(node)
                    for node in increments
                )
                if bumped or counter == _loop_index(scope):
                    found[call] = scope
                break
        return found

    def reads_skip_signal(self, node: cst.CSTNode) -> bool:
        """``node`` reads whether a step was skipped: a scaler's scale or skip flag,
        ``scaler.step(...)``'s result, a non-finite test, or a name bound from one."""
        for part in walk(node):
            if isinstance(part, cst.Attribute):
                if part.attr.value in SKIP_SIGNALS and self._receivers.looks_like(part.value):
                    return True
                if part.attr.value == "step" and self._receivers.looks_like(part.value):
                    return True
            name = dotted_name(part) if isinstance(part, cst.Name | cst.Attribute) else None
            if name is not None and (
                name in self._skip_flags or SKIP_WORDS.search(last_part(name))
            ):
                return True
        return False

    def hold(
        self,
        call: cst.Call,
        scope: cst.CSTNode,
        backward: cst.CSTNode | None = None,
        steps: Iterable[cst.CSTNode] = (),
    ) -> Hold:
        """Whether anything between ``scope`` (the iteration's loop or function) and ``call``
        holds the scheduler step back on a skipped optimizer step.

        ``backward`` is where the iteration runs its scaled backward. An exit before it
        (``if not torch.isfinite(loss): raise``) tests the loss, not the step's outcome: a
        finite loss times the scale still overflows in the backward, and that step is
        skipped as well. ``steps`` are where it runs the scaler's step: a test that guards
        one of them in the same arm as ``call`` (``if (i + 1) % multiplier == 0:``, whatever
        its name) runs the scheduler with that step, skipped or not, unless it is a skip
        check itself."""
        child: cst.CSTNode = call
        found = Hold.NEVER
        # The statement of each block around the backward that holds it.
        holding = {} if backward is None else _statements_holding(self._index, backward)
        around_steps = {a for step in steps for a in self._index.ancestors(step)}
        for ancestor in self._index.ancestors(call):
            if ancestor is scope:
                break
            if isinstance(ancestor, cst.If):
                hold = self._test_hold(ancestor.test, call)
                if hold is Hold.UNKNOWN and child in around_steps:
                    hold = Hold.NEVER  # the scaler's step is under the same test
                found = _worst(found, hold)
            elif isinstance(ancestor, cst.IndentedBlock):
                ahead = holding.get(ancestor)  # statements before it end before the backward
                before_backward = ahead is not None
                for statement in ancestor.body:
                    if statement is child:
                        break
                    if statement is ahead:
                        before_backward = False
                    if before_backward:
                        continue  # it cannot see the step's outcome
                    if (
                        isinstance(statement, cst.If)
                        and exits(statement.body)
                        and self.reads_skip_signal(statement.test)
                    ):
                        return Hold.SKIP_CHECK
            child = ancestor
        return found

    def _test_hold(self, test: cst.BaseExpression, call: cst.Call) -> Hold:
        if self.reads_skip_signal(test):
            return Hold.SKIP_CHECK
        if classify_guard(test) is not None:
            return Hold.UNKNOWN  # periodic or one-off: not every iteration anyway
        names = [dotted_name(part) for part in walk(test) if isinstance(part, cst.Name)]
        if any(name and ACCUMULATION_WORDS.search(name) for name in names):
            return Hold.NEVER  # the accumulation boundary runs on every optimizer step
        scheduler = dotted_name(call.func.value)  # type: ignore[attr-defined]
        spelled = {dotted_name(p) for p in walk(test) if isinstance(p, cst.BaseExpression)}
        if scheduler and scheduler in spelled:
            return Hold.NEVER  # `if scheduler is not None:`
        if _is_flag(test) or _is_setting_comparison(test):
            return Hold.NEVER  # `if args.use_scheduler:`: configuration, not the step's outcome
        return Hold.UNKNOWN


def _statements_holding(index: ModuleIndex, node: cst.CSTNode) -> dict[cst.CSTNode, cst.CSTNode]:
    """Each block around ``node``, with its statement that holds ``node``."""
    found: dict[cst.CSTNode, cst.CSTNode] = {}
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.IndentedBlock | cst.Module):
            found[ancestor] = child
        child = ancestor
    return found


def _worst(a: Hold, b: Hold) -> Hold:
    """A skip check anywhere wins; else an unknown test keeps the answer unknown."""
    for hold in (Hold.SKIP_CHECK, Hold.UNKNOWN):
        if hold in (a, b):
            return hold
    return Hold.NEVER


def _is_flag(test: cst.BaseExpression) -> bool:
    """A dotted name, negated or not: ``args.warmup``, ``not self.cfg.fixed_lr``."""
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    return dotted_name(test) is not None


def _is_setting_comparison(test: cst.BaseExpression) -> bool:
    """A setting compared with a string or ``None`` (``self.step_after == "batch"``,
    ``cfg.metric is None``, ``mode in ("step", "batch")``), alone or joined by ``and``/``or``:
    the same answer on every iteration of a run, so it says nothing about a skipped step."""
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if isinstance(test, cst.BooleanOperation):
        return all(
            _is_flag(part) or _is_setting_comparison(part) for part in (test.left, test.right)
        )
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    comparator = test.comparisons[0].comparator
    if isinstance(comparator, cst.Tuple | cst.List | cst.Set):
        settings = [element.value for element in comparator.elements]
    else:
        settings = [comparator]
    return (
        dotted_name(test.left) is not None
        and bool(settings)
        and all(_is_setting(value) for value in settings)
    )


def _is_setting(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.SimpleString) or (
        isinstance(value, cst.Name) and value.value == "None"
    )


def _loop_index(scope: cst.CSTNode) -> str | None:
    """The name a ``for`` loop counts its passes in: ``i`` of ``for i in range(n)`` or of
    ``for i, batch in enumerate(loader)``."""
    if not isinstance(scope, cst.For) or not isinstance(scope.iter, cst.Call):
        return None
    callee = dotted_name(scope.iter.func)
    target = scope.target
    if callee == "enumerate" and isinstance(target, cst.Tuple) and target.elements:
        return dotted_name(target.elements[0].value)
    return dotted_name(target) if callee == "range" else None


def _elements(target: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(target, cst.Tuple | cst.List):
        for element in target.elements:
            yield from _elements(element.value)
    else:
        yield target


def lr_schedulers(index: ModuleIndex, receivers: ScalerReceivers) -> LrSchedulers:
    """The module's `LrSchedulers`, built once and shared."""
    return index.shared(
        LrSchedulers,
        lambda: LrSchedulers(index, import_aliases(index), receivers),
    )
