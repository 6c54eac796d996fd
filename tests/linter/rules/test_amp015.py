"""AMP015 scheduler-steps-on-skipped-step: off by default, per-step scheduler steps, skip checks."""

from __future__ import annotations

import runpy
import textwrap
import warnings
from pathlib import Path

import pytest
from rule_runner import run_rule, run_rule_related

from linter.api import lint_paths, lint_source
from linter.rules import ALL_RULES, SchedulerStepsOnSkippedStep

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
BAD_EXAMPLE = EXAMPLES / "scheduler_steps_on_skipped_step.py"

LOOP = """\
import torch
scaler = torch.amp.GradScaler("cuda")
scheduler = torch.optim.lr_scheduler.LinearLR(optimizer)
for batch in loader:
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
"""


def lines(source: str) -> list[int]:
    return [
        line for line, _col, _msg in run_rule(SchedulerStepsOnSkippedStep, textwrap.dedent(source))
    ]


def test_the_rule_is_registered_and_off_by_default() -> None:
    assert SchedulerStepsOnSkippedStep in ALL_RULES
    assert not SchedulerStepsOnSkippedStep.default_enabled
    assert all(
        rule.default_enabled for rule in ALL_RULES if rule is not SchedulerStepsOnSkippedStep
    )


def test_a_default_run_never_reports_it() -> None:
    assert [d.code for d in lint_source(LOOP)] == []


@pytest.mark.parametrize(
    "select", [["ALL"], ["AMP015"], ["AMP01"], ["scheduler-steps-on-skipped-step"]]
)
def test_any_selector_that_picks_it_reports_it(select: list[str]) -> None:
    assert [(d.line, d.code) for d in lint_source(LOOP, select=select)] == [(8, "AMP015")]


def test_the_finding_points_back_at_the_scalers_step() -> None:
    assert run_rule_related(SchedulerStepsOnSkippedStep, LOOP) == [
        (8, [(6, "the scaler's step, skipped on inf/NaN gradients")])
    ]


def test_the_message_names_the_scheduler_and_suggests_skip_aware_scheduler() -> None:
    [(_, _, message)] = run_rule(SchedulerStepsOnSkippedStep, LOOP)
    assert message.startswith("`scheduler.step()` runs every iteration")
    assert "scaler.SkipAwareScheduler(scheduler, scaler)" in message


def test_a_loop_without_a_scaler_step_is_not_reported() -> None:
    source = """\
    for batch in loader:
        model(batch).loss.backward()
        optimizer.step()
        scheduler.step()
    """
    assert lines(source) == []


def test_the_step_in_a_function_called_from_the_loop_counts() -> None:
    source = """\
    class Trainer:
        def step(self, batch):
            self.scaler.scale(self.model(batch)).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()

        def fit(self, loader):
            for batch in loader:
                self.step(batch)
                self.scheduler.step()
    """
    assert lines(source) == [10]


def test_a_scheduler_stepped_in_an_epoch_loop_beside_the_batch_loop_is_not_reported() -> None:
    source = """\
    for epoch in range(epochs):
        for batch in loader:
            scaler.scale(model(batch).loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step(epoch + batch_index / iters)  # fractional epoch: has an argument
        scheduler.step()
    """
    assert lines(source) == []


def test_a_periodic_step_is_unknown_and_not_reported() -> None:
    source = """\
    for step, batch in enumerate(loader):
        scaler.scale(model(batch).loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if step % args.lr_step_every == 0:
            scheduler.step()
    """
    assert lines(source) == []


def test_ampscales_own_examples_pass_it_but_the_bad_one() -> None:
    result = lint_paths([EXAMPLES], extend_select=["AMP015"], jobs=1)
    found = {(Path(d.path).name, d.line) for d in result.diagnostics if d.code == "AMP015"}
    assert found == {(BAD_EXAMPLE.name, 39)}


def test_the_bad_example_advances_the_schedule_for_skipped_steps() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's "lr_scheduler.step() before ..."
        scheduled, applied = runpy.run_path(str(BAD_EXAMPLE))["train"]()
    assert scheduled == 40
    assert 0 < applied < scheduled


def test_a_scheduler_in_the_arm_without_the_scaler_is_not_reported() -> None:
    # GLIP's trainer: the AMP arm steps through the scaler, the `else:` arm steps plainly.
    source = """\
    import torch
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        if use_amp:
            scaler.scale(model(batch).loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
        else:
            model(batch).loss.backward()
            optimizer.step()
            scheduler.step()
    """
    assert lines(source) == [8]


