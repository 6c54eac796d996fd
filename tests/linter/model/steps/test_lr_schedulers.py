"""Which calls step an LR scheduler, and which skip checks hold one back
(`linter.model.steps._lr_schedulers`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.iterations._iteration import of_module
from linter.model.steps._lr_schedulers import Hold, LrSchedulers, lr_schedulers
from linter.model.syntax._module_index import module_index


def model(source: str) -> tuple[ModuleContext, LrSchedulers]:
    source = textwrap.dedent(source)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    return context, lr_schedulers(module_index(context), of_module(context).receivers)


def stepped(source: str) -> list[str]:
    context, schedulers = model(source)
    return [context.module.code_for_node(call.func) for call in schedulers.steps()]


def holds(source: str) -> list[Hold]:
    context, schedulers = model(source)
    iterations = of_module(context)
    return [schedulers.hold(call, iterations.scope_of(call)) for call in schedulers.steps()]


def test_constructed_and_conventionally_named_schedulers_are_found() -> None:
    source = """
    from transformers import get_linear_schedule_with_warmup as warmup
    schedule = warmup(optimizer, 10, 100)
    decay = torch.optim.lr_scheduler.ExponentialLR(optimizer, 0.9)
    schedule.step()
    decay.step()
    self.lr_scheduler.step()
    scheduler_g.step()
    """
    assert stepped(source) == [
        "schedule.step",
        "decay.step",
        "self.lr_scheduler.step",
        "scheduler_g.step",
    ]


def test_steps_with_arguments_and_look_alikes_are_not_scheduler_steps() -> None:
    source = """
    scheduler.step(val_loss)
    noise_scheduler.step(model_output, t, sample)
    optimizer.step()
    scaler.step(optimizer)
    sched = JobQueue()
    sched.step()
    """
    assert stepped(source) == []


@pytest.mark.parametrize(
    "binding",
    [
        "scheduler = SkipAwareScheduler(base, scaler)",
        "model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)",
        "engine, optimizer, _, scheduler = deepspeed.initialize(model=model)",
    ],
)
def test_schedulers_that_hold_themselves_back_are_not_manual(binding: str) -> None:
    assert stepped(f"from scaler import SkipAwareScheduler\n{binding}\nscheduler.step()\n") == []


@pytest.mark.parametrize(
    ("guard", "expected"),
    [
        ("if scale_before <= scaler.get_scale():", Hold.SKIP_CHECK),
        ("if not scaler.step_skipped():", Hold.SKIP_CHECK),
        ("if optimizer_was_run:", Hold.SKIP_CHECK),
        ("if not self.optimizer_step_was_skipped:", Hold.SKIP_CHECK),
        ("if torch.isfinite(grad_norm):", Hold.SKIP_CHECK),
        ("if applied is not None:", Hold.SKIP_CHECK),  # applied = scaler.step(optimizer)
        ("if (step + 1) % args.gradient_accumulation_steps == 0:", Hold.NEVER),
        ("if scheduler is not None:", Hold.NEVER),
        ("if args.use_scheduler:", Hold.NEVER),
        ('if self.step_scheduler_after == "batch":', Hold.NEVER),
        ("if cfg.plateau_metric is None:", Hold.NEVER),
        ('if args.sched_interval in ("step", "batch") and not args.fixed_lr:', Hold.NEVER),
        ('if status == "ok":', Hold.NEVER),
        ("if step < warmup_steps:", Hold.UNKNOWN),
        ("if step % 100 == 0:", Hold.UNKNOWN),
        ("if step < warmup_steps and rank == 0:", Hold.UNKNOWN),
    ],
)
def test_what_a_guard_around_the_step_says(guard: str, expected: Hold) -> None:
    source = f"""
    for step, batch in enumerate(loader):
        scaler.scale(loss).backward()
        scale_before = scaler.get_scale()
        applied = scaler.step(optimizer)
        scaler.update()
        {guard}
            scheduler.step()
    """
    assert holds(source) == [expected]


def test_an_early_continue_on_a_skip_check_holds_the_rest_of_the_block() -> None:
    source = """
    for batch in loader:
        scaler.step(optimizer)
        scaler.update()
        if scaler.get_scale() < scale_before:
            continue
        scheduler.step()
    """
    assert holds(source) == [Hold.SKIP_CHECK]


def test_an_early_continue_on_anything_else_holds_nothing() -> None:
    source = """
    for batch in loader:
        if batch is None:
            continue
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    """
    assert holds(source) == [Hold.NEVER]


def test_a_wrapped_scheduler_is_no_skip_flag_for_the_schedulers_after_it() -> None:
    source = """
    lr_scheduler = SkipAwareScheduler(lr_scheduler, scaler)
    critic = torch.optim.lr_scheduler.StepLR(opt_d, 10)
    for batch in loader:
        scaler.step(optimizer)
        scaler.update()
        if critic is not None:
            critic.step()
    """
    assert holds(source) == [Hold.NEVER]
