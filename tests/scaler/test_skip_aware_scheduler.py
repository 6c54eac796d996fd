"""SkipAwareScheduler against a plain scheduler stepped only on the applied steps (issue 21).

Overflows are injected at chosen steps by writing inf into an optimizer's gradients after
backward, so the scaler skips exactly those steps of exactly that optimizer. The reference is the
same scheduler class on an identical optimizer, stepped only when the step was applied; the LR in
use at every step, the position and the LRs after a read must equal it exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.optim import lr_scheduler as schedules

from scaler import GradScaler, SkipAwareScheduler, SyncCounter
from scaler._errors import ScalerArgumentError
from scaler._host_mirror import to_fp32
from scaler._skip_aware_scheduler import make_skip_aware

Optimizer = torch.optim.Optimizer
MakeScheduler = Callable[[Optimizer], schedules.LRScheduler]

#: Every scheduler class issue 21 names, with settings that change the LR within the run.
SCHEDULERS: dict[str, MakeScheduler] = {
    "LambdaLR": lambda o: schedules.LambdaLR(o, lr_lambda=lambda e: 1.0 / (e + 1)),
    "LinearLR": lambda o: schedules.LinearLR(o, start_factor=0.25, total_iters=6),
    "StepLR": lambda o: schedules.StepLR(o, step_size=3, gamma=0.5),
    "ExponentialLR": lambda o: schedules.ExponentialLR(o, gamma=0.8),
    "CosineAnnealingLR": lambda o: schedules.CosineAnnealingLR(o, T_max=8),
    "CosineAnnealingWarmRestarts": lambda o: schedules.CosineAnnealingWarmRestarts(
        o, T_0=4, T_mult=2
    ),
    "OneCycleLR": lambda o: schedules.OneCycleLR(
        o, max_lr=1.0, total_steps=20, cycle_momentum=False
    ),
    "SequentialLR": lambda o: schedules.SequentialLR(
        o,
        [
            schedules.LinearLR(o, start_factor=0.1, total_iters=3),
            schedules.ExponentialLR(o, gamma=0.9),
        ],
        milestones=[3],
    ),
}

#: Host path: a non-fused SGD. Device path: fused SGD and Adam.
OPTIMIZERS: dict[str, Callable[[list[torch.nn.Parameter]], Optimizer]] = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True),
    "sgd-fused": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, fused=True),
    "adam-fused": lambda p: torch.optim.Adam(p, lr=0.1, fused=True),
}

STEPS = 16
#: Steps whose gradients overflow, per optimizer (the second one skips at other steps).
OVERFLOWS = ({0, 3, 4, 9}, {1, 9, 12})


def _lrs(optimizer: Optimizer, fp32: bool = False) -> list[float]:
    """The LRs the next step uses. ``fp32``: as a fused kernel uses a float LR, in fp32 (the
    device path's LR tensors hold exactly that)."""
    values = [float(group["lr"]) for group in optimizer.param_groups]
    return [to_fp32(value) for value in values] if fp32 else values


def _params(seed: int) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(4, generator=generator)) for _ in range(2)]