def test_a_finite_loss_check_before_the_backward_holds_nothing_back() -> None:
    # h2o-llmstudio's shape: a finite loss still overflows once scaled in the backward.
    source = """\
    for itr, batch in enumerate(loader):
        loss = model(batch).loss
        if ~np.isfinite(loss.item()) and itr > 20:
            raise RuntimeError("NaN caught in loss")
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    """
    assert lines(source) == [8]
    # The same check on the gradients after the backward sees the overflow: held back.
    after = """\
    for batch in loader:
        scaler.scale(model(batch).loss).backward()
        scaler.unscale_(optimizer)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if not torch.isfinite(norm):
            optimizer.zero_grad()
            continue
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    """
    assert lines(after) == []


def test_a_loop_that_repeats_the_schedulers_step_runs_every_iteration() -> None:
    # vall-e's shape: the schedule advances once per accumulated batch, on every step.
    source = """\
    for batch in loader:
        scaler.scale(model(batch).loss).backward()
        scaler.step(optimizer)
        scaler.update()
        for _ in range(params.accumulate_grad_steps):
            if isinstance(scheduler, Eden):
                scheduler.step_batch(params.batch_idx_train)
            else:
                scheduler.step()
    """
    assert lines(source) == [9]
    renamed = source.replace("scheduler", "lr_sched").replace("accumulate_grad_steps", "k")
    assert lines(renamed) == [9]
    # An epoch loop around a batch loop of its own is no such loop, even where the module
    # itself steps (found by the property test of generated programs).
    per_epoch = """\
    def train_step(batch):
        scaler.step(optimizer)


    for s in scalers:
        train_step(batch)
    for epoch in range(epochs):
        for batch in loader:
            scaler.scale(model(batch).loss).backward()
            scaler.step(optimizer)
            scaler.update()
        scheduler.step()
    """
    assert lines(per_epoch) == []


def test_a_scheduler_a_framework_returns_elsewhere_is_another_variable() -> None:
    # wenet's shape: `deepspeed.initialize` returns the engine's scheduler in one function; the
    # update function's `scheduler` parameter is a plain one on the torch_ddp runs.
    source = """\
    def init(model, configs):
        model, optimizer, _, scheduler = deepspeed.initialize(model=model, config=configs)
        return model, optimizer, scheduler


    def update(model, optimizer, scheduler, scaler, loss):
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    """
    assert lines(source) == [10]
    same_function = """\
    def train(model, loader, configs):
        model, optimizer, _, scheduler = deepspeed.initialize(model=model, config=configs)
        for batch in loader:
            scaler.scale(model(batch).loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
    """
    assert lines(same_function) == []


def test_a_scheduler_fed_a_count_of_every_iteration_advances_with_it() -> None:
    # joeynmt's shape: `scheduler.step(self.stats.steps)`, the counter bumped on every step.
    source = """\
    class Trainer:
        def train(self):
            for i, batch in enumerate(self.train_iter):
                self.scaler.scale(self.model(batch).loss).backward()
                if (i + 1) % self.args.batch_multiplier == 0:
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                    if self.scheduler_step_at == "step":
                        self.scheduler.step(self.stats.steps)
                    self.stats.steps += 1
    """
    found = run_rule(SchedulerStepsOnSkippedStep, textwrap.dedent(source))
    assert [line for line, _c, _m in found] == [9]
    assert found[0][2].startswith("`self.scheduler.step(self.stats.steps)` is fed a count")
    by_index = """\
    for i, batch in enumerate(loader):
        scaler.scale(model(batch).loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step(i)
    """
    assert lines(by_index) == [5]
    # A metric or an epoch number is no per-iteration count.
    for argument in ("val_loss", "epoch"):
        other = by_index.replace("scheduler.step(i)", f"scheduler.step({argument})")
        assert lines(other) == []


def test_a_periodic_test_that_guards_the_scalers_step_too_holds_nothing_back() -> None:
    source = """\
    for i, batch in enumerate(loader):
        scaler.scale(model(batch).loss).backward()
        if (i + 1) % batch_multiplier == 0:
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
    """
    assert lines(source) == [6]
    # A periodic test around the scheduler alone: not every iteration, unknown stays unknown.
    alone = """\
    for i, batch in enumerate(loader):
        scaler.scale(model(batch).loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if i % 100 == 0:
            scheduler.step()
    """
    assert lines(alone) == []
