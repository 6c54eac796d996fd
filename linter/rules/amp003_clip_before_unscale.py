"""AMP003 clip-before-unscale."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from linter._fix import UNSAFE, NodeFix
from linter._fix_edits import line_before
from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.iterations import (
    Event,
    Iteration,
    Kind,
    ScaledClip,
    TrainingIterations,
    accelerate_backwards,
    in_a_nested_loop,
    may_run_before,
    may_scale_fp16,
    of_module,
    scaled_clips,
    under_the_steps_conditions,
    unscaling_calls,
)
from linter.model.syntax import ModuleIndex, dotted_name, last_part, module_index


class ClipBeforeUnscale(Rule):
    """Clipping gradients that are still multiplied by the loss scale.

    ## What it does
    Flags `torch.nn.utils.clip_grad_norm_` / `clip_grad_value_` / `clip_grads_with_norm_`
    (under any import alias; also an FSDP module's `clip_grad_norm_` method) that runs after
    `scaler.scale(loss).backward()` and before `scaler.step(optimizer)` in one training
    iteration, with no `scaler.unscale_(optimizer)` that may run before it in that iteration.

    An iteration is a loop body or a per-step function (`train_step`, a Lightning hook, an
    optimizer wrapper's `step`), with the functions of the same file it calls: a backward in
    `self.backward(loss)` and a clip in `self.clip_gradients()` belong to the loop that calls
    them. A micro-batch loop inside it (gradient accumulation) is part of the iteration, so a
    clip after every micro-batch backward is reported too. A trainer method that clips and then
    calls `self.scaler.step(...)` with the backward written elsewhere is reported when the
    scaler is provably a `GradScaler` and nothing in the file unscales it.

    Accelerate's variant is reported too: torch's clip after `accelerator.backward(loss)` and
    before a plain `optimizer.step()`, with no `accelerator.unscale_gradients()` before it. The
    accelerator may have any name the module assigns an `Accelerator(...)` to (`self._driver`),
    and its backward may sit in a method the step calls (`self._backward(loss)`).
    Under fp16 mixed precision Accelerate's backward scales the loss and the prepared
    optimizer's `step()` unscales only then; `accelerator.clip_grad_norm_` unscales first. Not
    where every `Accelerator(...)` of the file pins another precision
    (`mixed_precision="bf16"`), nor with DeepSpeed, whose engine scales and clips itself.

    Not reported:

    - an `unscale_` of the stepped optimizer (or of an unknown one) on some path before the clip,
      even under its own condition (nanoGPT's `if grad_clip != 0.0: scaler.unscale_(optimizer)`),
      or in a method called before the clip; any call whose name says it unscales
      (`accelerator.unscale_gradients()`, `self._unscale_grads()`);
    - a clip on the non-AMP path (`if scaler: scaled backward ... else: loss.backward(); clip`),
      or after a plain `loss.backward()` whose optimizer is stepped directly;
    - a clip of a scaler that the file also unscales in a function no iteration reaches (a hook
      or callback method that the trainer may call between backward and clip);
    - clips done by wrappers that unscale first: `accelerator.clip_grad_norm_`, Lightning's
      `clip_gradients`, DeepSpeed engines;
    - a clip after `scaler.step(...)`: it no longer changes this step's update;
    - a clip at a threshold multiplied by the loss scale (`max_norm * scaler.get_scale()`,
      `* scaler._scale`, a name bound to one): the norm and the threshold carry the same factor,
      so it clips as an unscaled clip at `max_norm` would (MMF's trainer). The product may be
      written in the clip, in a local variable, or in a parameter whose callers pass it — the
      call of a helper in another module (`clip_gradients(..., scale=self.scaler.get_scale())`
      with `max_norm * scale` inside), or every call of the function that clips, in this module
      or in others. A quotient counts only with the scale above the line.

    Reading a gradient norm without clipping (`torch.nn.utils.get_total_norm`, a hand-written
    `p.grad.norm()`) is not reported: most such reads only log, and telling a logged norm from
    one that decides something needs data flow the linter does not track.

    ### Fix
    Unsafe (`--fix --unsafe-fixes`): inserts `<scaler>.unscale_(<optimizer>)` on its own line
    before the clip's statement, with the scaler and optimizer of the `scaler.step(...)` that
    follows. Offered only when that is one optimizer, the clip is a plain statement in the same
    function as the step, not in a loop nested in the iteration (a second `unscale_` before
    `update()` raises), and under every condition that guards the step (otherwise the inserted
    call could run when the step does not — on the non-AMP path where the scaler may be `None`,
    or on the micro-batches of gradient accumulation). Unsafe because it changes what the clip
    does: that is the point, but training curves change.

    ## Why is this bad?
    After `scaler.scale(loss).backward()` every gradient is multiplied by the loss scale
    (65536 at the start, often far more later). `clip_grad_norm_(params, 1.0)` then measures a
    norm tens of thousands of times too large and shrinks every step's gradients to a tiny
    fraction of their size: training converges very slowly or not at all ("the loss converged
    very slow", a priority-0 Lightning bug:
    [Lightning-AI/pytorch-lightning#9599](https://github.com/Lightning-AI/pytorch-lightning/issues/9599),
    also [#9330](https://github.com/Lightning-AI/pytorch-lightning/issues/9330)).
    `clip_grad_value_` cuts at a threshold that means nothing for scaled values. PyTorch's
    [AMP examples](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping)
    call `scaler.unscale_(optimizer)` first; `scaler.step` then does not unscale again.
    `examples/clip_before_unscale.py` measures it on the CPU: the clip sees a norm of about
    1e5 instead of 0.2, and after 60 steps the loss is ~90x higher than with `unscale_` first.

    The same bug, reported and fixed in
    [pytorch/examples#1196](https://github.com/pytorch/examples/issues/1196),
    [catalyst#1319](https://github.com/catalyst-team/catalyst/issues/1319),
    [returnn#1590](https://github.com/rwth-i6/returnn/issues/1590),
    [EveryDream2trainer#175](https://github.com/victorchall/EveryDream2trainer/pull/175),
    [Pytorch-UNet#470](https://github.com/milesial/Pytorch-UNet/pull/470) and
    [TorchSSL#59](https://github.com/TorchSSL/TorchSSL/pull/59).

    ## Example
    ```python
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    ```

    """

    code = "AMP003"
    name = "clip-before-unscale"
    summary = "gradients are clipped while still multiplied by the loss scale (no unscale_ first)"
    # Every clip function is named `clip_grad...`; the step it precedes is `<scaler>.step(`.
    fix_availability = UNSAFE
    triggers = ("clip_grad",)
    valid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
for it in range(max_iters):
    scaler.scale(loss).backward()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch


class Trainer:
    def unscale_and_clip(self):
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)

    def fit(self, loader):
        for batch in loader:
            self.scaler.scale(self.model(batch)).backward()
            self.unscale_and_clip()
            self.scaler.step(self.optimizer)
            self.scaler.update()
"""
        ),
        Example(
            """\
import torch

for batch in loader:
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
"""
        ),
        Example(
            """\
for batch in train_dataloader:
    accelerator.backward(model(**batch).loss)
    accelerator.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
"""
        ),
        Example(
            """\
from torch.nn.utils import clip_grad_norm_

for batch in loader:
    model(batch).backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
"""
        ),
        Example(
            """\
import torch

for batch in loader:
    scaler.scale(loss_d).backward()
    scaler.unscale_(opt_d)
    torch.nn.utils.clip_grad_norm_(disc.parameters(), 1.0)
    scaler.step(opt_d)
    scaler.scale(loss_g).backward()
    scaler.step(opt_g)
    scaler.update()
"""
        ),
    )
    invalid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
            (6,),
        ),
        Example(
            """\
from torch.nn.utils.clip_grad import clip_grad_value_ as clip

for batch in loader:
    scaler.scale(model(batch).loss).backward()
    if max_grad_value:
        clip(model.parameters(), max_grad_value)
    scaler.step(optimizer)
    scaler.update()
""",
            (6,),
        ),
        Example(
            """\
import torch


class Model:
    def train_one_step(self, batch):
        loss = self.loss(batch) / self.accumulation_steps
        if self.fp16:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()
        torch.nn.utils.clip_grad_norm_(self.parameters(), self.max_norm)
        if (self.batch_index + 1) % self.accumulation_steps == 0:
            if self.fp16:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
""",
            (11,),
        ),
        Example(
            """\
import torch

for batch in loader:
    for micro in batch.split(4):
        scaler.scale(model(micro) / 4).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
""",
            (6,),
        ),
        Example(
            """\
import torch


class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")

    def optimizer_step(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
            (9,),
        ),
        Example(
            """\
import torch

for batch in loader:
    scaler.scale(loss_d).backward()
    scaler.unscale_(opt_d)
    torch.nn.utils.clip_grad_norm_(disc.parameters(), 1.0)
    scaler.step(opt_d)
    scaler.scale(loss_g).backward()
    torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)
    scaler.step(opt_g)
    scaler.update()
""",
            (9,),
        ),
        Example(
            """\
import torch


class Trainer:
    def backward(self, loss):
        self.grad_scaler.scale(loss).backward()

    def clip(self):
        return torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)

    def fit(self, loader):
        for batch in loader:
            self.backward(self.model(batch))
            norm = self.clip()
            self.grad_scaler.step(self.optimizer)
            self.grad_scaler.update()
""",
            (9,),
        ),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        # A finding needs a clip and a `<scaler>.step(` after it.
        return "clip_grad" in text and ".step(" in text

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        model = of_module(context)
        if not any(event.kind is Kind.CLIP for event in model.events):
            return
        index = module_index(context)
        unscalers = unscaling_calls(model, index)
        verdicts = scaled_clips(model, index, unscalers)
        fixed_steps: set[cst.Call] = set()
        for scaled in verdicts.scaled:
            fix = None
            if scaled.step.call not in fixed_steps:
                fix = _unscale_fix(context, model, index, scaled)
                if fix is not None:
                    fixed_steps.add(scaled.step.call)
            yield _finding(scaled, fix, index, model)
        reported = set(verdicts.judged)
        yield from _after_accelerate_backward(context, model, index, unscalers, reported)


def _after_accelerate_backward(
    context: ModuleContext,
    model: TrainingIterations,
    index: ModuleIndex,
    unscaling_calls: list[cst.Call],
    reported: set[cst.Call],
) -> Iterable[Finding]:
    """``accelerator.backward(loss)``, then torch's clip, then ``optimizer.step()``: under fp16
    mixed precision the clip sees scaled gradients
    (`linter.model.iterations._accelerate_backwards`)."""
    backwards = accelerate_backwards(index)
    if not backwards or not may_scale_fp16(context, index):
        return
    for iteration in model.iterations:
        for clip in iteration.of(Kind.CLIP):
            if clip.call in reported or not _clips_before_a_plain_step(iteration, clip):
                continue
            if any(iteration.may_precede(u, clip) for u in iteration.of(Kind.UNSCALE)) or any(
                may_run_before(model, index, call, clip) for call in unscaling_calls
            ):
                continue
            backward = next((b for b in backwards if may_run_before(model, index, b, clip)), None)
            if backward is None:
                continue
            reported.add(clip.call)
            function = last_part(dotted_name(clip.call.func) or "clip_grad_norm_")
            receiver = dotted_name(cst.ensure_type(backward.func, cst.Attribute).value)
            message = (
                f"`{function}` after `{receiver}.backward(...)` clips gradients that are still "
                f"multiplied by the loss scale when Accelerate runs fp16 mixed precision; use "
                f"`{receiver}.{function}(...)`, which unscales them first"
            )
            yield Finding(clip.call, message, related=((backward, "Accelerate backward"),))


def _clips_before_a_plain_step(iteration: Iteration, clip: Event) -> bool:
    """An ``optimizer.step()`` and no ``scaler.step`` may follow the clip."""
    follows = [
        step
        for step in iteration.of(Kind.OPTIMIZER_STEP, Kind.SCALER_STEP)
        if iteration.may_precede(clip, step)
    ]
    return bool(follows) and all(step.kind is Kind.OPTIMIZER_STEP for step in follows)


def _finding(
    scaled: ScaledClip, fix: NodeFix | None, index: ModuleIndex, model: TrainingIterations
) -> Finding:
    clip = scaled.clip.call
    scaler = scaled.step.scaler or "scaler"
    optimizer = scaled.step.optimizer or "optimizer"
    function = last_part(dotted_name(clip.func) or "clip_grad_norm_")
    if in_a_nested_loop(index, scaled):
        advice = (
            "it runs in a loop inside the iteration (micro-batches?): clip once, after the loop "
            f"and after `{scaler}.unscale_({optimizer})`"
        )
    elif not under_the_steps_conditions(index, model, scaled):
        advice = (
            f"clip under the conditions where `{scaler}.step({optimizer})` runs, after "
            f"`{scaler}.unscale_({optimizer})`"
        )
    else:
        advice = f"call `{scaler}.unscale_({optimizer})` before it"
    message = (
        f"`{function}` clips gradients still multiplied by the loss scale (no "
        f"`{scaler}.unscale_({optimizer})` runs before it in the iteration that calls "
        f"`{scaler}.step({optimizer})`), so its threshold applies to scaled values; {advice}"
    )
    related: list[tuple[cst.CSTNode, str]] = []
    if scaled.backward is not None:
        related.append((scaled.backward.site, "scaled backward"))
    related.append((scaled.step.site, "scaler step"))
    if scaled.clip.via is not None:
        related.append((scaled.clip.via, "clip called here"))
    return Finding(clip, message, related=tuple(related), fix=fix)


def _unscale_fix(
    context: ModuleContext, model: TrainingIterations, index: ModuleIndex, scaled: ScaledClip
) -> NodeFix | None:
    """``<scaler>.unscale_(<optimizer>)`` on its own line before the clip's statement, when that
    is safe to propose (see the rule's Fix section); None otherwise."""
    clip, step, iteration = scaled.clip.call, scaled.step, scaled.iteration
    optimizers = {s.optimizer for s in iteration.of(Kind.SCALER_STEP)}
    if step.scaler is None or step.optimizer is None or optimizers != {step.optimizer}:
        return None
    if index.enclosing_function(clip) is not index.enclosing_function(step.call):
        return None
    if in_a_nested_loop(index, scaled):
        return None  # a micro-batch loop: a second unscale_ before update() raises
    if not under_the_steps_conditions(index, model, scaled):
        return None
    call = f"{step.scaler}.unscale_({step.optimizer})"
    replacement = line_before(context, index, clip, call)
    if replacement is None:
        return None
    return NodeFix(f"call `{call}` first", (replacement,), UNSAFE)