class Run:
    """Optimizers with wrapped schedulers, and the plain references stepped on applied steps."""

    def __init__(
        self,
        make_scheduler: MakeScheduler,
        make_optimizer: Callable[[list[torch.nn.Parameter]], Optimizer],
        n_optimizers: int,
        scaler: torch.amp.GradScaler | None = None,
        **wrapper_kwargs: Any,
    ) -> None:
        self.scaler = scaler if scaler is not None else GradScaler("cpu", init_scale=2.0**10)
        self.params = [_params(i) for i in range(n_optimizers)]
        self.optimizers = [make_optimizer(p) for p in self.params]
        self.wrappers = [
            SkipAwareScheduler(make_scheduler(o), self.scaler, **wrapper_kwargs)
            for o in self.optimizers
        ]
        self.reference_optimizers = [make_optimizer(_params(i)) for i in range(n_optimizers)]
        self.references = [make_scheduler(o) for o in self.reference_optimizers]
        self.used: list[list[list[float]]] = []
        self.reference_used: list[list[list[float]]] = []
        self.syncs: list[int] = []

    def step(self, t: int) -> None:
        fp32 = any(w._device_path for w in self.wrappers)
        self.used.append([_lrs(o) for o in self.optimizers])
        self.reference_used.append([_lrs(o, fp32) for o in self.reference_optimizers])
        for params in self.params:
            loss = sum((p * p).sum() for p in params)
            self.scaler.scale(loss).backward()
        for params, overflows in zip(self.params, OVERFLOWS, strict=False):
            if t in overflows:
                params[0].grad.fill_(math.inf)
        with SyncCounter() as syncs:
            for optimizer in self.optimizers:
                self.scaler.step(optimizer)
            self.scaler.update()
            for wrapper in self.wrappers:
                wrapper.step()
        self.syncs.append(syncs.count)
        for optimizer in self.optimizers:
            optimizer.zero_grad()
        for optimizer, reference, overflows in zip(
            self.reference_optimizers, self.references, OVERFLOWS, strict=False
        ):
            if t not in overflows:
                optimizer.step()  # no gradients: only marks the step, as torch expects
                reference.step()

    def run(self, steps: int = STEPS, start: int = 0) -> Run:
        for t in range(start, start + steps):
            self.step(t)
        return self


@pytest.mark.parametrize("n_optimizers", [1, 2])
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
def test_the_schedule_advances_only_on_applied_steps(
    scheduler: str, optimizer: str, n_optimizers: int
) -> None:
    run = Run(SCHEDULERS[scheduler], OPTIMIZERS[optimizer], n_optimizers).run()
    # The LR in use at every step is the reference's, exactly: not one step late.
    assert run.used == run.reference_used
    for wrapper, reference in zip(run.wrappers, run.references, strict=True):
        assert wrapper.last_epoch == reference.last_epoch
        assert wrapper.get_last_lr() == reference.get_last_lr()
        assert wrapper.scheduler.state_dict().keys() == reference.state_dict().keys()
    applied = [STEPS - len(overflows) for overflows in OVERFLOWS[:n_optimizers]]
    assert [w.last_epoch for w in run.wrappers] == applied


def test_each_optimizer_follows_its_own_skips() -> None:
    run = Run(SCHEDULERS["ExponentialLR"], OPTIMIZERS["adam-fused"], 2).run()
    assert [w.last_epoch for w in run.wrappers] == [12, 13]
    first, second = (w.get_last_lr()[0] for w in run.wrappers)
    assert first == pytest.approx(0.1 * 0.8**12, rel=1e-12)
    assert second == pytest.approx(0.1 * 0.8**13, rel=1e-12)


@pytest.mark.parametrize("optimizer", ["sgd-fused", "adam-fused"])
@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
def test_the_fused_path_adds_no_host_read(scheduler: str, optimizer: str) -> None:
    run = Run(SCHEDULERS[scheduler], OPTIMIZERS[optimizer], 2).run()
    plain = _syncs_without_wrapper(OPTIMIZERS[optimizer])
    # Fused SGD reads the flag in its first two steps (until its momentum buffers exist), as
    # without the wrapper; after that, and always with Adam, nothing.
    assert run.syncs == plain
    assert sum(run.syncs[2:]) == 0


def _syncs_without_wrapper(make_optimizer: Callable[[list[torch.nn.Parameter]], Optimizer]):
    scaler = GradScaler("cpu", init_scale=2.0**10)
    params = [_params(i) for i in range(2)]
    optimizers = [make_optimizer(p) for p in params]
    counts = []
    for t in range(STEPS):
        for group in params:
            scaler.scale(sum((p * p).sum() for p in group)).backward()
        for group, overflows in zip(params, OVERFLOWS, strict=True):
            if t in overflows:
                group[0].grad.fill_(math.inf)
        with SyncCounter() as syncs:
            for optimizer in optimizers:
                scaler.step(optimizer)
            scaler.update()
        counts.append(syncs.count)
        for optimizer in optimizers:
            optimizer.zero_grad()
    return counts


