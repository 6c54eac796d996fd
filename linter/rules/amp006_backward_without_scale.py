"""AMP006 backward-without-scale."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import libcst as cst

from linter._fix import UNSAFE, NodeFix
from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model._dotted_names import dotted_name, last_part
from linter.model._iteration import Event, Iteration, Kind, TrainingIterations, of_module
from linter.model._module_index import ModuleIndex, module_index
from linter.model._path_facts import Fact
from linter.model._scaler_receivers import GRAD_SCALER_CLASS_NAMES, GRAD_SCALER_CONSTRUCTORS

#: Methods whose result is a scaled loss: a GradScaler's ``scale``, apex's ``amp.scale_loss``
#: (``with amp.scale_loss(loss, opt) as scaled_loss: scaled_loss.backward()``).
_SCALING_METHODS = frozenset({"scale", "scale_loss"})

#: Tensor methods whose result is as scaled as their input (linear in it): a scaled loss
#: reduced with one of them is still scaled.
_LINEAR_REDUCTIONS = frozenset({"mean", "sum", "float", "squeeze", "reshape", "view"})

#: Events that consume or clear the gradients a backward left: once one of them always runs
#: between a plain backward and a ``scaler.step``, the step no longer sees those gradients.
_GRADIENT_SINKS = (Kind.OPTIMIZER_STEP, Kind.ZERO_GRAD)

#: A scaler bound only to ``GradScaler(enabled=False)``: its scale is 1, ``step`` divides by 1.
_DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class Switch:
    """When one construction of a scaler scales: ``GradScaler(enabled=args.amp)`` under
    ``if torch.cuda.is_available():`` scales when both hold."""

    #: What must hold for it to scale (none: it always does).
    facts: frozenset[Fact]
    #: Its ``enabled=`` expression, if not a literal.
    enabled: cst.BaseExpression | None = None


@dataclass(frozen=True, slots=True)
class UnscaledBackward:
    """A plain backward whose gradients a ``scaler.step`` divides by the loss scale."""

    #: The plain ``loss.backward()`` / ``torch.autograd.backward(loss)``.
    backward: Event
    #: A ``scaler.step(optimizer)`` that may follow it (the finding names the first).
    step: Event
    #: The scaler's ``enabled=`` switch (``args.amp``) when it has one: the bug needs it on.
    switch: cst.BaseExpression | None
    #: A ``scaler.scale(loss)`` before it whose result is never backpropagated, if any.
    discarded: cst.Call | None


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

    def of(self, scaler: str | None, where: cst.CSTNode) -> str | list[Switch] | None:
        """`_DISABLED`, the `Switch`es of its constructions, or None when the module does not
        show how it is built (a parameter, ``accelerator.scaler``). A name bound in the
        function around ``where`` is read from there alone: two functions may each build a
        local ``scaler`` of their own."""
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
            if enabled == _DISABLED:
                continue
            facts = self._facts.conditions(value)
            if isinstance(enabled, cst.BaseExpression):
                switches.append(Switch(facts | self._facts.facts.of_test(enabled, True), enabled))
            else:
                switches.append(Switch(facts))
        return switches or _DISABLED

    def _bound(self, name: str, where: cst.CSTNode) -> list[cst.BaseExpression]:
        values = self._values.get(name, [])
        function = self._index.enclosing_function(where)
        local = [v for v in values if self._index.enclosing_function(v) is function]
        return local if local and function is not None else values

    def _enabled(self, value: cst.BaseExpression) -> cst.BaseExpression | str | None:
        """A GradScaler constructor's ``enabled=``: `_DISABLED` for ``False``, the expression
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
                    return _DISABLED if flag.value == "False" else ""
                return flag
        return ""


