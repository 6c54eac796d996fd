"""Does this code run on every training step?

Per-step contexts: the body of a ``for``/``while`` loop; a method that a framework calls every step
(the hook tables below); an optimizer wrapper's ``step()``; and any function or method of the
same module called from one of those (followed transitively, depth-limited and cycle-safe).

Guards change the answer only when they make the code periodic or one-off:

- ``x % n`` in the test of an ``if`` is periodic — unless a name in that test says
  gradient accumulation (``accum``, ``grad_acc``, ``update_freq``, ``micro_batch``,
  ``sync_gradients``...), which fires on every optimizer step. A modulo whose names say neither
  (``if it % k == 0``) counts as periodic: a missed report costs less than a false alarm.
- A boolean whose name says "log/eval/save now" (``should_log``, ``control.should_save``,
  ``do_eval``, ``is_logging_step``) is periodic; other flags (``args.amp``,
  ``scaler is not None``, ``rank == 0``) are configuration and change nothing.
- ``step == 0`` (a step-like name compared with an integer) runs once.
- A flag bound once to such a test and tested later (``apply_penalty = steps % 4 == 0`` ...
  ``if apply_penalty:``) limits the code as the test would.
- A wall-clock comparison (``time.time() - last_log > 30``) is periodic.
- A non-finite check (``if torch.isnan(grad_norm):``, ``if not torch.isfinite(loss).all():``,
  alone or and-ed with a flag) guards an error path that runs on the rare overflow steps only;
  the ``else`` of ``if torch.isfinite(...)`` likewise.
- A loop over epochs (``for epoch in range(cfg.epochs)``) runs its own body once per epoch;
  only loops nested in it are per-step. So does any loop or function that holds, in a nested
  loop, the ``<scaler>.step()``/``update()`` calls or a call of a function of this module that
  makes them (``for _ in range(ppo_epochs): run_update(...)``): the steps happen in that inner
  loop, and a
  read beside it (``train()`` reading the scale after its loop, called once per fold) is not
  per-step.
- A loop counts epochs when its target or the bounds of the ``range`` it counts say so
  (``for epoch in ...``, ``range(num_epochs)``); the name of what it walks does not
  (``for batch in tepoch``, a tqdm bar over one epoch's batches, is a step loop).
- A loop over a collection (``.items()``, ``.parameters()``, ``param_groups``, scalers) is not a
  step loop; the loop around it decides.
- An early ``return``/``continue``/``break`` under a periodic test (``if step % n != 0: return``,
  ``if not should_log: continue``) guards the rest of its block. So does one on a predicate
  method of the object, recognised by shape, not name (``if not self.should_update_logs(state):
  return``): when this module defines it, only if it returns a periodic or one-off test; when it
  is inherited from elsewhere, its period is unknown and the rest is not counted per step.

- A read cached on the first call (`linter.model.steps._run_once`: ``if self._scale is None:
  self._scale = ...``, an early ``return`` while cached, a ``functools.cache`` function) runs
  once, unless an assignment that unsets the cache again itself runs every step.

Only the guarded call matters: ``scale = scaler.get_scale()`` followed by
``if step % 100 == 0: print(scale)`` still reads every step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import libcst as cst

from linter.model.project import GENERIC_METHOD_NAMES, ModuleContext
from linter.model.steps._run_once import Memo, is_cached, memo_exit, memo_guard
from linter.model.steps._step_guards import Guard, classify_guard, exits, is_exit_guard
from linter.model.steps._step_loops import is_epoch_loop, is_traversal
from linter.model.syntax import (
    MAX_CALL_DEPTH,
    ImportAliases,
    ModuleIndex,
    bindings,
    descendants,
    dotted_name,
    import_aliases,
    last_part,
)

#: Lightning hooks (LightningModule and Callback) that run on every training batch/step.
LIGHTNING_PER_STEP_HOOKS = frozenset(
    {
        "training_step",
        "on_train_batch_start",
        "on_train_batch_end",
        "on_before_backward",
        "on_after_backward",
        "on_before_optimizer_step",
        "on_before_zero_grad",
        "optimizer_step",
        "optimizer_zero_grad",
    }
)

#: Hugging Face hooks run every step. ``on_log`` is deliberately absent: it runs every
#: ``logging_steps``, which is the periodic reading this rule recommends.
HF_PER_STEP_HOOKS = frozenset(
    {
        "on_step_begin",
        "on_step_end",
        "on_substep_end",
        "on_pre_optimizer_step",
        "on_optimizer_step",
        "training_step",
        "compute_loss",
    }
)

#: detectron2/fvcore trainer hooks (``HookBase``) and the trainer's own per-iteration method.
DETECTRON2_PER_STEP_HOOKS = frozenset({"before_step", "after_backward", "after_step", "run_step"})

#: Every hook name that makes a method per-step.
PER_STEP_HOOKS = LIGHTNING_PER_STEP_HOOKS | HF_PER_STEP_HOOKS | DETECTRON2_PER_STEP_HOOKS

#: MosaicML Composer events that fire on every batch (or every microbatch), from the event
#: pseudocode at https://docs.mosaicml.com/projects/composer/en/latest/trainer/events.html.
#: Names as plain as ``batch_end`` count only in a class deriving from a ``...Callback`` or
#: ``...Algorithm`` base, the two Composer classes whose methods are named after events.
COMPOSER_PER_STEP_EVENTS = frozenset(
    {
        "after_dataloader",
        "batch_start",
        "before_train_batch",
        "before_forward",
        "after_forward",
        "before_loss",
        "after_loss",
        "before_backward",
        "after_backward",
        "after_train_batch",
        "batch_end",
    }
)

#: Base-class name endings that make a method named after a Composer event an event handler.
_EVENT_HANDLER_BASES = ("Callback", "Algorithm")


#: Scaler methods that mark where the steps happen.
_STEP_METHODS = frozenset({"step", "update"})
#: ...and the one that makes a function a training step of its own (`_own_step`).
_STEP_ONLY = frozenset({"step"})


def _derives_from(cls: cst.ClassDef, endings: tuple[str, ...]) -> bool:
    """True when a base of ``cls`` is named ``...<one of endings>`` (``composer.Callback``)."""
    for base in cls.bases:
        name = dotted_name(base.value)
        if name is not None and last_part(name).endswith(endings):
            return True
    return False


class PerStepAnalysis:
    """Answers "does this node run every training step, and why?" for one module."""

    def __init__(
        self,
        context: ModuleContext,
        index: ModuleIndex,
        is_scaler_call: Callable[[cst.CSTNode, frozenset[str]], bool],
        *,
        use_project: bool = True,
    ) -> None:
        self._context = context
        self._index = index
        #: Whether callers in other modules count (the project's summaries); summaries themselves
        #: are built from the module alone.
        self._project = context.project if use_project else None
        #: Decides whether a Call is ``<scaler>.<one of methods>(...)``.
        self._is_scaler_call = is_scaler_call
        self._updates: list[cst.CSTNode] | None = None
        self._points: list[cst.CSTNode] | None = None
        self._hierarchy: dict[cst.ClassDef, set[cst.ClassDef]] | None = None
        self._instances: dict[str, cst.ClassDef | str] | None = None
        self._cache: dict[cst.CSTNode, str | None] = {}
        #: function -> the shallowest depth a search of its callers in this module started at
        #: and found no reason. A search from as deep or deeper has a smaller budget and finds
        #: none either: the functions it skips as already on its path are searches in progress
        #: (on this path too) or finished without a reason, and each new reason empties this
        #: memo. Without it, a module whose methods call each other by one name
        #: (`from_pretrained` in every class) searched the same callers once per path.
        self._unreached: dict[cst.FunctionDef, int] = {}
        #: simple statement -> `call_site`'s answer for its calls (see `_statement_line`).
        self._sites: dict[cst.SimpleStatementLine, tuple[str | None, bool]] = {}
        #: name -> whether an assignment binds it to a guard test (see `_is_guard_flag`).
        self._flags: dict[str, bool] = {}
        #: name -> the values the module's assignments bind it to, collected on first use.
        self._assigned: dict[str, list[cst.BaseExpression]] | None = None
        #: block -> (statement -> its rank, rank of the first exit guard or None).
        self._exit_guards: dict[cst.CSTNode, tuple[dict[cst.CSTNode, int], int | None]] = {}
        self._aliases: ImportAliases | None = None
        #: Memo guards and exits already judged: does the code they guard run once?
        self._once: dict[cst.If, bool] = {}

    def reason(self, node: cst.CSTNode) -> str | None:
        """Why ``node`` runs every step, in words for a message; None when it does not."""
        return self._reason(node, 0, frozenset())

    def function_reason(self, function: cst.FunctionDef) -> str | None:
        """Why ``function`` runs every step from within this module (a hook, a per-step caller
        here, or a scaler step of its own: `_own_step`), or None; callers in other modules are
        the project's to add. A summary records it, so a helper of another module that such a
        function calls runs every step through it."""
        if self._cached(function):
            return None
        hook = self._hook(function)
        if hook is not None:
            return hook
        for call in self._calls_to(function):
            why = self._reason(call, 1, frozenset({function}))
            if why is not None:
                return f"in `{function.name.value}()`, called {why}"
        return self._own_step(function)

    def call_site(self, call: cst.Call) -> tuple[str | None, bool]:
        """Whether a call site runs every step on its own (the reason), and whether it runs
        whenever its function runs (``open``: no loop, guard or step loop in between), so that
        the function's callers decide."""
        line = self._statement_line(call)
        known = self._sites.get(line) if line is not None else None
        if known is None:
            reason = self._reason(call, MAX_CALL_DEPTH, frozenset())
            known = reason, reason is None and self._inherits(call)
            if line is not None:
                self._sites[line] = known
        return known

    def _statement_line(self, call: cst.Call) -> cst.SimpleStatementLine | None:
        """The simple statement holding ``call`` with only expressions in between (no lambda):
        every call of that line gets the same answer from `call_site`, as the questions it
        asks (guards, loops, blocks, the function) start at the line. A line holds two or
        three calls on average."""
        for ancestor in self._index.ancestors(call):
            if isinstance(ancestor, cst.SimpleStatementLine):
                return ancestor
            if isinstance(ancestor, cst.Lambda | cst.BaseCompoundStatement):
                return None
        return None

    def guard(self, test: cst.BaseExpression) -> Guard | None:
        """`classify_guard`, also through a flag bound once to a guard and tested later
        (``apply_penalty = self.steps % 4 == 0`` ... ``if apply_penalty:``): the flag carries
        the test's period whatever its name says."""
        guard = classify_guard(test)
        if guard is not None:
            return guard
        positive = True
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            positive, test = not positive, test.expression
        if not isinstance(test, cst.Name) or not self._is_guard_flag(test.value):
            return None
        bound = bindings(self._index).visible(test)
        if len(bound) != 1 or not isinstance(bound[0], cst.Assign) or len(bound[0].targets) != 1:
            return None
        flag = classify_guard(bound[0].value)
        if flag is None:
            return None
        return Guard(flag.kind, flag.fires_when_true == positive)

    def _is_guard_flag(self, name: str) -> bool:
        """Whether some assignment of the module binds ``name`` to a guard test: only a test of
        such a name needs the scope pass (`bindings`), which costs more than the rest of a
        summary. Judged per name asked about: classifying every assignment's value up front was
        a tenth of a summary's time (large literals walked for nothing)."""
        if self._assigned is None:
            self._assigned = {}
            for assign in self._index.nodes(cst.Assign):
                for target in assign.targets:
                    if isinstance(target.target, cst.Name):
                        self._assigned.setdefault(target.target.value, []).append(assign.value)
        known = self._flags.get(name)
        if known is None:
            values = self._assigned.get(name, ())
            known = self._flags[name] = any(classify_guard(value) is not None for value in values)
        return known

    def _inherits(self, node: cst.CSTNode) -> bool:
        child = node
        for ancestor in self._index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return not self._cached(ancestor) and not self._steps_in_nested_loop(ancestor, node)
            if isinstance(ancestor, cst.Lambda | cst.ClassDef | cst.For | cst.While):
                return False
            if isinstance(ancestor, cst.If) and (
                self.guard(ancestor.test) is not None
                or (child is ancestor.body and self._memo_once(ancestor))
            ):
                return False
            if isinstance(ancestor, cst.IndentedBlock) and self._guarded_by_exit(ancestor, child):
                return False
            child = ancestor
        return False

    def _line(self, node: cst.CSTNode) -> int:
        return self._context.line_and_column(node)[0]

    def _reason(
        self, node: cst.CSTNode, depth: int, visiting: frozenset[cst.FunctionDef]
    ) -> str | None:
        loop: cst.For | cst.While | None = None
        function: cst.FunctionDef | None = None
        child = node
        for ancestor in self._index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                function = ancestor
                break
            if isinstance(ancestor, cst.Lambda | cst.ClassDef):
                return None
            if isinstance(ancestor, cst.If):
                guard = self.guard(ancestor.test)
                if guard is not None:
                    in_body = child is ancestor.body
                    if in_body == guard.fires_when_true and (in_body or child is ancestor.orelse):
                        return None
                if child is ancestor.body and self._memo_once(ancestor):
                    return None
            elif isinstance(ancestor, cst.IndentedBlock | cst.Module) and self._guarded_by_exit(
                ancestor, child
            ):
                return None
            elif (
                isinstance(ancestor, cst.For | cst.While)
                and child is ancestor.body
                and loop is None
                and not is_traversal(ancestor)
            ):
                loop = ancestor
            child = ancestor
        if loop is not None:
            if is_epoch_loop(loop) or self._steps_in_nested_loop(loop, node):
                return None
            return f"inside the loop at line {self._line(loop)}"
        if function is None or self._cached(function):
            return None
        if self._steps_in_nested_loop(function, node):
            return None
        hook = self._hook(function)
        if hook is not None:
            return hook
        if depth >= MAX_CALL_DEPTH or function in visiting:
            return None
        if function in self._cache:
            return self._cache[function]
        found = None
        if self._unreached.get(function, MAX_CALL_DEPTH) > depth:
            for call in self._calls_to(function):
                why = self._reason(call, depth + 1, visiting | {function})
                if why is not None:
                    found = f"in `{function.name.value}()`, called {why}"
                    break
            if found is None:
                self._unreached[function] = depth
        if found is None and depth == 0 and self._project is not None:
            found = self._project.per_step_reason(self._context, function)
        if found is not None:
            # A new reason may reach what was unreached before: those searches are redone.
            self._unreached.clear()
        else:
            found = self._own_step(function)
        if depth == 0 or found is not None:
            self._cache[function] = found
        return found

    def _own_step(self, function: cst.FunctionDef) -> str | None:
        """(Issue 42, class 1.) ``function`` steps the GradScaler itself, once per call: a
        ``<scaler>.step(...)`` in its own body, in no loop of its own. Such a function *is* one
        training step (a model's ``optimize_parameters(current_iter)``, a wrapper's
        ``backward_clip_step()``, a subclass's ``train_step``), whoever calls it: the loop may
        reach it through a registry (``model = build_model(opt)``) that no analysis follows."""
        for call in self._scaler_updates():
            if self._index.enclosing_function(call) is not function or not self._is_scaler_call(
                call, _STEP_ONLY
            ):
                continue
            looped = False
            for ancestor in self._index.ancestors(call):
                if ancestor is function:
                    break
                looped |= isinstance(ancestor, cst.For | cst.While)
            if not looped:
                return (
                    f"in `{function.name.value}()`, which is one training step: it steps the "
                    "GradScaler once per call"
                )
        return None

    def _steps_in_nested_loop(self, container: cst.CSTNode, node: cst.CSTNode) -> bool:
        """True when a loop inside ``container``, not around ``node``, steps the scaler, itself
        or through a function of this module that does (``for _ in range(ppo_epochs):
        run_update(...)`` before a read once per round)."""
        around = set(self._index.ancestors(node))
        for call in self._step_points():
            for ancestor in self._index.ancestors(call):
                if ancestor is container or isinstance(ancestor, cst.FunctionDef | cst.Lambda):
                    break
                if isinstance(ancestor, cst.For | cst.While) and ancestor not in around:
                    if container in self._index.ancestors(ancestor):
                        return True
                    break
        return False

    def _step_points(self) -> list[cst.CSTNode]:
        """``<scaler>.step()``/``update()`` calls, and the calls of this module's functions that
        make them (followed up to ``MAX_CALL_DEPTH`` callers up)."""
        if self._points is None:
            points = list(self._scaler_updates())
            # Taking away {None} leaves only functions, which mypy cannot see through the `-`.
            stepping = cast(
                "set[cst.FunctionDef]",
                {self._index.enclosing_function(call) for call in points} - {None},
            )
            frontier = set(stepping)
            for _ in range(MAX_CALL_DEPTH):
                reached: set[cst.FunctionDef] = set()
                for function in frontier:
                    for call in self._calls_to(function):
                        points.append(call)
                        caller = self._index.enclosing_function(call)
                        if caller is not None and caller not in stepping:
                            stepping.add(caller)
                            reached.add(caller)
                frontier = reached
            self._points = points
        return self._points

    def _scaler_updates(self) -> list[cst.CSTNode]:
        if self._updates is None:
            self._updates = [
                call
                for call in self._index.nodes(cst.Call)
                if self._is_scaler_call(call, _STEP_METHODS)
            ]
        return self._updates

    def _guarded_by_exit(self, block: cst.IndentedBlock | cst.Module, child: cst.CSTNode) -> bool:
        """Whether an ``if <off-period>: return``-style statement comes before ``child``."""
        if block not in self._exit_guards:
            # Once per block, not once per read: a file with thousands of reads in one loop body
            # would otherwise rescan the body for each of them (quadratic).
            positions: dict[cst.CSTNode, int] = {
                statement: rank for rank, statement in enumerate(block.body)
            }
            first = next(
                (
                    rank
                    for rank, statement in enumerate(block.body)
                    if is_exit_guard(statement)
                    or self._is_predicate_gate(statement)
                    or self._is_memo_exit(statement, tuple(block.body[rank + 1 :]))
                ),
                None,
            )
            self._exit_guards[block] = (positions, first)
        positions, first = self._exit_guards[block]
        rank = positions.get(child)
        return first is not None and rank is not None and first < rank

    def _cached(self, function: cst.FunctionDef) -> bool:
        """``@functools.cache`` and kin: the body runs once per distinct argument."""
        if not function.decorators:
            return False
        if self._aliases is None:
            index = self._index
            self._aliases = import_aliases(index)
        return is_cached(function, self._aliases)

    def _memo_once(self, statement: cst.If) -> bool:
        """``if self._scale is None: self._scale = ...``: the body runs on the first pass only."""
        if statement not in self._once:
            self._once[statement] = False  # a reset judged while judging this guard: not once
            self._once[statement] = self._kept(memo_guard(self._index, statement))
        return self._once[statement]

    def _is_memo_exit(self, statement: cst.CSTNode, rest: tuple[cst.CSTNode, ...]) -> bool:
        """``if self._scale is not None: return self._scale`` before the statements that set it:
        they run until the value is cached."""
        if not (isinstance(statement, cst.If) and exits(statement.body)):
            return False
        if statement not in self._once:
            self._once[statement] = False
            self._once[statement] = self._kept(memo_exit(self._index, statement, rest))
        return self._once[statement]

    def _kept(self, memo: Memo | None) -> bool:
        """A cached value that nothing unsets on every step (a reset in ``__init__`` or before
        the loop only initialises it)."""
        return memo is not None and not any(
            self._reason(reset, 0, frozenset()) is not None for reset in memo.resets
        )

    def _is_predicate_gate(self, statement: cst.CSTNode) -> bool:
        """``if not self.should_update_logs(state): return``: an early exit on a predicate
        method of the object. When this module defines the method, it gates the rest only if
        it returns a periodic or one-off test (``return state.global_step % self.every == 0``);
        a method inherited from elsewhere is a gate whose period is not known (stay silent)."""
        if not (isinstance(statement, cst.If) and exits(statement.body)):
            return False
        test = statement.test
        if not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
            return False
        call = test.expression
        if not isinstance(call, cst.Call):
            return False
        name = dotted_name(call.func)
        if name is None or not name.startswith("self.") or name.count(".") != 1:
            return False
        method = last_part(name)
        defined = [
            function
            for function in self._index.nodes(cst.FunctionDef)
            if function.name.value == method
        ]
        if not defined:
            return True
        return any(
            isinstance(node, cst.Return)
            and node.value is not None
            and (guard := classify_guard(node.value)) is not None
            and guard.fires_when_true
            for function in defined
            for node in descendants(function)
        )

    def _hook(self, function: cst.FunctionDef) -> str | None:
        cls = self._index.enclosing_class(function.body)
        if cls is None:
            return None
        name = function.name.value
        if name in PER_STEP_HOOKS or (
            name in COMPOSER_PER_STEP_EVENTS and _derives_from(cls, _EVENT_HANDLER_BASES)
        ):
            return f"in `{name}()`, a hook the training framework calls every step"
        if name == "step" and self._is_optimizer_wrapper(cls):
            return "in an optimizer wrapper's `step()`, which runs every training step"
        return None

    def _is_optimizer_wrapper(self, cls: cst.ClassDef) -> bool:
        for base in cls.bases:
            name = dotted_name(base.value)
            if name is not None and last_part(name).endswith("Optimizer"):
                return True
        return any(
            self._is_scaler_call(call, frozenset({"step"}))
            and self._index.enclosing_class(call) is cls
            for call in self._index.nodes(cst.Call)
        )

    def _family(self, cls: cst.ClassDef) -> set[cst.ClassDef]:
        """``cls`` with its base and derived classes defined in this module."""
        if self._hierarchy is None:
            classes: list[cst.ClassDef] = self._index.nodes(cst.ClassDef)
            by_name = {c.name.value: c for c in classes}
            bases = {
                c: {
                    by_name[name]
                    for base in c.bases
                    if (name := dotted_name(base.value)) in by_name
                }
                for c in classes
            }

            def ancestors(c: cst.ClassDef, seen: set[cst.ClassDef]) -> set[cst.ClassDef]:
                for base in bases[c] - seen:
                    seen.add(base)
                    ancestors(base, seen)
                return seen

            self._hierarchy = {c: ancestors(c, set()) for c in classes}
        related = {cls, *self._hierarchy.get(cls, set())}
        related.update(c for c, above in self._hierarchy.items() if cls in above)
        return related

    def _calls_to(self, function: cst.FunctionDef) -> list[cst.Call]:
        name = function.name.value
        cls = self._index.enclosing_class(function.body)
        if cls is None:
            return self._index.calls_named(name)
        calls = []
        family = self._family(cls)
        for call in self._index.calls_named("." + name):
            receiver = dotted_name(call.func.value)  # type: ignore[attr-defined]  # calls_named(".m") holds attribute calls only
            if receiver in ("self", "cls"):
                if self._index.enclosing_class(call) in family:
                    calls.append(call)
                continue
            # `self.task.train_step()` runs another object's method: it counts only when this
            # module shows the attribute holds an instance of this class (or a relative).
            instance = self._instance_class(receiver) if receiver is not None else None
            if instance is not None:
                if instance in family:
                    calls.append(call)
            elif (
                receiver is not None
                and not receiver.startswith(("self.", "cls."))
                and name not in GENERIC_METHOD_NAMES
            ):
                calls.append(call)
        return calls

    def _instance_class(self, receiver: str) -> cst.ClassDef | str | None:
        """The class of this module whose instance ``receiver`` is assigned (``self.task =
        Task(...)``), ``"other"`` when it is assigned an instance of another class, or None."""
        if self._instances is None:
            classes = {c.name.value: c for c in self._index.nodes(cst.ClassDef)}
            instances: dict[str, cst.ClassDef | str] = {}
            for assign in self._index.nodes(cst.Assign):
                value = assign.value
                if not isinstance(value, cst.Call):
                    continue
                callee = dotted_name(value.func)
                if callee is None or not last_part(callee)[:1].isupper():
                    continue
                kind = classes.get(callee, "other")
                for target in assign.targets:
                    target_name = dotted_name(target.target)
                    if target_name is not None:
                        instances[target_name] = kind
            self._instances = instances
        return self._instances.get(receiver)