def test_a_device_step_of_the_wrapper_itself_reads_nothing() -> None:
    run = Run(SCHEDULERS["CosineAnnealingLR"], OPTIMIZERS["adam-fused"], 1).run(steps=3)
    wrapper = run.wrappers[0]
    with SyncCounter() as syncs:
        for _ in range(5):
            wrapper.step()
    assert syncs.count == 0
    with SyncCounter() as syncs:
        wrapper.get_last_lr()
    assert syncs.count == 1  # the read of the applied count


def test_the_table_horizon_bounds_the_reads_and_stays_exact() -> None:
    run = Run(SCHEDULERS["ExponentialLR"], OPTIMIZERS["adam-fused"], 1, horizon=4).run()
    assert run.used == run.reference_used
    # One read of the count when the table is full: after steps 4, 8 and 12.
    assert run.syncs == [1 if t in (4, 8, 12) else 0 for t in range(STEPS)]
    assert run.wrappers[0].last_epoch == run.references[0].last_epoch == 12


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("scheduler", ["OneCycleLR", "SequentialLR", "CosineAnnealingLR"])
def test_state_dict_round_trips_mid_run(scheduler: str, optimizer: str) -> None:
    whole = Run(SCHEDULERS[scheduler], OPTIMIZERS[optimizer], 1).run()

    first = Run(SCHEDULERS[scheduler], OPTIMIZERS[optimizer], 1).run(steps=7)
    saved = {
        "scheduler": first.wrappers[0].state_dict(),
        "optimizer": first.optimizers[0].state_dict(),
        "scaler": first.scaler.state_dict(),
    }
    resumed = Run(SCHEDULERS[scheduler], OPTIMIZERS[optimizer], 1)
    resumed.optimizers[0].load_state_dict(saved["optimizer"])
    resumed.wrappers[0].load_state_dict(saved["scheduler"])
    resumed.scaler.load_state_dict(saved["scaler"])
    # The reference resumes the same way, from the first run's reference.
    resumed.reference_optimizers[0].load_state_dict(first.reference_optimizers[0].state_dict())
    resumed.references[0].load_state_dict(first.references[0].state_dict())
    resumed.run(steps=STEPS - 7, start=7)

    assert resumed.used == whole.used[7:]
    assert resumed.wrappers[0].state_dict() == whole.wrappers[0].state_dict()
    assert resumed.wrappers[0].last_epoch == whole.references[0].last_epoch


def test_the_state_dict_loads_into_a_plain_scheduler_and_back() -> None:
    run = Run(SCHEDULERS["StepLR"], OPTIMIZERS["adam-fused"], 1).run(steps=9)
    saved = run.wrappers[0].state_dict()
    plain = SCHEDULERS["StepLR"](OPTIMIZERS["adam-fused"](_params(0)))
    plain.load_state_dict(saved)
    assert plain.last_epoch == 6  # 9 steps, 3 skipped (0, 3, 4)
    again = SkipAwareScheduler(
        SCHEDULERS["StepLR"](OPTIMIZERS["adam-fused"](_params(0))), GradScaler("cpu")
    )
    again.load_state_dict(plain.state_dict())
    assert again.last_epoch == 6


def test_torch_gradscaler_is_accepted_and_its_fused_path_reads_nothing() -> None:
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    run = Run(SCHEDULERS["CosineAnnealingLR"], OPTIMIZERS["adam-fused"], 1, scaler=scaler).run()
    assert run.used == run.reference_used
    assert run.wrappers[0].last_epoch == run.references[0].last_epoch == 12
    assert sum(run.syncs[1:]) == 0


