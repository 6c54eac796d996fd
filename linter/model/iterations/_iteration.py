"""One training iteration as an ordered list of events: the shared model of the AMP recipe rules.

PyTorch's AMP recipes are statements about the order of a few calls within one optimizer step:
``scaler.scale(loss).backward()``, then ``scaler.unscale_(opt)`` before anything reads or
clips the gradients, then ``scaler.step(opt)`` for every optimizer and ``scaler.update()`` once.
The rules AMP003 and AMP005–AMP007 are small queries over the model built here, once per module:

- **Events** are the calls that matter, each with the scaler and optimizer it touches (as their
  dotted source text, ``self.scaler``, ``optimizer_g``): a scaled or plain backward, ``unscale_``,
  a gradient clip, a scaler or optimizer step, ``update``, ``zero_grad``, and a read of gradient
  values that something looks at (``p.grad.norm()`` logged,
  `linter.model.iterations._gradient_reads`).
- **An iteration** is the region that runs once per optimizer step: the innermost loop around a
  step (``scaler.step``, ``optimizer.step()``, ``update``) that is not a loop over optimizers,
  models or parameters, or — without such a loop — the function that makes the step (a
  ``train_step(batch)``, a Lightning hook, an optimizer wrapper's ``step``). Events in loops
  nested in it (a micro-batch loop of gradient accumulation) belong to it too.
- **Calls of this module's functions** inside an iteration (``self.backward(loss)``,
  ``clip_gradients(model)``) bring the callee's events, placed at the call, a few calls deep:
  trainers split one iteration across methods.

Order and branches come from `PathFacts`: ``iteration.may_precede(a, b)`` (some execution runs
``a`` and later ``b``) and ``iteration.exclusive(a, b)`` (``if scaler is not None: scaled
backward else: plain backward``).

Not events: wrappers that follow the recipe themselves — ``accelerator.backward(loss)``,
``accelerator.clip_grad_norm_``, Lightning's ``manual_backward`` and ``clip_gradients``, a
DeepSpeed engine's ``backward(loss)``/``step()`` — so their loops are not "manual" iterations.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import libcst as cst

from linter.model.iterations._accelerate_backwards import bound_accelerators
from linter.model.iterations._gradient_reads import gradient_reads
from linter.model.iterations._iteration_events import (
    CLIP_FUNCTIONS,
    STEP_KINDS,
    Event,
    Iteration,
    Kind,
)
from linter.model.project import METHOD_WORDS, ModuleContext
from linter.model.steps import TRAVERSED_COLLECTIONS
from linter.model.syntax import (
    MAX_CALL_DEPTH,
    Fact,
    ModuleIndex,
    children,
    descendants,
    dotted_name,
    import_aliases,
    last_part,
    module_index,
    path_facts,
)
from linter.model.values import scaler_receivers

#: Words a function of another module must mention for its events to matter here.
_EVENT_WORDS = (
    "backward",
    "step",
    "update",
    "unscale_",
    "clip_grad",
    "zero_grad",
    ".grad",  # gradient reads: p.grad.norm(), add_histogram(name, p.grad, step)
    "get_total_norm",
)

#: Collections whose elements are parts of one step (``for opt in optimizers:``).
_PER_ELEMENT = re.compile(r"optimi[sz]ers|optims|scalers|models|losses", re.I)

#: A dict's views: a loop over one walks its entries, which may be whole steps.
_DICT_VIEWS = frozenset({"items", "keys", "values"})


#: Receivers whose clip/backward/step methods apply the AMP recipe themselves (Accelerate,
#: Lightning, Fabric, DeepSpeed, Trainer wrappers): their calls are not events.
_RECIPE_WRAPPER = re.compile(
    r"(^|_)(accelerator|fabric|strategy|trainer|engine|model_engine|deepspeed|precision|"
    r"precision_plugin|optim_wrapper|optimizer_wrapper|amp)$",
    re.IGNORECASE,
)

#: Names that hold an optimizer by convention: ``optimizer``, ``opt``, ``optim``,
#: ``self.optimizer_g``, ``d_optimizer``, ``opt1``.
_OPTIMIZER_NAME = re.compile(r"(^|_)(optimi[sz]er|optim|opt)s?(_[a-z0-9]+|\d+)?$", re.IGNORECASE)
#: ...and names that do not, though they end in ``step()``-able objects: schedulers, scalers.
_NOT_OPTIMIZER = re.compile(r"sched|scaler|lr|warmup|ema|swa|wrapper", re.IGNORECASE)

#: Constructors whose result is an optimizer: ``torch.optim.AdamW``, ``bnb.optim.AdamW8bit``,
#: ``timm.optim.create_optimizer_v2``, ``transformers.AdamW``...
_OPTIMIZER_CONSTRUCTOR = re.compile(r"(^|\.)optim(izers?)?\.|(^|\.)create_optimizer|Optimizer$")
#: ...but not the schedulers and averaged models that live beside them (``torch.optim.
#: lr_scheduler.StepLR``, ``torch.optim.swa_utils.AveragedModel``).
_NOT_OPTIMIZER_CONSTRUCTOR = re.compile(r"sched|swa_utils", re.IGNORECASE)


class TrainingIterations:
    """Every iteration of a module, with its events (built once per module, see `of_module`)."""

    def __init__(self, context: ModuleContext, index: ModuleIndex) -> None:
        self._context = context
        self._index = index
        self.aliases = import_aliases(index)
        self.receivers = scaler_receivers(index)
        #: Names the module binds to an ``Accelerator(...)``: recipe wrappers, whatever their name.
        self._accelerators = bound_accelerators(index)
        self.facts = path_facts(index)
        self._optimizers = self._optimizer_names()
        self._scaled = self._scaled_loss_names()
        self._reads = gradient_reads(index, self.aliases, CLIP_FUNCTIONS)
        #: Every event written in the module, in source order.
        self.events: list[Event] = [e for call in index.nodes(cst.Call) for e in self._event(call)]
        self._by_call = {event.call: event for event in self.events}
        self._scopes: dict[cst.CSTNode, None] = {}
        #: `_loops_over_a_collection`'s answers, per loop and number of events known (grafting
        #: adds events): asked for every event a loop holds.
        self._collection_loops: dict[tuple[cst.For, int], bool] = {}
        #: Events of called functions that run in those functions' own loops (no iteration here).
        self._own_loops: list[Event] = []
        self._functions = self._functions_by_name()
        self.iterations: list[Iteration] = self._iterations()
        # Events of functions grafted from other modules count as the module's own from here on
        # (each once, as written in its grafted function; those of its own loops too, outside
        # every iteration here), so rules that start from the events
        # of a kind find them; their positions map to the local call that brings them.
        written = {event.call for event in self.events}
        grafted = [event for iteration in self.iterations for event in iteration.events]
        for event in grafted + self._own_loops:
            if event.call in self._context.foreign and event.call not in written:
                written.add(event.call)
                self.events.append(Event(event.kind, event.call, event.scaler, event.optimizer))
                self._by_call[event.call] = self.events[-1]

    # -- what a call is ------------------------------------------------------------------------

    def _event(self, call: cst.Call) -> Iterator[Event]:
        func = call.func
        name = dotted_name(func)
        if name is not None and self.aliases.qualify(name) in CLIP_FUNCTIONS:
            yield Event(Kind.CLIP, call)
            return
        if name == "torch.autograd.backward" or (
            name is not None and self.aliases.qualify(name) == "torch.autograd.backward"
        ):
            yield Event(Kind.BACKWARD, call)
            return
        if self._reads.reads(call):
            if self._reads.observed(call):
                yield Event(Kind.GRAD_READ, call)
            return
        if not isinstance(func, cst.Attribute):
            return
        method, receiver = func.attr.value, func.value
        receiver_name = dotted_name(receiver)
        if method == "backward":
            yield from self._backward(call, receiver)
        elif (
            receiver_name is None
            or _RECIPE_WRAPPER.search(last_part(receiver_name))
            or receiver_name in self._accelerators
        ):
            return
        elif self.receivers.looks_like(receiver):
            kind = {"unscale_": Kind.UNSCALE, "step": Kind.SCALER_STEP, "update": Kind.UPDATE}
            if method in kind:
                yield Event(kind[method], call, receiver_name, _first_argument(call))
        elif method == "step" and self.is_optimizer(receiver_name):
            yield Event(Kind.OPTIMIZER_STEP, call, optimizer=receiver_name)
        elif method == "zero_grad":
            optimizer = receiver_name if self.is_optimizer(receiver_name) else None
            yield Event(Kind.ZERO_GRAD, call, optimizer=optimizer)
        elif method in ("clip_grad_norm_", "clip_grad_value_"):
            yield Event(Kind.CLIP, call)  # FSDP's FullyShardedDataParallel.clip_grad_norm_

    def _backward(self, call: cst.Call, receiver: cst.BaseExpression) -> Iterator[Event]:
        receiver = _uncast(receiver)
        while isinstance(receiver, cst.BinaryOperation):  # (scaler.scale(loss) / n).backward()
            receiver = _uncast(receiver.left)
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
            owner = receiver.func.value
            if receiver.func.attr.value == "scale" and self.receivers.looks_like(owner):
                yield Event(Kind.SCALED_BACKWARD, call, dotted_name(owner))
                return
        name = dotted_name(receiver)
        if name is not None and name in self._scaled:
            yield Event(Kind.SCALED_BACKWARD, call, self._scaled[name])
            return
        # A tensor's backward takes no positional tensor besides an optional gradient; a
        # framework's ``backward(loss)`` (Accelerate, DeepSpeed, Fabric) takes the loss.
        if any(arg.keyword is None for arg in call.args):
            return
        if name is not None and _RECIPE_WRAPPER.search(last_part(name)):
            return
        yield Event(Kind.BACKWARD, call)

    def is_optimizer(self, name: str) -> bool:
        """``name`` holds an optimizer: assigned one in this module, or named like one."""
        if name in self._optimizers:
            return True
        last = last_part(name)
        return _OPTIMIZER_NAME.search(last) is not None and not _NOT_OPTIMIZER.search(last)

    def _optimizer_names(self) -> set[str]:
        names = set()
        for assign in self._index.nodes(cst.Assign):
            value = assign.value
            if not isinstance(value, cst.Call):
                continue
            callee = dotted_name(value.func)
            qualified = self.aliases.qualify(callee) if callee is not None else ""
            if not _OPTIMIZER_CONSTRUCTOR.search(qualified) or _NOT_OPTIMIZER_CONSTRUCTOR.search(
                qualified
            ):
                continue
            for target in assign.targets:
                name = dotted_name(target.target)
                if name is not None:
                    names.add(name)
        return names

    def _scaled_loss_names(self) -> dict[str, str]:
        """``scaled = scaler.scale(loss)``: name -> scaler text."""
        scaled = {}
        for assign in self._index.nodes(cst.Assign):
            value = _uncast(assign.value)
            if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
                continue
            if value.func.attr.value != "scale" or not self.receivers.looks_like(value.func.value):
                continue
            scaler = dotted_name(value.func.value)
            for target in assign.targets:
                name = dotted_name(target.target)
                if name is not None and scaler is not None:
                    scaled[name] = scaler
        return scaled

    # -- where iterations are ------------------------------------------------------------------

    def _iterations(self) -> list[Iteration]:
        scopes: dict[cst.CSTNode, None] = {}
        for event in self.events:
            if event.kind in STEP_KINDS:
                scopes.setdefault(self.scope_of(event.call), None)
        # A function that steps (``def optimizer_step(self)``) called from a loop: the loop is
        # an iteration too, holding the function's events at the call (callers of callers up
        # to the depth limit).
        callers: dict[cst.CSTNode, list[cst.Call]] = {}
        for call in self._index.nodes(cst.Call):
            # A function of another module counts here only if it steps (`STEP_KINDS`), and
            # only one whose source calls a `.step`/`.update` can (`METHOD_WORDS` among its
            # words): others are grafted when an iteration's events need them, not for every
            # call of the module. Their callers need no entry: only this module's functions
            # become iteration scopes.
            callee = self._callee(call, METHOD_WORDS)
            if callee is not None:
                callers.setdefault(callee, []).append(call)
                if callee in self._context.foreign and self._steps(callee):
                    # A function of another module that steps: the loop here calling it is
                    # an iteration, as for a function of this module.
                    scopes.setdefault(self.scope_of(call), None)
        frontier: list[cst.CSTNode] = [s for s in scopes if isinstance(s, cst.FunctionDef)]
        for _ in range(MAX_CALL_DEPTH - 1):
            frontier = [
                outer
                for function in frontier
                for call in callers.get(function, [])
                if (outer := self.scope_of(call)) not in scopes
                and scopes.setdefault(outer, None) is None
            ]
            frontier = [scope for scope in frontier if isinstance(scope, cst.FunctionDef)]
        self._scopes = scopes
        return [
            Iteration(scope, tuple(self._events_in(scope)), self.facts, self._index)
            for scope in scopes
        ]

    def _steps(self, function: cst.FunctionDef) -> bool:
        """A grafted function makes a step, update or scaler step itself."""
        return any(
            event.kind in STEP_KINDS
            for node in descendants(function)
            if isinstance(node, cst.Call)
            for event in self._event(node)
        )

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The loop or function whose body runs once per step, around ``node``."""
        child = node
        for ancestor in self._index.ancestors(node):
            if (
                isinstance(ancestor, cst.For | cst.While)
                and child is ancestor.body
                and not self._loops_over_a_collection(ancestor)
            ):
                return ancestor
            if isinstance(ancestor, cst.FunctionDef | cst.Lambda):
                return ancestor
            child = ancestor
        return self._index.module

    def _loops_over_a_collection(self, loop: cst.For | cst.While) -> bool:
        """``for opt in optimizers:``, ``for p in model.parameters():``, ``for i, (loss, opt)
        in enumerate(zip(losses, optimizers)):`` — once per element, not per step."""
        if not isinstance(loop, cst.For):
            return False
        key = loop, len(self.events)
        found = self._collection_loops.get(key)
        if found is None:
            found = self._collection_loops[key] = self._loops_over_collection_now(loop)
        return found

    def _loops_over_collection_now(self, loop: cst.For) -> bool:
        targets = {dotted_name(n) for n in _names(loop.target)}
        for event in self.events:
            if any(ancestor is loop for ancestor in self._index.ancestors(event.call)) and (
                {event.scaler, event.optimizer} & targets
                or any(f"{t}." in (event.optimizer or "") for t in targets if t)
            ):
                return True
        iterable = loop.iter
        if isinstance(iterable, cst.List | cst.Tuple):
            return True
        names = [dotted_name(n) or "" for n in _names(iterable)]
        if any(_PER_ELEMENT.search(name) for name in names):
            return True
        if self._steps_per_entry(loop, names):
            return False
        return any(last_part(name) in TRAVERSED_COLLECTIONS for name in names)

    def _steps_per_entry(self, loop: cst.For, names: list[str]) -> bool:
        """A loop over a dict's entries (``for criterion, batch in batches.items():``) whose
        every pass backpropagates and steps: each entry is a training step of its own (an
        OOM scan over the largest batches), not one optimizer or model of a step."""
        if not any(last_part(name) in _DICT_VIEWS for name in names):
            return False
        inside = [e for e in self.events if loop in set(self._index.ancestors(e.call))]
        kinds = {e.kind for e in inside}
        return bool(kinds & {Kind.BACKWARD, Kind.SCALED_BACKWARD}) and bool(kinds & STEP_KINDS)

    def _events_in(self, scope: cst.CSTNode) -> Iterator[Event]:
        """Events in ``scope`` (same function, nested loops included, but not those of a nested
        iteration: a critic's inner steps are its own) and those its calls of this module's
        functions bring, in source order."""
        for event in self._events_under(scope, via=None, depth=0, seen=frozenset()):
            inner = self._innermost_scope(event.call if event.via is None else event.via)
            if inner is not scope:
                continue
            if event.via is not None and self._in_a_loop_of_its_function(event.call):
                self._own_loops.append(event)
                continue  # a callee's own training loop (`train_one_epoch`): its iteration
            yield event

    def _in_a_loop_of_its_function(self, node: cst.CSTNode) -> bool:
        """``node`` sits in an iteration loop of the function that holds it (a function
        grafted under a call in a loop has that loop above its definition: it does not count).
        In a function grafted from another module, whose loops are no scopes here, any loop
        that is not over a collection counts: ``train(...)`` of a ``train_utils`` module runs
        its own epochs and steps, so two calls of it are two trainings, not one iteration."""
        foreign = node in self._context.foreign
        child = node
        for ancestor in self._index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef | cst.Lambda):
                return False
            if isinstance(ancestor, cst.For | cst.While) and (
                ancestor in self._scopes
                or (
                    foreign
                    and child is ancestor.body
                    and not self._loops_over_a_collection(ancestor)
                )
            ):
                return True
            child = ancestor
        return False

    def _innermost_scope(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The innermost iteration scope around ``node``."""
        for ancestor in self._index.ancestors(node):
            if ancestor in self._scopes:
                return ancestor
        return None

    def _events_under(
        self, scope: cst.CSTNode, via: cst.Call | None, depth: int, seen: frozenset[cst.CSTNode]
    ) -> Iterator[Event]:
        function = scope if isinstance(scope, cst.FunctionDef) else None
        for call in self._calls_in(scope):
            if self._function_of(call) is not (function or self._function_of(scope)):
                continue
            event = self._by_call.get(call)
            if event is None and call in self._context.foreign:
                event = next(iter(self._event(call)), None)
            if event is not None:
                yield Event(event.kind, event.call, event.scaler, event.optimizer, via)
                continue
            if depth >= MAX_CALL_DEPTH - 1:
                continue
            callee = self._callee(call)
            if callee is not None and callee not in seen:
                yield from self._events_under(
                    callee, via if via is not None else call, depth + 1, seen | {callee}
                )

    def _calls_in(self, scope: cst.CSTNode) -> list[cst.Call]:
        """The calls under ``scope``, in source order (a walk of its subtree only)."""
        if scope is self._index.module:
            return self._index.nodes(cst.Call)
        return [node for node in descendants(scope) if isinstance(node, cst.Call)]

    def _function_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        if isinstance(node, cst.FunctionDef):
            return node
        for ancestor in self._index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef | cst.Lambda):
                return ancestor
        return None

    def _functions_by_name(self) -> dict[str, list[cst.FunctionDef]]:
        functions: dict[str, list[cst.FunctionDef]] = {}
        for function in self._index.nodes(cst.FunctionDef):
            functions.setdefault(function.name.value, []).append(function)
        return functions

    def _callee(
        self, call: cst.Call, words: tuple[str, ...] = _EVENT_WORDS
    ) -> cst.FunctionDef | None:
        """The function that ``call`` runs: ``f(...)`` a module-level function, ``self.f(...)``
        a method of the caller's class; else, through the project, a function of another module
        whose source mentions one of ``words`` (grafted under the call, or already grafted)."""
        func = call.func
        project = self._context.project
        if call in self._context.foreign:
            # A call in a function of another module runs a function of that module.
            return project.graft(self._context, call, words) if project is not None else None
        if isinstance(func, cst.Name):
            for function in self._functions.get(func.value, []):
                if self._index.enclosing_class(function.body) is None:
                    return function
        elif isinstance(func, cst.Attribute) and dotted_name(func.value) == "self":
            cls = self._index.enclosing_class(call)
            for function in self._functions.get(func.attr.value, []):
                if cls is not None and self._index.enclosing_class(function.body) is cls:
                    return function
        if project is None:
            return None
        return project.graft(self._context, call, words)

    # -- questions rules ask -------------------------------------------------------------------

    def callee(self, call: cst.Call) -> cst.FunctionDef | None:
        """The function of this module whose events ``call`` brings into an iteration (a
        module-level ``f(...)`` or ``self.f(...)`` of the caller's class), or None."""
        return self._callee(call)

    def calls_of(self, function: cst.FunctionDef, within: set[cst.CSTNode]) -> list[cst.Call]:
        """The calls of ``function`` (of this module: a module-level function, or a method
        called through ``self``) written in the functions ``within``."""
        name = function.name.value
        return [
            call
            for call in self._index.nodes(cst.Call)
            if last_part(dotted_name(call.func) or "") == name
            and self._index.enclosing_function(call) in within
            and self._callee(call) is function
        ]

    def iteration_of(self, node: cst.CSTNode) -> Iteration | None:
        """The innermost iteration where the call ``node`` is written (not brought by a call)."""
        found = [
            iteration
            for iteration in self.iterations
            if any(event.call is node and event.via is None for event in iteration.events)
        ]
        if not found:
            return None
        return max(found, key=lambda it: sum(1 for _ in self._index.ancestors(it.scope)))

    def holding(self, node: cst.CSTNode) -> list[Iteration]:
        """Every iteration that holds the call ``node``, written there or brought by a call."""
        return [it for it in self.iterations if any(e.call is node for e in it.events)]

    def conditions(self, event: Event) -> frozenset[Fact]:
        """Facts that hold whenever ``event`` runs, as its iteration sees it: the branch
        conditions around its site and, for an event a call brings, those around it in the
        called function, whose parameters are read as the call's arguments (``def
        backward(loss, scaler): if scaler is not None: ...`` called as ``backward(loss,
        self.scaler)`` gives ``self.scaler != None``)."""
        facts = self.facts.conditions(event.site)
        if event.via is None:
            return facts
        inner = self.facts.conditions(event.call)
        callee = self._callee(event.via)
        if callee is not None and callee is self._function_of(event.call):
            bound = self._bound_arguments(callee, event.via)
            inner = frozenset(_renamed(fact, bound) for fact in inner)
        return facts | inner

    def optimizer_as_passed(self, event: Event) -> str | None:
        """The optimizer ``event`` touches, as its iteration names it: a parameter of the
        function that the iteration's call brings is read as that call's argument (``scaler.
        step(opt)`` in ``def opt_step(self, loss, opt)`` called as ``self.opt_step(loss_d,
        self.opt_d)`` is ``self.opt_d``); None when unknown, or a parameter of a function
        reached deeper."""
        optimizer = event.optimizer
        if optimizer is None or event.via is None:
            return optimizer
        function = self._function_of(event.call)
        head = re.match(r"[A-Za-z_]\w*", optimizer)
        if not isinstance(function, cst.FunctionDef) or head is None:
            return None
        params = function.params
        names = {
            p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)
        }
        if head.group() not in names or head.group() in ("self", "cls"):
            return optimizer
        if self._callee(event.via) is not function:
            return None
        bound = self._bound_arguments(function, event.via)
        if head.group() not in bound:
            return None
        return bound[head.group()] + optimizer[head.end() :]

    def _bound_arguments(self, function: cst.FunctionDef, call: cst.Call) -> dict[str, str]:
        """Parameter name -> source text of the argument ``call`` passes for it."""
        params = list(function.params.params)
        if isinstance(call.func, cst.Attribute) and params:  # self.f(...): skip ``self``
            params = params[1:]
        bound: dict[str, str] = {}
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        for param, arg in zip(params, positional, strict=False):
            bound[param.name.value] = self.facts.facts.subject(arg.value)
        for arg in call.args:
            if arg.keyword is not None:
                bound[arg.keyword.value] = self.facts.facts.subject(arg.value)
        return bound

    def events_where(self, predicate: Callable[[Event], bool]) -> list[Event]:
        """Events written in the module (not brought by calls) that satisfy ``predicate``."""
        return [event for event in self.events if predicate(event)]


def _renamed(fact: Fact, bound: dict[str, str]) -> Fact:
    """``fact`` about a parameter (``scaler``, ``scaler.is_enabled()``) restated about the
    argument bound to it."""
    head = re.match(r"[A-Za-z_]\w*", fact.subject)
    if head is None or head.group() not in bound:
        return fact
    subject = bound[head.group()] + fact.subject[head.end() :]
    return Fact(subject, fact.relation, fact.value)


def _uncast(node: cst.BaseExpression) -> cst.BaseExpression:
    """``x`` of ``cast(torch.Tensor, x)`` / ``typing.cast(...)``: a type cast changes nothing
    (composer and ignite write ``cast(torch.Tensor, scaler.scale(loss)).backward()``)."""
    while (
        isinstance(node, cst.Call)
        and dotted_name(node.func) in ("cast", "typing.cast")
        and len(node.args) == 2
    ):
        node = node.args[1].value
    return node


def _first_argument(call: cst.Call) -> str | None:
    """Dotted text of the first argument (``scaler.step(self.optimizer)`` -> ``self.optimizer``)."""
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value == "optimizer":
            return dotted_name(arg.value)
    return None


def _names(node: cst.CSTNode) -> Iterator[cst.BaseExpression]:
    """Names and attributes in ``node`` (targets of a ``for``, parts of an iterable)."""
    if isinstance(node, cst.Name | cst.Attribute):
        yield node
        return
    for child in children(node):
        yield from _names(child)


def of_module(context: ModuleContext) -> TrainingIterations:
    """The iterations of ``context.module``, built on first use and shared by the rules."""
    index = module_index(context)
    return index.shared(TrainingIterations, lambda: TrainingIterations(context, index))
