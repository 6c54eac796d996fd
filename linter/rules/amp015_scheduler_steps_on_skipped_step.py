"""AMP015 scheduler-steps-on-skipped-step."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.iterations import Kind, of_module
from linter.model.steps import Bf16OnlySteps, Hold, is_epoch_loop, lr_schedulers
from linter.model.syntax import ModuleIndex, dotted_name, module_index
from linter.model.values import may_name_a_scaler


class SchedulerStepsOnSkippedStep(Rule):
    """An LR scheduler stepped on every iteration, also when the scaler skipped the step.

    ## What it does
    Flags `scheduler.step()` (a torch `lr_scheduler`, a transformers
    `get_*_schedule_with_warmup`, any scheduler-named object, called with no arguments) that runs
    once per training iteration in the same iteration as `scaler.step(optimizer)` — in the batch
    loop, in a `train_step`/`optimizer_step` function, or in the loop that calls the function
    that steps the scaler — with nothing that holds it back when that step was skipped. So
    does a scheduler fed a count that advances on every iteration (`scheduler.step(
    self.stats.steps)` beside `self.stats.steps += 1`, `scheduler.step(i)` in `for i, batch in
    enumerate(loader)`), and one stepped in a loop of the iteration that repeats it (`for _ in
    range(accum): scheduler.step()`). A test that guards the scaler's step as well
    (`if (i + 1) % multiplier == 0:` around both) runs the scheduler with that step, skipped or
    not, whatever it is named.

    Not reported:

    - a step held back by a skip check: `if scale_before <= scaler.get_scale():`,
      `if not scaler.step_skipped():`, a flag bound from one (`optimizer_was_run`), from
      `scaler.step()`'s result or named for it (`skipped`, `found_inf`), an early `continue`
      under such a test, a non-finite check after the backward (one on the loss before it,
      `if not torch.isfinite(loss): raise`, does not see the scaled gradients overflow);
    - a scheduler stepped once per epoch (after the batch loop, or in an epoch loop), or with
      an argument that is no per-iteration count (`step(val_loss)`, `step(epoch)`);
    - schedulers that hold themselves back or belong to a framework: ampscale's
      `SkipAwareScheduler`, one returned by `accelerator.prepare` or `deepspeed.initialize`
      (in the function that binds it: another function's `scheduler` parameter is another
      variable), Lightning's and Hugging Face Trainer's own;
    - a step under a test the linter cannot read (a periodic guard, an unknown condition), or
      in an arm that never runs the scaler's step (the plain `else:` of `if use_amp:`);
    - a scaler that is on, or stepped, only under a bf16 switch (`if use_bf16:`,
      `GradScaler(enabled=cfg.bf16)`) beside autocasts that then run bf16: bf16 does not
      overflow, so no step is skipped (AMP010 reports the scaler itself).

    This rule is **off by default**: it is right about most AMP training loops, which is too
    many reports for a default run. Turn it on with `--extend-select AMP015`.

    ## Why is this bad?
    With fp16, the first steps and every overflow after them make `scaler.step(optimizer)` skip
    the optimizer step (the gradients hold inf/NaN) and `update()` lower the scale. A scheduler
    stepped anyway advances the learning rate for a step that never happened: warmup ends early
    and decay runs ahead, by as many steps as were skipped (dozens at the start of training,
    and more after each instability). torch notices only the first time — "Detected call of
    `lr_scheduler.step()` before `optimizer.step()`" — and then says nothing. The schedule the
    run follows is not the one configured, and resuming or comparing runs gives different
    learning rates at the same step.

    ## Example
    ```python
    for batch in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(batch).loss
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    ```

    ## Use instead
    Wrap the scheduler in ampscale's `SkipAwareScheduler`, which advances only for applied
    optimizer steps and needs no host sync; or step it only when the scale did not go down:
    ```python
    from scaler import SkipAwareScheduler

    scheduler = SkipAwareScheduler(scheduler, scaler)
    for batch in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(batch).loss
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    ```

    ## References
    - [pytorch/pytorch#44511](https://github.com/pytorch/pytorch/issues/44511): the recipe of
      the AMP docs plus a scheduler step draws "Detected call of `lr_scheduler.step()` before
      `optimizer.step()`", because the scaler skipped the first optimizer step
    - [pytorch/pytorch#55585](https://github.com/pytorch/pytorch/issues/55585) (open):
      `scaler.step()` does not say whether it ran the optimizer, so a loop cannot tell whether
      to step the scheduler; the Trainer's workaround compares the scale before and after
      (huggingface/transformers PR #11144)
    - [Lightning-AI/pytorch-lightning#21339](https://github.com/Lightning-AI/pytorch-lightning/issues/21339)
      (and #18828): with 16-bit mixed precision Lightning steps the scheduler although the
      optimizer step was skipped
    - [huggingface/accelerate#4242](https://github.com/huggingface/accelerate/issues/4242):
      even Accelerate's scheduler wrapper, which is meant to hold back on skipped steps,
      advances with fused AdamW because the skip goes unnoticed
    """

    code = "AMP015"
    name = "scheduler-steps-on-skipped-step"
    summary = "an LR scheduler steps every iteration, also when scaler.step() skipped the step"
    triggers = (".step(",)
    default_enabled = False
    valid = (
        Example(
            """\
scaler = torch.amp.GradScaler("cuda")
for epoch in range(epochs):
    for batch in loader:
        scaler.scale(model(batch).loss).backward()
        scaler.step(optimizer)
        scaler.update()
    scheduler.step()  # once per epoch
"""
        ),
        Example(
            """\
for batch in loader:
    scaler.scale(model(batch).loss).backward()
    scale_before = scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()
    if scale_before <= scaler.get_scale():  # the step was applied
        scheduler.step()
"""
        ),
        Example(
            """\
from scaler import GradScaler, SkipAwareScheduler

scaler = GradScaler("cuda")
scheduler = SkipAwareScheduler(torch.optim.lr_scheduler.OneCycleLR(optimizer, 1e-3, 1000), scaler)
for batch in loader:
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
"""
        ),
        Example(
            """\
for batch in loader:
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()
    if not scaler.step_skipped():
        scheduler.step()
"""
        ),
        Example(
            """\
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
for batch in loader:
    accelerator.backward(model(batch).loss)
    optimizer.step()
    scheduler.step()  # AcceleratedScheduler skips with the optimizer
"""
        ),
        Example(
            """\
for batch in loader:
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step(val_loss)  # a plateau scheduler, fed a metric
"""
        ),
        Example(
            """\
for batch in loader:
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()
    skipped = scaler.get_scale() < scale_before
    if skipped:
        continue
    scheduler.step()
"""
        ),
    )
    invalid = (
        Example(
            """\
for batch in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(batch).loss
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
""",
            (7,),
        ),
        Example(
            """\
from transformers import get_linear_schedule_with_warmup

schedule = get_linear_schedule_with_warmup(optimizer, 100, 10_000)
for step, batch in enumerate(loader):
    scaler.scale(model(**batch).loss / accum).backward()
    if (step + 1) % accum == 0:
        scaler.step(optimizer)
        scaler.update()
        schedule.step()
        optimizer.zero_grad()
""",
            (9,),
        ),
        Example(
            """\
class Trainer:
    def optimizer_step(self):
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.lr_scheduler.step()
""",
            (7,),
        ),
        Example(
            """\
def train_step(model, batch, optimizer, scaler):
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()


for batch in loader:
    train_step(model, batch, optimizer, scaler)
    scheduler.step()
""",
            (9,),
        ),
        Example(
            """\
while step < max_steps:
    scheduler.step()
    scaler.scale(model(next(batches)).loss).backward()
    scaler.step(optimizer)
    scaler.update()
    step += 1
""",
            (2,),
        ),
        Example(
            """\
for batch in loader:
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()
    if scheduler is not None:
        scheduler.step()
""",
            (6,),
        ),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        # A finding needs the scaler's step in the iteration, here or in a function it calls.
        return super().wants(text) and may_name_a_scaler(text)

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        model = of_module(context)
        index = module_index(context)
        schedulers = lr_schedulers(index, model.receivers)
        paths = model.facts
        bf16_only = Bf16OnlySteps(index, model.aliases, paths, model.receivers)
        by_scope = {
            iteration.scope: iteration
            for iteration in model.iterations
            if iteration.of(Kind.SCALER_STEP)
        }
        counted = schedulers.counted_steps(by_scope)
        for call in [*schedulers.steps(), *counted]:
            scope = counted.get(call) or model.scope_of(call)
            while (
                isinstance(scope, cst.For | cst.While)
                and scope not in by_scope
                and not is_epoch_loop(scope)
                and not any(scope in index.ancestors(inner) for inner in by_scope)
            ):
                # A loop inside the iteration that repeats the scheduler's step (`for _ in
                # range(accum): scheduler.step()`) runs on every iteration too; a loop around
                # iterations of its own (an epoch's) does not.
                outer = model.scope_of(scope)
                if outer not in by_scope:
                    break
                scope = outer
            iteration = by_scope.get(scope)
            if iteration is None or (
                isinstance(scope, cst.For | cst.While) and is_epoch_loop(scope)
            ):
                continue
            backwards = iteration.of(Kind.SCALED_BACKWARD)
            backward = backwards[0].site if backwards else None
            # The scaler's steps a run can reach with this one (not the plain arm's `else:`).
            steps = [s for s in iteration.of(Kind.SCALER_STEP) if not paths.exclusive(s.site, call)]
            sites = [s.site for s in steps]
            if schedulers.hold(call, scope, backward, sites) is not Hold.NEVER:
                continue
            if not steps:
                continue
            if all(bf16_only.only_bf16(s.call, s.scaler) for s in steps):
                continue  # bf16 never overflows: the steps are not skipped (AMP010's case)
            step = steps[0]
            scheduler = dotted_name(call.func.value) or "scheduler"  # type: ignore[attr-defined]
            yield Finding(
                call,
                _counted_message(call, index) if call in counted else _message(scheduler),
                related=((step.site, "the scaler's step, skipped on inf/NaN gradients"),),
            )


def _message(scheduler: str) -> str:
    return (
        f"`{scheduler}.step()` runs every iteration, also when `scaler.step()` skips the optimizer "
        "step on inf/NaN gradients, so the schedule runs ahead of the optimizer steps taken; "
        f"wrap it in `scaler.SkipAwareScheduler({scheduler}, scaler)` or step it only when the "
        "step was applied"
    )


def _counted_message(call: cst.Call, index: ModuleIndex) -> str:
    text = index.module.code_for_node(call)
    return (
        f"`{text}` is fed a count that advances every iteration, also when `scaler.step()` "
        "skips the optimizer step on inf/NaN gradients, so the schedule runs ahead of the "
        "optimizer steps taken; count only the steps applied, or step it only when the step "
        "was applied"
    )