class BackwardWithoutScale(Rule):
    """Backpropagating an unscaled loss in an iteration that steps through `scaler.step`.

    ## What it does
    Flags `loss.backward()` (and `torch.autograd.backward(loss)`) in a training iteration whose
    gradients then reach `scaler.step(optimizer)` of a GradScaler: the loss was never passed
    through `scaler.scale(...)`. Iterations come from the shared model of a training step
    (loops, per-step functions, hooks, and this file's helpers called from them), so the
    backward may sit in a `self.backward(loss)` helper and the step in `optimizer_step()`.

    Not reported, because the gradients that reach the step are scaled or the two never run
    together:
    - `scaler.scale(loss).backward()`, `scaled = scaler.scale(loss); scaled.backward()`,
      `cast(Tensor, scaler.scale(loss)).backward()`, a helper that receives
      `scaler.scale(loss)` as its argument, apex's `with amp.scale_loss(...) as scaled_loss`;
    - the plain backward on the other branch: `if scaler is not None: ... else:
      loss.backward()`, `if args.fp16:` / `else`, separate `if use_amp:` / `if not use_amp:`
      blocks, a helper's `if scaler:` branch read with the caller's argument, a branch where
      the scaler is `None` or disabled;
    - a scaler created `GradScaler(enabled=False)` (its scale is 1), or one created
      `GradScaler(enabled=args.amp)` when the backward only runs with `args.amp` off;
    - a plain backward whose gradients an `optimizer.step()` or `zero_grad()` consumes before
      the scaler steps, or that may feed another optimizer stepped directly: a GAN whose
      discriminator trains in fp32 (`d_loss.backward(); opt_d.step()`) while the generator
      uses the scaler;
    - wrappers that scale for you: `accelerator.backward(loss)`, Lightning's
      `manual_backward`, DeepSpeed's `engine.backward(loss)`.

    A scaler created `GradScaler(enabled=args.amp)` still scales when the flag is on, so an
    unconditional plain backward is reported, with the switch named in the message.

    ## Why is this bad?
    `scaler.step(optimizer)` first unscales: it divides every gradient of the optimizer by the
    current loss scale (65536 at the start) before the optimizer uses it. Gradients from an
    unscaled loss come out 65536 times too small; SGD then barely moves, and Adam's updates
    shrink wherever the gradient falls to the size of `eps`. Nothing fails: the step is never
    skipped (small gradients never overflow), so the scale keeps growing and the gradients keep
    shrinking. Only when no loss was ever scaled does torch notice, with "Attempted step but
    _scale is None. This may indicate your script did not use scaler.scale(loss or outputs)
    earlier in the iteration." (Lightning-AI/pytorch-lightning#18510, starrytong/SCNet#7);
    once one loss is scaled, another one backpropagated plainly goes unnoticed. Every loss
    that feeds a scaler-stepped optimizer must go through the same `scaler.scale`
    (PyTorch's AMP examples, "Working with Multiple Models, Losses, and Optimizers";
    neosr-project/neosr#31 fixed its GAN losses this way), and a framework that forgets it
    is a bug report (Lightning-AI/pytorch-lightning#4148, `manual_backward` under native AMP).

    The part left unscaled is typically a second term — a regularizer or auxiliary loss
    computed in fp32 "because it needs no scaling": it then contributes 65536 times less than
    intended. NVIDIA/OpenSeq2Seq#127 fixed exactly that (an unscaled regularization term that
    a large loss scale made all but ineffective), and
    ashawkey/stable-dreamfusion#158 reports one loss of several bypassing the scaler.

    A `scaler.scale(loss)` whose result is never used before `loss.backward()` is the same
    mistake: `scale` returns a new tensor and leaves `loss` as it was.

    ## Example
    ```python
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        loss.backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    ```

    ## Use instead
    ```python
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    ```

    ## Fix safety
    The fix wraps the backpropagated tensor in `scaler.scale(...)` and keeps the backward's
    arguments (`scaler.scale(aux / n).backward(retain_graph=True)`; for
    `torch.autograd.backward(tensors, ...)` it scales `tensors`). It is offered when every
    scaler step the gradients reach goes through one scaler and that scaler can be named where
    the backward is written (the same function, or `self.<scaler>` in a method of the same
    class). It is unsafe (`--unsafe-fixes`): it multiplies those gradients by the loss scale,
    which is right only if no optimizer outside the scaler was meant to take them.

    ## Suppression
    Add `# noqa: AMP006` to the reported line when the unscaled gradients are intended.

    ## References
    - every loss through the same scaler: PyTorch's AMP examples, "Working with Multiple
      Models, Losses, and Optimizers"
      ([amp_examples](https://pytorch.org/docs/stable/notes/amp_examples.html)),
      [neosr-project/neosr#31](https://github.com/neosr-project/neosr/pull/31)
    - an unscaled term next to scaled ones:
      [NVIDIA/OpenSeq2Seq#127](https://github.com/NVIDIA/OpenSeq2Seq/pull/127),
      [ashawkey/stable-dreamfusion#158](https://github.com/ashawkey/stable-dreamfusion/issues/158)
    - a backward that skipped the scaler in a framework:
      [Lightning-AI/pytorch-lightning#4148](https://github.com/Lightning-AI/pytorch-lightning/issues/4148)
    - torch's own check when nothing was scaled:
      [Lightning-AI/pytorch-lightning#18510](https://github.com/Lightning-AI/pytorch-lightning/issues/18510),
      [starrytong/SCNet#7](https://github.com/starrytong/SCNet/issues/7)
    """

    code = "AMP006"
    name = "backward-without-scale"
    summary = "`loss.backward()` on an unscaled loss whose gradients `scaler.step()` unscales"
    fix_availability = UNSAFE
    triggers = ("backward",)
    valid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