def test_torch_gradscaler_on_the_host_path_costs_one_read_per_step() -> None:
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    run = Run(SCHEDULERS["StepLR"], OPTIMIZERS["sgd"], 1, scaler=scaler).run()
    assert run.used == run.reference_used
    plain = Run(SCHEDULERS["StepLR"], OPTIMIZERS["sgd"], 1, scaler=torch.amp.GradScaler("cpu"))
    plain.wrappers = []
    plain.run()
    assert [ours - theirs for ours, theirs in zip(run.syncs, plain.syncs, strict=True)] == [
        1
    ] * STEPS


def test_a_schedule_that_cycles_momentum_takes_the_host_path() -> None:
    def one_cycle(optimizer: Optimizer) -> schedules.LRScheduler:
        return schedules.OneCycleLR(optimizer, max_lr=1.0, total_steps=20)  # cycles beta1

    run = Run(one_cycle, OPTIMIZERS["adam-fused"], 1).run()
    assert run.used == run.reference_used
    betas = run.optimizers[0].param_groups[0]["betas"]
    assert betas == run.reference_optimizers[0].param_groups[0]["betas"]
    assert repr(run.wrappers[0]).endswith("path='host')")
    plain = _syncs_without_wrapper(OPTIMIZERS["adam-fused"])
    assert [ours - theirs for ours, theirs in zip(run.syncs, plain, strict=True)] == [1] * STEPS


def test_a_fused_optimizers_lr_becomes_a_tensor_and_the_schedule_stays_in_floats() -> None:
    run = Run(SCHEDULERS["LinearLR"], OPTIMIZERS["adam-fused"], 1).run()
    lr = run.optimizers[0].param_groups[0]["lr"]
    assert isinstance(lr, torch.Tensor)
    assert lr.dtype == torch.float32
    last = run.wrappers[0].get_last_lr()
    assert last == run.references[0].get_last_lr()
    assert type(last[0]) is float


def test_a_fused_run_updates_the_parameters_as_the_reference_schedule_would() -> None:
    # The same training with a plain scheduler stepped only on applied steps (which needs the
    # host to know each skip). Not to the bit: a fused kernel given a tensor LR reads it as
    # fp32, given a float it keeps the double in its bias-correction arithmetic.
    run = Run(SCHEDULERS["CosineAnnealingLR"], OPTIMIZERS["adam-fused"], 1).run()
    scaler = GradScaler("cpu", init_scale=2.0**10)
    params = _params(0)
    optimizer = OPTIMIZERS["adam-fused"](params)
    plain = SCHEDULERS["CosineAnnealingLR"](optimizer)
    for t in range(STEPS):
        scaler.scale(sum((p * p).sum() for p in params)).backward()
        if t in OVERFLOWS[0]:
            params[0].grad.fill_(math.inf)
        scaler.step(optimizer)
        scaler.update()
        if not scaler.step_skipped(optimizer):
            plain.step()
        optimizer.zero_grad()
    for ours, theirs in zip(run.params[0], params, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)


def test_a_disabled_scaler_steps_every_time() -> None:
    optimizer = OPTIMIZERS["adam-fused"](_params(0))
    wrapper = SkipAwareScheduler(SCHEDULERS["StepLR"](optimizer), GradScaler("cpu", enabled=False))
    for _ in range(4):
        optimizer.step()
        wrapper.step()
    assert wrapper.last_epoch == 4


def test_before_the_first_optimizer_step_nothing_advances() -> None:
    optimizer = OPTIMIZERS["adam-fused"](_params(0))
    wrapper = SkipAwareScheduler(SCHEDULERS["StepLR"](optimizer), GradScaler("cpu"))
    wrapper.step()
    assert wrapper.last_epoch == 0


