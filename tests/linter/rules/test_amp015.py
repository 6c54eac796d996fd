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