"""
        ),
        Example(
            """\
def train_step(model, batch, optimizer, scaler=None):
    loss = model(batch).loss
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda", enabled=args.amp)
for batch in loader:
    loss = model(batch)
    if args.amp:
        scaler.scale(loss).backward()
    else:
        loss.backward()
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda", enabled=False)
for batch in loader:
    model(batch).backward()
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for real, noise in loader:
    # The discriminator trains in fp32 with its own optimizer...
    opt_d.zero_grad()
    d_loss = critic(real).mean() - critic(gen(noise).detach()).mean()
    d_loss.backward()
    opt_d.step()
    # ...the generator under AMP.
    opt_g.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        g_loss = -critic(gen(noise)).mean()
    scaler.scale(g_loss).backward()
    scaler.step(opt_g)
    scaler.update()
"""
        ),
        Example(
            """\
from accelerate import Accelerator

accelerator = Accelerator(mixed_precision="fp16")
for batch in loader:
    accelerator.backward(model(batch).loss)
    optimizer.step()
    optimizer.zero_grad()
"""
        ),
        Example(
            """\
def backward(loss, scaler):
    if scaler is not None:
        scaler.scale(loss).backward()
    else:
        loss.backward()


def train(loader, scaler):
    for batch in loader:
        backward(model(batch), scaler)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
"""
        ),
    )
    invalid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    loss.backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
""",
            (7,),
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda", enabled=args.amp)
for batch in loader:
    loss = model(batch)
    loss.backward()
    scaler.step(optimizer)
    scaler.update()