def test_bad_arguments_are_one_line_errors() -> None:
    optimizer = OPTIMIZERS["sgd"](_params(0))
    scaler = GradScaler("cpu")
    with pytest.raises(ScalerArgumentError, match="ReduceLROnPlateau steps on a metric"):
        SkipAwareScheduler(schedules.ReduceLROnPlateau(optimizer), scaler)
    with pytest.raises(ScalerArgumentError, match=r"scheduler must be a torch\.optim"):
        SkipAwareScheduler(object(), scaler)  # type: ignore[arg-type]
    with pytest.raises(ScalerArgumentError, match=r"scaler must be a scaler\.GradScaler"):
        SkipAwareScheduler(SCHEDULERS["StepLR"](optimizer), object())  # type: ignore[arg-type]
    with pytest.raises(ScalerArgumentError, match="horizon must be a positive int"):
        SkipAwareScheduler(SCHEDULERS["StepLR"](optimizer), scaler, horizon=0)
    with pytest.raises(ScalerArgumentError, match="takes no epoch"):
        SkipAwareScheduler(SCHEDULERS["StepLR"](optimizer), scaler).step(3)


def test_adopting_in_place_routes_every_holder_through_the_wrapper() -> None:
    scaler = GradScaler("cpu", init_scale=2.0**10)
    params = _params(0)
    optimizer = OPTIMIZERS["adam-fused"](params)
    scheduler = SCHEDULERS["ExponentialLR"](optimizer)
    wrapper = make_skip_aware(scheduler, scaler)
    assert make_skip_aware(scheduler, scaler) is wrapper
    for t in range(6):
        scaler.scale(sum((p * p).sum() for p in params)).backward()
        if t in (1, 2):
            params[0].grad.fill_(math.inf)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()  # the object the framework holds
        optimizer.zero_grad()
    assert scheduler.state_dict()["last_epoch"] == 4
    assert "step" not in scheduler.state_dict()
    assert scheduler.get_last_lr()[0] == pytest.approx(0.1 * 0.8**4, rel=1e-12)
    assert make_skip_aware(schedules.ReduceLROnPlateau(optimizer), scaler) is None


def test_peek_last_lr_is_the_lr_in_use_and_one_read_on_cpu() -> None:
    run = Run(SCHEDULERS["ExponentialLR"], OPTIMIZERS["adam-fused"], 1).run(steps=5)
    wrapper = run.wrappers[0]
    with SyncCounter() as syncs:
        peeked = wrapper.peek_last_lr()
    assert syncs.count == 1  # host memory on CPU; on CUDA a landed pinned copy: none
    assert peeked == _lrs(run.optimizers[0])
    assert peeked[0] == to_fp32(0.1 * 0.8 * 0.8)  # 5 steps, 3 skipped


def test_peek_last_lr_on_the_host_path_reads_nothing() -> None:
    run = Run(SCHEDULERS["StepLR"], OPTIMIZERS["sgd"], 1).run(steps=5)
    with SyncCounter() as syncs:
        peeked = run.wrappers[0].peek_last_lr()
    assert syncs.count == 0
    assert peeked == run.references[0].get_last_lr()


def test_reloading_the_optimizer_mid_run_keeps_the_schedule_exact() -> None:
    run = Run(SCHEDULERS["ExponentialLR"], OPTIMIZERS["adam-fused"], 1).run(steps=6)
    optimizer = run.optimizers[0]
    before = optimizer.param_groups[0]["lr"]
    optimizer.load_state_dict(optimizer.state_dict())  # new LR tensor objects
    assert optimizer.param_groups[0]["lr"] is not before
    run.run(steps=STEPS - 6, start=6)
    assert run.used == run.reference_used
    assert run.wrappers[0].last_epoch == run.references[0].last_epoch == 12


def test_a_param_group_added_later_is_a_clear_error() -> None:
    run = Run(SCHEDULERS["StepLR"], OPTIMIZERS["adam-fused"], 1).run(steps=2)
    run.optimizers[0].add_param_group({"params": [torch.nn.Parameter(torch.ones(2))]})
    with pytest.raises(RuntimeError, match="param groups changed"):
        run.wrappers[0].step()
