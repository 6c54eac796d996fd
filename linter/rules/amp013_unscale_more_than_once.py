"""AMP013 unscale-more-than-once."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.iterations import Event, Iteration, Kind, TrainingIterations, of_module
from linter.model.steps import breaks, follows_the_target, loops_between, mentions, per_pass_names
from linter.model.syntax import ModuleIndex, module_index, words
from linter.model.values import is_disabled, same_scaler

#: Words of a test that reads GradScaler's per-optimizer record (``OptState.UNSCALED``,
#: ``scaler._per_optimizer_states[id(opt)]["stage"]``).
_STAGE_WORDS = frozenset({"OptState", "UNSCALED", "stage", "_per_optimizer_states"})


class UnscaleMoreThanOnce(Rule):
    """`scaler.unscale_(optimizer)` that can run twice before `scaler.update()`.

    ## What it does
    Flags a `scaler.unscale_(optimizer)` that may run a second time for the same optimizer
    before the next `scaler.update()`, in three shapes:

    - **in a loop inside the iteration**: a gradient-accumulation micro-batch loop that unscales
      after every backward, while `update()` runs once after the loop;
    - **every pass of a loop whose `update()` is held back**: the unscale runs on every batch,
      the step and `update()` only under a condition that changes from pass to pass
      (`if (idx + 1) % accumulation_steps == 0:`), so the second batch unscales again;
    - **twice in one iteration**: a clip helper that unscales, then another `unscale_` of the
      same optimizer before `step` (or after it), with no `update()` between.

    An iteration is the one AMP003 reads: a loop body or per-step function with the functions
    of the same file it calls.

    Not reported: an unscale at the accumulation boundary (under the same condition as the
    `update()`), unscales of two different optimizers (a GAN's `opt_d` and `opt_g`, a loop over
    the optimizers), unscales in exclusive branches, an unscale under a test of the scaler's
    per-optimizer stage (`if state["stage"] is not OptState.UNSCALED:`), a loop that `break`s
    after one pass, an
    optimizer the linter cannot name (`optimizers[i]`), a scaler built `enabled=False` (its
    `unscale_` returns at once), and an `update()` written where the linter cannot see when it
    runs (another function, another file).

    ## Why is this bad?
    `GradScaler` records per optimizer that its gradients are unscaled; a second `unscale_`
    before `update()` clears that record raises
    `RuntimeError: unscale_() has already been called on this optimizer since the last
    update()` — at the second micro-batch, so the script crashes after a first step looked
    fine, typically only when someone turns on gradient accumulation or clipping.
    `examples/unscale_in_accumulation_loop.py` raises it on the CPU. Unscaling the partly
    accumulated gradients would be wrong anyway: the next backward adds scaled gradients to
    unscaled ones.

    ## Example
    ```python
    for step, batch in enumerate(loader):
        scaler.scale(model(batch) / accumulation_steps).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if (step + 1) % accumulation_steps == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    ```

    ## Use instead
    ```python
    for step, batch in enumerate(loader):
        scaler.scale(model(batch) / accumulation_steps).backward()
        if (step + 1) % accumulation_steps == 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    ```

    ## References
    - Swin-Transformer's SimMIM pre-training unscales on every accumulation step and fails with
      this error as soon as accumulation is on (open):
      [microsoft/Swin-Transformer#311](https://github.com/microsoft/Swin-Transformer/issues/311)
    - Lightning 1.0.4 unscaled on every accumulated batch under 16-bit precision:
      [Lightning-AI/pytorch-lightning#4427](https://github.com/Lightning-AI/pytorch-lightning/issues/4427),
      fixed by unscaling only when the optimizer steps
      ([#4441](https://github.com/Lightning-AI/pytorch-lightning/pull/4441))
    - PyTorch's AMP gradient-accumulation example: unscale only in iterations that step
      ([pytorch/pytorch#36601](https://github.com/pytorch/pytorch/pull/36601),
      [amp_examples](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation))
    """

    code = "AMP013"
    name = "unscale-more-than-once"
    summary = "scaler.unscale_(optimizer) can run twice for one optimizer before update() (raises)"
    triggers = ("unscale_(",)
    valid = (
        Example(
            """\
for step, batch in enumerate(loader):
    scaler.scale(model(batch) / accum).backward()
    if (step + 1) % accum == 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
"""
        ),
        Example(
            """\
for it in range(max_iters):
    for micro_step in range(accum):
        scaler.scale(model(next_batch()) / accum).backward()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
for batch in loader:
    scaler.scale(loss_d).backward()
    scaler.unscale_(opt_d)
    scaler.step(opt_d)
    scaler.scale(loss_g).backward()
    scaler.unscale_(opt_g)
    scaler.step(opt_g)
    scaler.update()
"""
        ),
        Example(
            """\
for batch in loader:
    scaler.scale(loss).backward()
    for opt in optimizers:
        scaler.unscale_(opt)
        scaler.step(opt)
    scaler.update()
"""
        ),
        Example(
            """\
for batch in loader:
    scaler.scale(loss).backward()
    if args.clip_grad:
        scaler.unscale_(optimizer)
        clip(model)
    elif args.log_grad_norm:
        scaler.unscale_(optimizer)
        log_norm(model)
    scaler.step(optimizer)
    scaler.update()
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda", enabled=False)
for step, batch in enumerate(loader):
    scaler.scale(model(batch)).backward()
    scaler.unscale_(optimizer)
    if (step + 1) % accum == 0:
        scaler.step(optimizer)
        scaler.update()
"""
        ),
    )
    invalid = (
        Example(
            """\
for step, batch in enumerate(loader):
    scaler.scale(model(batch) / accum).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if (step + 1) % accum == 0:
        scaler.step(optimizer)
        scaler.update()
""",
            (3,),
        ),
        Example(
            """\
for batch in loader:
    for micro in batch.split(micro_batch_size):
        scaler.scale(model(micro)).backward()
        scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
""",
            (4,),
        ),
        Example(
            """\
import torch


class Trainer:
    def clip_gradients(self):
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)

    def train_step(self, batch):
        self.scaler.scale(self.model(batch)).backward()
        self.clip_gradients()
        self.scaler.unscale_(self.optimizer)
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
            (12,),
        ),
        Example(
            """\
for idx, batch in enumerate(loader):
    loss = model(batch)
    if config.accumulation_steps > 1:
        scaler.scale(loss / config.accumulation_steps).backward()
        if config.clip_grad:
            scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_grad)
        if (idx + 1) % config.accumulation_steps == 0:
            scaler.step(optimizer)
            optimizer.zero_grad()
            scaler.update()
    else:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
""",
            (6,),
        ),
        Example(
            """\
for batch in loader:
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    log_grad_norm(model)
    scaler.step(optimizer)
    scaler.unscale_(optimizer)
    scaler.update()
""",
            (6,),
        ),
        Example(
            """\
def unscale_and_clip(scaler, optimizer, model):
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)


for batch in loader:
    scaler.scale(model(batch)).backward()
    scaler.unscale_(optimizer)
    unscale_and_clip(scaler, optimizer, model)
    scaler.step(optimizer)
    scaler.update()
""",
            (2,),
        ),
    )

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        model = of_module(context)
        index = module_index(context)
        reported: set[cst.Call] = set()
        for iteration in model.iterations:
            unscales = [
                u
                for u in iteration.of(Kind.UNSCALE)
                if not is_disabled(index, u.scaler) and not _checks_the_stage(model, u)
            ]
            for unscale in unscales:
                finding = _repeated_by_a_loop(model, index, iteration, unscale) or _unscaled_before(
                    iteration, unscale, unscales
                )
                if finding is not None and unscale.call not in reported:
                    reported.add(unscale.call)
                    yield finding


def _repeated_by_a_loop(
    model: TrainingIterations, index: ModuleIndex, iteration: Iteration, unscale: Event
) -> Finding | None:
    """A loop nested in the iteration runs ``unscale`` again, or the iteration's own loop does
    while the ``update()`` waits for a condition that changes from pass to pass."""
    if unscale.optimizer is None:
        return None
    for loop in loops_between(index, unscale.site, iteration.scope):
        if mentions(unscale.optimizer, follows_the_target(index, loop)) or breaks(loop):
            return None
        if not any(loop in set(index.ancestors(u.site)) for u in _updates(iteration, unscale)):
            return _finding(unscale, "it runs in a loop inside the iteration (micro-batches?)", ())
    scope = iteration.scope
    if not isinstance(scope, cst.For | cst.While) or mentions(
        unscale.optimizer, follows_the_target(index, scope)
    ):
        return None
    updates = [
        u
        for u in _updates(iteration, unscale)
        if model.facts.precedes_in_source(unscale.site, u.site)
        and iteration.may_precede(unscale, u)
    ]
    if not updates or breaks(scope):
        return None
    varying = per_pass_names(index, scope)
    own = model.conditions(unscale)
    held = []
    for update in updates:
        extra = [f for f in model.conditions(update) - own if mentions(f.subject, varying)]
        if not extra:
            return None
        held.append(update)
    reason = "every pass of the loop runs it, while `update()` waits for a per-pass condition"
    return _finding(unscale, reason, ((held[0].site, "update held back"),))


def _unscaled_before(iteration: Iteration, unscale: Event, unscales: list[Event]) -> Finding | None:
    """Another ``unscale_`` of the same optimizer may run before this one with no ``update()``
    between."""
    for first in unscales:
        if first is unscale or first.optimizer is None or first.optimizer != unscale.optimizer:
            continue
        if not same_scaler(first.scaler, unscale.scaler) or iteration.exclusive(first, unscale):
            continue
        if iteration.may_precede(first, unscale) and not iteration.between(
            first, unscale, Kind.UPDATE
        ):
            reason = f"`unscale_({unscale.optimizer})` may already have run in this iteration"
            return _finding(unscale, reason, ((first.site, "first unscale_"),))
    return None


def _checks_the_stage(model: TrainingIterations, unscale: Event) -> bool:
    """An ``if`` around the unscale reads the scaler's per-optimizer stage (allennlp: ``if
    optimizer_state["stage"] is not OptState.UNSCALED:``): it runs only when it may."""
    for node in (unscale.call, unscale.site):
        for statement, _arm in model.facts.arms(node):
            if _STAGE_WORDS & set(words(statement.test)):
                return True
    return False


def _updates(iteration: Iteration, unscale: Event) -> list[Event]:
    return [u for u in iteration.of(Kind.UPDATE) if same_scaler(u.scaler, unscale.scaler)]


def _finding(unscale: Event, reason: str, related: tuple[tuple[cst.CSTNode, str], ...]) -> Finding:
    call = f"{unscale.scaler or 'scaler'}.unscale_({unscale.optimizer or 'optimizer'})"
    message = (
        f"`{call}` can run twice before `update()` ({reason}): torch raises `RuntimeError: "
        f"unscale_() has already been called on this optimizer since the last update()`; "
        f"unscale once per optimizer step, where `step` and `update()` run"
    )
    if unscale.via is not None:
        related = (*related, (unscale.via, "called here"))
    return Finding(unscale.call, message, related=related)