""",
            (6,),
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        out = model(batch)
    scaler.scale(out.loss).backward(retain_graph=True)
    out.aux_loss.backward()
    scaler.step(optimizer)
    scaler.update()
""",
            (8,),
        ),
        Example(
            """\
for step, batch in enumerate(loader):
    loss = model(batch) / accum_steps
    scaler.scale(loss)
    loss.backward()
    if (step + 1) % accum_steps == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
            (4,),
        ),
        Example(
            """\
from torch.amp import GradScaler


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.scaler = GradScaler("cuda")

    def backward(self, loss):
        loss.backward()

    def optimizer_step(self):
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()

    def fit(self, loader):
        for batch in loader:
            self.backward(self.model(batch))
            self.optimizer_step()
""",
            (10,),
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    losses = model(batch)
    torch.autograd.backward([losses["ce"], losses["kl"]])
    scaler.step(optimizer)
    scaler.update()
""",
            (6,),
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for real, noise in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        d_loss = critic(real).mean() - critic(gen(noise).detach()).mean()
    d_loss.backward()
    scaler.step(opt_d)
    with torch.autocast("cuda", dtype=torch.float16):
        g_loss = -critic(gen(noise)).mean()
    scaler.scale(g_loss).backward()
    scaler.step(opt_g)
    scaler.update()
""",
            (7,),
        ),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        # A finding needs a backward and a scaler's step; a scaler's name or class says "caler".
        return "backward" in text and ".step" in text and "caler" in text

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        model = of_module(context)
        if not any(event.kind is Kind.BACKWARD for event in model.events):
            return
        index = module_index(context)
        switches = index.shared(ScalerSwitches, lambda: ScalerSwitches(index, model))
        query = _Query(context, index, model, switches)
        found: dict[cst.Call, list[UnscaledBackward]] = {}
        for iteration in model.iterations:
            for unscaled in query.unscaled_backwards(iteration):
                found.setdefault(unscaled.backward.call, []).append(unscaled)
        for call in sorted(found, key=lambda node: index.order[node]):
            yield query.finding(found[call])


class _Query:
    """AMP006 over one module's training iterations."""

    def __init__(
        self,
        context: ModuleContext,
        index: ModuleIndex,
        model: TrainingIterations,
        switches: ScalerSwitches,
    ) -> None:
        self._context = context
        self._index = index
        self._model = model
        self._switches = switches

    # -- which plain backwards feed a scaler's step ------------------------------------------

    def unscaled_backwards(self, iteration: Iteration) -> Iterator[UnscaledBackward]:
        steps = iteration.of(Kind.SCALER_STEP)
        if not steps:
            return
        for backward in iteration.of(Kind.BACKWARD):
            if self._scaled_elsewhere(backward) or self._feeds_a_plain_optimizer(
                iteration, backward, steps
            ):
                continue
            for step in steps:
                switches = self._switches.of(step.scaler, step.call)
                if switches == _DISABLED or not self._reaches(iteration, backward, step):
                    continue
                known = switches if isinstance(switches, list) else []
                if self._scaler_off(backward, step, known):
                    continue
                always_on = any(not switch.facts for switch in known)
                if not always_on and self._scaled_on_another_branch(iteration, backward, step):
                    continue
                enabling = [switch.enabled for switch in known if switch.enabled is not None]
                yield UnscaledBackward(
                    backward,
                    step,
                    enabling[0] if enabling else None,
                    self._discarded_scale(backward),
                )

    def _reaches(self, iteration: Iteration, backward: Event, step: Event) -> bool:
        """The backward's gradients may reach ``step``: it may run later in the iteration, on
        a path that runs both, with no optimizer step or ``zero_grad`` always in between."""
        if not iteration.may_precede(backward, step) or self._never_together(
            iteration, backward, step
        ):
            return False
        return not any(
            self._always_between(iteration, backward, sink, step)
            for sink in iteration.between(backward, step, *_GRADIENT_SINKS)
        )

    def _never_together(self, iteration: Iteration, a: Event, b: Event) -> bool:
        if iteration.exclusive(a, b):
            return True
        return self._model.facts.contradict(self._model.conditions(a), self._model.conditions(b))

    def _always_between(self, iteration: Iteration, first: Event, sink: Event, last: Event) -> bool:
        """``sink`` runs whenever ``first`` and ``last`` do: no ``if`` or loop of its own
        between it and the iteration (one around ``first`` or ``last`` too is shared)."""
        if sink.via is not None and self._model.facts.conditions(sink.call):
            return False
        shared = set(self._index.ancestors(first.site)) | set(self._index.ancestors(last.site))
        for ancestor in self._index.ancestors(sink.site):
            if ancestor is iteration.scope:
                return True
            if isinstance(ancestor, cst.If | cst.For | cst.While) and ancestor not in shared:
                return False
        return True

    def _feeds_a_plain_optimizer(
        self, iteration: Iteration, backward: Event, steps: list[Event]
    ) -> bool:
        """An optimizer other than the scaler's is stepped directly after the backward: its
        gradients may be that optimizer's (an fp32 discriminator stepped after the generator's
        scaler step), which the scaler never unscales."""
        stepped = {step.optimizer for step in steps}
        return any(
            plain.optimizer is not None
            and None not in stepped
            and plain.optimizer not in stepped
            and iteration.may_precede(backward, plain)
            and not self._never_together(iteration, backward, plain)
            for plain in iteration.of(Kind.OPTIMIZER_STEP)
        )

    def _scaler_off(self, backward: Event, step: Event, switches: list[Switch]) -> bool:
        """The backward only runs where the step's scaler is ``None``, falsy or disabled
        (``if scaler is None:``, ``if not scaler.is_enabled():``), or where none of its
        constructions scales (``GradScaler(enabled=args.amp)`` and ``if not args.amp:``; a
        ``GradScaler()`` built under ``if args.fp16:`` and ``else:``)."""
        conditions = self._model.conditions(backward)
        scaler = step.scaler or ""
        off = {
            Fact(scaler, "is", False),
            Fact(scaler, "==", None),
            Fact(f"{scaler}.is_enabled()", "is", False),
        }
        if conditions & off:
            return True
        facts = self._model.facts
        return bool(switches) and all(
            switch.facts and facts.contradict(conditions, switch.facts) for switch in switches
        )

    def _scaled_on_another_branch(self, iteration: Iteration, backward: Event, step: Event) -> bool:
        """``if args.fp16: scaler.scale(loss).backward() else: loss.backward()`` with a scaler
        that is not always on (built elsewhere, switched, or built under a condition): the
        branch is the scaler's switch, however spelled (``GradScaler(enabled=self.use_amp)``
        and ``if args.fp16:``), so the plain arm runs with the scaler disabled."""
        return any(
            scaled.scaler == step.scaler and self._never_together(iteration, scaled, backward)
            for scaled in iteration.of(Kind.SCALED_BACKWARD)
        )

    def _scaled_elsewhere(self, backward: Event) -> bool:
        """The tensor is already scaled by means the model does not see: a ``.scale(...)`` /
        ``scale_loss(...)`` result, a name bound to one (apex's ``with amp.scale_loss(...) as
        scaled_loss``), or a parameter that a call passes ``scaler.scale(loss)``."""
        tensor = _backpropagated(backward.call)
        if tensor is None:
            return True
        if isinstance(tensor, cst.Name) and tensor.value in ("self", "cls"):
            return True  # `self.backward()`: a method of the caller's own class
        parts = (
            [element.value for element in tensor.elements]
            if isinstance(tensor, cst.List | cst.Tuple)
            else [tensor]
        )
        return any(self._is_scaled(part, backward.call) for part in parts)

    def _is_scaled(self, tensor: cst.BaseExpression, call: cst.Call) -> bool:
        tensor = _reduced_from(tensor)
        if _is_scaling_call(tensor):
            return True
        name = dotted_name(tensor)
        if name is None:
            return False
        for node in self._index.nodes(cst.AsName):
            item = self._index.parent.get(node)
            if (
                isinstance(item, cst.WithItem)
                and dotted_name(node.name) == name
                and _is_scaling_call(item.item)
            ):
                return True
        for assign in self._index.nodes(cst.Assign):
            targets = {dotted_name(t.target) for t in assign.targets}
            if name in targets and _is_scaling_call(assign.value):
                return True
        for update in self._index.nodes(cst.AugAssign):  # loss *= self.loss_scale
            if (
                dotted_name(update.target) == name
                and isinstance(update.operator, cst.MultiplyAssign)
                and _names_a_scale(update.value)
            ):
                return True
        return self._parameter_given_scaled(call, name)

    def _parameter_given_scaled(self, call: cst.Call, name: str) -> bool:
        function = self._index.enclosing_function(call)
        if function is None:
            return False
        params = [p.name.value for p in function.params.params]
        if name not in params:
            return False
        method = self._index.enclosing_class(call) is not None
        position = params.index(name) - (1 if method else 0)
        for site in self._index.calls_named(function.name.value) + self._index.calls_named(
            "." + function.name.value
        ):
            positional = [arg for arg in site.args if arg.keyword is None and not arg.star]
            given = [arg.value for arg in site.args if arg.keyword and arg.keyword.value == name]
            if 0 <= position < len(positional):
                given.append(positional[position].value)
            if any(_is_scaling_call(value) for value in given):
                return True
        return False

    def _discarded_scale(self, backward: Event) -> cst.Call | None:
        """``scaler.scale(loss)`` before ``loss.backward()`` in the same function whose result
        is never backpropagated: a statement of its own, or bound to a name that no backward
        in the function starts from."""
        tensor = _backpropagated(backward.call)
        if tensor is None:
            return None
        code = self._context.module.code_for_node
        text = code(tensor).strip()
        function = self._index.enclosing_function(backward.call)
        for call in self._index.calls_named(".scale"):
            if not (
                self._index.enclosing_function(call) is function
                and self._model.receivers.looks_like(call.func.value)  # type: ignore[attr-defined]  # calls_named(".m") holds attribute calls only
                and len(call.args) == 1
                and code(call.args[0].value).strip() == text
                and self._index.order[call] < self._index.order[backward.call]
            ):
                continue
            statement = self._index.parent.get(call)
            if isinstance(statement, cst.Expr):
                return call
            if isinstance(statement, cst.Assign) and not any(
                self._backpropagates(dotted_name(target.target), function)
                for target in statement.targets
            ):
                return call
        return None

    def _backpropagates(self, name: str | None, function: cst.CSTNode | None) -> bool:
        """Some backward in ``function`` starts from ``name`` (or the name is not plain)."""
        if name is None:
            return True
        return any(
            self._index.enclosing_function(call) is function
            and (tensor := _backpropagated(call)) is not None
            and dotted_name(tensor) == name
            for call in self._index.calls_named(".backward")
        )

    # -- the finding -------------------------------------------------------------------------

    def finding(self, found: list[UnscaledBackward]) -> Finding:
        first = found[0]
        code = self._context.module.code_for_node
        backward = code(first.backward.call)
        step = code(first.step.call)
        line = self._context.position(first.step.call).start.line
        scaler = first.step.scaler or "scaler"
        tensor = _backpropagated(first.backward.call)
        tensor_text = code(_bare(tensor)).strip() if tensor is not None else "loss"
        message = (
            f"`{_one_line(backward)}` backpropagates an unscaled loss, but `{_one_line(step)}` "
            f"(line {line}) divides the gradients by the loss scale"
        )
        if first.switch is not None:
            message += f" whenever `{_one_line(code(first.switch))}` enables the scaler"
        related: list[tuple[cst.CSTNode, str]] = [(first.step.call, "the scaler step")]
        if first.discarded is not None:
            message += (
                f"; the result of `{_one_line(code(first.discarded))}` is never backpropagated"
            )
            related.append((first.discarded, "scaled loss never backpropagated"))
        message += f"; backpropagate `{scaler}.scale({_one_line(tensor_text)})` instead"
        return Finding(
            first.backward.call, message, tuple(related), fix=self._fix(first.backward, found)
        )

    def _fix(self, backward: Event, found: list[UnscaledBackward]) -> NodeFix | None:
        """Wrap the loss in ``<scaler>.scale(...)``: unsafe, it changes the gradients."""
        scalers = {unscaled.step.scaler for unscaled in found}
        if len(scalers) != 1 or None in scalers:
            return None
        scaler = scalers.pop()
        assert scaler is not None
        if not all(self._names_the_scaler(backward.call, u.step.call, scaler) for u in found):
            return None
        tensor = _backpropagated(backward.call)
        if tensor is None:
            return None
        wrapped = cst.Call(
            func=cst.Attribute(value=cst.parse_expression(scaler), attr=cst.Name("scale")),
            args=(cst.Arg(_bare(tensor)),),
        )
        func = backward.call.func
        # `(loss / n).backward()`: the parentheses lie outside the tensor's own range, so the
        # whole `<tensor>.backward` is rewritten to drop them.
        replacement: tuple[cst.CSTNode, cst.CSTNode] = (
            (func, func.with_changes(value=wrapped))
            if isinstance(func, cst.Attribute) and func.value is tensor
            else (tensor, wrapped)
        )
        return NodeFix(f"backpropagate `{scaler}.scale(...)`", (replacement,), UNSAFE)

    def _names_the_scaler(self, backward: cst.Call, step: cst.Call, scaler: str) -> bool:
        """``scaler`` means the same object where the backward is written."""
        index = self._index
        if index.enclosing_function(backward) is index.enclosing_function(step):
            return True
        cls = index.enclosing_class(backward)
        return scaler.startswith("self.") and cls is not None and cls is index.enclosing_class(step)


def _backpropagated(call: cst.Call) -> cst.BaseExpression | None:
    """The tensor a plain backward starts from: ``R`` of ``R.backward(...)``, the first
    argument of ``torch.autograd.backward(...)``."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "backward":
        owner = dotted_name(func.value)
        if owner is None or not owner.endswith("autograd"):
            return func.value
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value == "tensors":
            return arg.value
    return None


def _reduced_from(tensor: cst.BaseExpression) -> cst.BaseExpression:
    """What ``tensor`` reduces or rescales: ``loss`` of ``loss.mean()``, ``loss.sum() / n``,
    ``(loss * w).mean()``. Such a tensor is scaled when that one is (the reductions are
    linear): ``loss = scaler.scale(loss)`` then ``loss.mean().backward()``."""
    while True:
        if (
            isinstance(tensor, cst.Call)
            and isinstance(tensor.func, cst.Attribute)
            and tensor.func.attr.value in _LINEAR_REDUCTIONS
        ):
            tensor = tensor.func.value
        elif isinstance(tensor, cst.BinaryOperation) and isinstance(
            tensor.operator, cst.Divide | cst.Multiply
        ):
            if _is_scaling_call(tensor):
                return tensor
            tensor = tensor.left
        else:
            return tensor


def _bare(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` without its own parentheses: ``loss / n`` of ``(loss / n)``."""
    return node.with_changes(lpar=(), rpar=()) if node.lpar else node


def _is_scaling_call(node: cst.BaseExpression) -> bool:
    """A scaled tensor's expression: ``<anything>.scale(x)``, ``amp.scale_loss(x, opt)``
    (through ``cast(T, ...)``), or a hand-scaled ``loss * self.loss_scale`` /
    ``loss * scaler.get_scale()`` (a custom scaler's static loss scale)."""
    while (
        isinstance(node, cst.Call) and dotted_name(node.func) in ("cast", "typing.cast")
    ) and len(node.args) == 2:
        node = node.args[1].value
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return _names_a_scale(node.left) or _names_a_scale(node.right)
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _SCALING_METHODS
    )


def _names_a_scale(node: cst.BaseExpression) -> bool:
    """``self.loss_scale``, ``scaler.get_scale()``, ``cur_scale``."""
    if isinstance(node, cst.Call):
        node = node.func
    name = dotted_name(node)
    return name is not None and "scale" in last_part(name).lower()


def _one_line(text: str) -> str:
    return " ".join(text.split())
