"""AMP012 scaled-gradients-observed."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.iterations import (
    Event,
    Iteration,
    Kind,
    TrainingIterations,
    gradient_loggers,
    may_run_before,
    of_module,
    unscaling_calls,
)
from linter.model.syntax import ModuleIndex, dotted_name, last_part, module_index
from linter.model.values import is_disabled, may_name_a_scaler

#: Longest call text quoted in a message; longer reads are named by their function.
_QUOTED = 40


class ScaledGradientsObserved(Rule):
    """Reading gradients while they are still multiplied by the loss scale.

    ## What it does
    Flags a look at gradient values — a statistic of a `.grad` (`p.grad.norm()`,
    `p.grad.abs().max()`, `torch.linalg.vector_norm(p.grad)`), torch's `get_total_norm`, a
    histogram of `p.grad` (`writer.add_histogram`, `wandb.Histogram`) — whose value is used
    (logged, returned, compared), when it runs after `scaler.scale(loss).backward()` and before
    `scaler.unscale_(optimizer)` or `scaler.step(optimizer)` in one training iteration. The
    iteration is the one AMP003 reads: a loop body or per-step function, with the functions of
    the same file it calls (a `grad_norm(model)` helper) and its micro-batch loops. A read in
    such a helper is reported at the call that runs it before `unscale_` (the helper's read is
    a related location): the helper is right wherever its caller unscales first, so a helper
    called both before and after `unscale_` is reported at the early call only.

    Also flags `wandb.watch(model)` with `log="gradients"` (the default) or `log="all"` in a
    file that runs a scaled backward: wandb records each gradient from a hook on the backward
    pass, so it always sees scaled values, whatever `unscale_` does later.

    Not reported:

    - a read after an `unscale_` (of any optimizer, even under its own condition) or after
      `scaler.step`, which unscales the gradients in place; a call named like an unscale or
      handed the scaler before it (`accelerator.unscale_gradients()`, `hooks.before_log(scaler)`);
    - a read on the fp32 path (`if scaler: scaled backward ... else: loss.backward(); log norm`),
      or under a scaler built `enabled=False` (its scale is 1);
    - an overflow check: `torch.isfinite(p.grad).all()`, `math.isfinite(total_norm)` — inf and
      nan survive the scale, so these answer right on scaled gradients;
    - a norm only handed to a clip (`clip_grads_with_norm_(params, 1.0, total)`): AMP003's;
    - a read in a function that divides by the scale (`total / scaler.get_scale()`): unscaled
      by hand; a gradient divided by the scale before the statistic is no read at all;
    - a norm assigned to a name nothing reads.

    ## Why is this bad?
    Until `unscale_`, every gradient is the true one times the loss scale — 65536 at the start,
    then whatever the scaler has grown or halved it to. A logged gradient norm is off by that
    factor and jumps whenever the scale moves, so plots show exploding or vanishing gradients
    that are not there and hide the ones that are; a norm compared with a threshold (skip the
    step, warn, adapt the learning rate) compares against a moving target.
    `examples/grad_norm_logged_before_unscale.py` shows it on the CPU: the norm it logs is
    exactly 65536 times the one the optimizer applies. PyTorch's AMP notes say gradients must be
    unscaled before they are inspected as well as before they are modified.

    ## Example
    ```python
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
        wandb.log({"grad_norm": grad_norm})
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
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
        wandb.log({"grad_norm": grad_norm})
        scaler.step(optimizer)
        scaler.update()
    ```
    `scaler.step` then does not unscale again. For `wandb.watch`, watch with
    `log="parameters"` and log the unscaled gradient norm yourself, as above.

    ## References
    - wandb logs the scaled gradients of a GradScaler run; the reporter suggests logging them at
      the optimizer step instead of on the backward pass (open):
      [wandb/wandb#9092](https://github.com/wandb/wandb/issues/9092); an earlier report, with
      `unscale_` called before clipping and wandb still logging scaled values:
      [wandb/wandb#4369](https://github.com/wandb/wandb/issues/4369)
    - Lightning clipped and inspected native-AMP gradients while still scaled (open):
      [Lightning-AI/pytorch-lightning#9694](https://github.com/Lightning-AI/pytorch-lightning/issues/9694);
      gradient norms logged in `on_after_backward` under 16-bit precision are scaled:
      [#4151](https://github.com/Lightning-AI/pytorch-lightning/issues/4151), and
      `track_grad_norm` logged scaled values in 1.4:
      [#9205](https://github.com/Lightning-AI/pytorch-lightning/issues/9205)
    - a project that fixed its logging by unscaling first:
      [languini-kitchen#7](https://github.com/languini-kitchen/languini-kitchen/pull/7)
    - PyTorch's AMP examples, "Working with Unscaled Gradients":
      [amp_examples](https://pytorch.org/docs/stable/notes/amp_examples.html#working-with-unscaled-gradients)
    """

    code = "AMP012"
    name = "scaled-gradients-observed"
    summary = "gradient values are logged or compared while still multiplied by the loss scale"
    # A read spells `.grad` before a method or as an argument, or calls get_total_norm; a
    # logger is `watch(`.
    triggers = (".grad.", ".grad)", ".grad,", "get_total_norm", "watch(")
    valid = (
        Example(
            """\
import torch

for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    print(f"grad norm {norm:.3f}")
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch

for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    if not all(torch.isfinite(p.grad).all() for p in model.parameters()):
        print("overflow: this step will be skipped")
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
for batch in loader:
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        writer.add_histogram("fc.grad", model.fc.weight.grad, step)
        optimizer.step()
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda", enabled=False)
for batch in loader:
    scaler.scale(model(batch)).backward()
    print(model.fc.weight.grad.norm())
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
for batch in loader:
    scaler.scale(model(batch)).backward()
    scaler.step(optimizer)
    scaler.update()
    print(model.fc.weight.grad.norm())
"""
        ),
        Example(
            """\
import wandb

wandb.watch(model, log="parameters")
for batch in loader:
    scaler.scale(model(batch)).backward()
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch

for batch in loader:
    scaler.scale(model(batch)).backward()
    scaler.unscale_(optimizer)
    total = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    torch.nn.utils.clip_grads_with_norm_(model.parameters(), 1.0, total)
    scaler.step(optimizer)
    scaler.update()
"""
        ),
    )
    invalid = (
        Example(
            """\
import torch

for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    print(f"grad norm {norm:.3f}")
    scaler.step(optimizer)
    scaler.update()
""",
            (5,),
        ),
        Example(
            """\
for step, batch in enumerate(loader):
    scaler.scale(model(batch)).backward()
    for name, p in model.named_parameters():
        writer.add_histogram(name + "/grad", p.grad, step)
    scaler.step(optimizer)
    scaler.update()
""",
            (4,),
        ),
        Example(
            """\
def grad_norm(model):
    return sum(p.grad.detach().norm() ** 2 for p in model.parameters()) ** 0.5


for batch in loader:
    scaler.scale(model(batch)).backward()
    logger.log({"grad_norm": grad_norm(model)})
    scaler.step(optimizer)
    scaler.update()
""",
            (7,),
        ),
        Example(
            """\
for batch in loader:
    if use_amp:
        scaler.scale(loss).backward()
    else:
        loss.backward()
    if model.head.weight.grad.abs().max() > 1e3:
        print("large gradients")
    scaler.step(optimizer)
    scaler.update()
""",
            (6,),
        ),
        Example(
            """\
import torch

for batch in loader:
    for micro in batch.split(4):
        scaler.scale(model(micro) / 4).backward()
        print(torch.linalg.vector_norm(model.fc.weight.grad))
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
""",
            (6,),
        ),
        Example(
            """\
import wandb

wandb.watch(model, log="all", log_freq=100)
for batch in loader:
    scaler.scale(model(batch)).backward()
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
""",
            (3,),
        ),
        Example(
            """\
class Trainer:
    def train_step(self, batch):
        self.scaler.scale(self.model(batch)).backward()
        norms = [p.grad.norm().item() for p in self.model.parameters()]
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return max(norms)
""",
            (4,),
        ),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        # A finding needs the scaled backward or the scaler's step, here or in a function it
        # calls.
        return super().wants(text) and may_name_a_scaler(text)

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        model = of_module(context)
        index = module_index(context)
        yield from _watched(context, model, index)
        if not any(event.kind is Kind.GRAD_READ for event in model.events):
            return
        unscalers = unscaling_calls(model, index)
        dividing = _dividing_by_the_scale(index)
        # By where the read happens as its iteration sees it: a helper's read at each per-step
        # call that runs it (the helper's own line is right wherever the caller unscales first).
        found: dict[cst.Call, tuple[list[Event], Event, Iteration]] = {}
        covered: set[cst.Call] = set()
        for iteration in model.iterations:
            if not iteration.of(Kind.SCALER_STEP, Kind.UPDATE):
                continue  # not an AMP iteration
            for read in iteration.of(Kind.GRAD_READ):
                backward = _scaled_backward_before(index, iteration, read)
                if backward is None or index.enclosing_function(read.call) in dividing:
                    continue
                if _unscaled_before(model, index, iteration, read, backward, unscalers):
                    covered.add(_site(context, read))
                else:
                    reads = found.setdefault(_site(context, read), ([], backward, iteration))[0]
                    if all(r.call is not read.call for r in reads):
                        reads.append(read)
        for site, (reads, backward, iteration) in sorted(
            found.items(), key=lambda item: index.order[item[0]]
        ):
            if site not in covered:
                yield _finding(context, site, reads, backward, iteration)


def _site(context: ModuleContext, read: Event) -> cst.Call:
    """Where a read is reported: a read in a function of another module at the call here that
    runs it (the engine places a node of that function there), one in a helper of this module
    at the call in the iteration that runs it (the helper is right wherever its caller
    unscales first), any other where it is."""
    return read.call if read.call in context.foreign else read.site


def _dividing_by_the_scale(index: ModuleIndex) -> set[cst.CSTNode | None]:
    """Functions that divide something by the scaler's scale (``norm / scaler.get_scale()``):
    a read there may be unscaled by hand."""
    found: set[cst.CSTNode | None] = set()
    for call in index.calls_named(".get_scale"):
        for ancestor in index.ancestors(call):
            if isinstance(ancestor, cst.BinaryOperation) and isinstance(
                ancestor.operator, cst.Divide
            ):
                found.add(index.enclosing_function(call))
                break
            if isinstance(ancestor, cst.BaseSmallStatement | cst.FunctionDef):
                break
    return found


def _unscaled_before(
    model: TrainingIterations,
    index: ModuleIndex,
    iteration: Iteration,
    read: Event,
    backward: Event,
    unscalers: list[cst.Call],
) -> bool:
    """An ``unscale_`` or ``scaler.step`` (which unscales in place) may run before ``read``, or
    a call that may unscale; or the file unscales in a function no iteration reaches (a hook
    the trainer may call first)."""
    if any(
        iteration.may_precede(event, read) for event in iteration.of(Kind.UNSCALE, Kind.SCALER_STEP)
    ):
        return True
    if any(may_run_before(model, index, call, read) for call in unscalers):
        return True
    scaler = last_part(backward.scaler or "")
    return any(
        event.kind is Kind.UNSCALE
        and last_part(event.scaler or scaler) == scaler
        and not model.holding(event.call)
        for event in model.events
    )


def _scaled_backward_before(index: ModuleIndex, iteration: Iteration, read: Event) -> Event | None:
    """The last scaled backward, through a scaler that scales, that may run before ``read`` on
    a path that also runs ``read``."""
    backwards = [
        backward
        for backward in iteration.of(Kind.SCALED_BACKWARD)
        if iteration.may_precede(backward, read)
        and not iteration.exclusive(backward, read)
        and not is_disabled(index, backward.scaler)
    ]
    return backwards[-1] if backwards else None


def _finding(
    context: ModuleContext,
    site: cst.Call,
    reads: list[Event],
    backward: Event,
    iteration: Iteration,
) -> Finding:
    """One finding per site: a read, or the call of a helper that makes ``reads``."""
    read = reads[0]
    scaler = backward.scaler or "scaler"
    steps = [s for s in iteration.of(Kind.SCALER_STEP) if iteration.may_precede(read, s)]
    optimizer = steps[0].optimizer if steps and steps[0].optimizer else "optimizer"
    if backward.via is not None and steps and steps[0].scaler:
        scaler = steps[0].scaler  # as this module names it, not the other module's words
    text = context.module.code_for_node(site)
    if len(text) > _QUOTED or "\n" in text:
        text = f"{last_part(dotted_name(site.func) or 'read')}(...)"
    message = (
        f"`{text}` reads gradients still multiplied by the loss scale (after "
        f"`{scaler}.scale(...).backward()`, before `{scaler}.unscale_({optimizer})`): the value "
        f"is off by the scale factor and jumps when the scale changes; call "
        f"`{scaler}.unscale_({optimizer})` before reading"
    )
    related: list[tuple[cst.CSTNode, str]] = [(backward.site, "scaled backward")]
    if site is not read.call:
        # The helper reads nothing wrong by itself: this call runs it before `unscale_`.
        related += [(r.call, "the gradients are read here") for r in reads]
    elif read.via is not None:
        related.append((read.via, "read called here"))
    return Finding(site, message, related=tuple(related))


def _watched(
    context: ModuleContext, model: TrainingIterations, index: ModuleIndex
) -> Iterable[Finding]:
    """``wandb.watch(model)`` logging gradients in a file that runs a scaled backward."""
    backwards = [
        event
        for event in model.events
        if event.kind is Kind.SCALED_BACKWARD and not is_disabled(index, event.scaler)
    ]
    if not backwards:
        return
    for call in gradient_loggers(index, model.aliases):
        backward = next((b for b in backwards if not model.facts.exclusive(call, b.call)), None)
        if backward is None:
            continue
        scaler = backward.scaler or "scaler"
        message = (
            f"`{dotted_name(call.func)}(...)` logs gradients from hooks on the backward pass, so "
            f"under `{scaler}.scale(loss).backward()` it records them multiplied by the loss "
            f"scale (a later `unscale_` cannot change what it saw); watch with "
            f'`log="parameters"` and log gradient norms after `{scaler}.unscale_(...)`'
        )
        yield Finding(call, message, related=((backward.call, "scaled backward"),))
