"""AMP006 backward-without-scale."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import libcst as cst

from linter._fix import UNSAFE, NodeFix
from linter._fix_edits import without_parentheses, wrapped_in_call
from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.iterations import (
    DISABLED,
    Event,
    Iteration,
    Kind,
    ScalerSwitches,
    TrainingIterations,
    backpropagated,
    backpropagates_scaled,
    discarded_scale,
    feeds_a_plain_optimizer,
    never_together,
    of_module,
    reaches,
    scaler_off,
    scaler_switches,
)
from linter.model.syntax import ModuleIndex, module_index
from linter.model.values import same_scaler


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
      blocks, a helper's `if scaler:` branch read with the caller's argument, a model's method
      that branches on the scaler it owns (`if self.grad_scaler is not None:`) while the loop
      steps it as `model.grad_scaler`, a branch where the scaler is `None` or disabled;
    - a scaler created `GradScaler(enabled=False)` (its scale is 1), or one created
      `GradScaler(enabled=args.amp)` when the backward only runs with `args.amp` off;
    - a plain backward whose gradients an `optimizer.step()` or `zero_grad()` consumes before
      the scaler steps, or that may feed another optimizer stepped directly: a GAN whose
      discriminator trains in fp32 (`d_loss.backward(); opt_d.step()`) while the generator
      uses the scaler;
    - wrappers that scale for you: `accelerator.backward(loss)`, Lightning's
      `manual_backward`, DeepSpeed's `engine.backward(loss)`.

    A scaler created `GradScaler(enabled=args.amp)` still scales when the flag is on, so an
    unconditional plain backward is reported, with the switch named in the message. A scaler
    built under the script's `if __name__ == "__main__":` is built on every run: the plain arm
    of `if use_fp16:` that reaches its step is reported.

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
        query = _Query(context, index, model, scaler_switches(index, model))
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

    def unscaled_backwards(self, iteration: Iteration) -> Iterator[UnscaledBackward]:
        """The plain backwards of ``iteration`` whose gradients a scaler step may unscale."""
        model, index = self._model, self._index
        steps = iteration.of(Kind.SCALER_STEP)
        if not steps:
            return
        for backward in iteration.of(Kind.BACKWARD):
            if backpropagates_scaled(index, backward.call) or feeds_a_plain_optimizer(
                model, iteration, backward, steps
            ):
                continue
            for step in steps:
                switches = self._switches.of(step.scaler, step.call)
                if switches == DISABLED or not reaches(model, index, iteration, backward, step):
                    continue
                known = switches if isinstance(switches, list) else []
                if scaler_off(model.facts, model.conditions(backward), step.scaler or "", known):
                    continue
                always_on = any(not switch.facts for switch in known)
                if not always_on and self._scaled_on_another_branch(iteration, backward, step):
                    continue
                enabling = [switch.enabled for switch in known if switch.enabled is not None]
                yield UnscaledBackward(
                    backward,
                    step,
                    enabling[0] if enabling else None,
                    discarded_scale(self._context, index, model, backward.call),
                )

    def _scaled_on_another_branch(self, iteration: Iteration, backward: Event, step: Event) -> bool:
        """``if args.fp16: scaler.scale(loss).backward() else: loss.backward()`` with a scaler
        that is not always on (built elsewhere, switched, or built under a condition): the
        branch is the scaler's switch, however spelled (``GradScaler(enabled=self.use_amp)``
        and ``if args.fp16:``), so the plain arm runs with the scaler disabled. The scaled arm may
        spell the scaler otherwise than the step (``self.grad_scaler`` in the model's method,
        ``grad_scaler = model.grad_scaler`` in the loop that steps it)."""
        return any(
            same_scaler(scaled.scaler, step.scaler)
            and never_together(self._model, iteration, scaled, backward)
            for scaled in iteration.of(Kind.SCALED_BACKWARD)
        )

    def finding(self, found: list[UnscaledBackward]) -> Finding:
        first = found[0]
        code = self._context.module.code_for_node
        backward = code(first.backward.call)
        step = code(first.step.call)
        line = self._context.position(first.step.call).start.line
        scaler = first.step.scaler or "scaler"
        tensor = backpropagated(first.backward.call)
        tensor_text = code(without_parentheses(tensor)).strip() if tensor is not None else "loss"
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
        tensor = backpropagated(backward.call)
        if tensor is None:
            return None
        scale = cst.Attribute(value=cst.parse_expression(scaler), attr=cst.Name("scale"))
        replacement = wrapped_in_call(tensor, scale, around=backward.call.func)
        return NodeFix(f"backpropagate `{scaler}.scale(...)`", (replacement,), UNSAFE)

    def _names_the_scaler(self, backward: cst.Call, step: cst.Call, scaler: str) -> bool:
        """``scaler`` means the same object where the backward is written."""
        index = self._index
        if index.enclosing_function(backward) is index.enclosing_function(step):
            return True
        cls = index.enclosing_class(backward)
        return scaler.startswith("self.") and cls is not None and cls is index.enclosing_class(step)


def _one_line(text: str) -> str:
    return " ".join(text.split())
