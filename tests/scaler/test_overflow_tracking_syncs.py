"""Issue 45: tracking overflows adds no host read to any step (SPEC §1.3 holds unchanged).

Each test runs the same steps twice, with ``track_overflows`` off and on, counting the host reads
of every scaler call with ``SyncCounter``, and requires equal counts call by call and step by
step, clean and overflowing steps alike; where the budget is 0 (fused Adam/AdamW, everything
but ``step`` of a non-fused optimizer), it must be 0 with tracking too. The one read tracking
adds is ``overflow_report()``, and it is exactly one.
"""

from __future__ import annotations

import math

import pytest
import torch
from overflow_blocks import BlockNet, data, make_block_overflow
from scaler_harness import MODES, OPTIMIZERS, count_syncs

from scaler import GradScaler

CALLS = ("scale", "unscale_", "step", "update")
#: Steps per run: the first builds the lazy state and the layout; the block overflows at 2.
STEPS = 5
OVERFLOW_AT = 2


def step_syncs(model, optimizers, scaler, unscale_first: bool) -> dict[str, int]:
    """One fp16-autocast step; the host reads of each scaler call, summed over optimizers."""
    counts = dict.fromkeys(CALLS, 0)
    inputs, targets = data()
    for optimizer in optimizers:
        optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = torch.nn.functional.mse_loss(model(inputs).float(), targets)
    with count_syncs() as counter:
        scaled = scaler.scale(loss)
    counts["scale"] += counter.count
    scaled.backward()
    for optimizer in optimizers:
        if unscale_first:
            with count_syncs() as counter:
                scaler.unscale_(optimizer)
            counts["unscale_"] += counter.count
            torch.nn.utils.clip_grad_norm_(
                [p for g in optimizer.param_groups for p in g["params"]], 1.0, foreach=True
            )
        with count_syncs() as counter:
            scaler.step(optimizer)
        counts["step"] += counter.count
    with count_syncs() as counter:
        scaler.update()
    counts["update"] += counter.count
    return counts


def syncs_of_run(make_optimizers, track: bool, unscale_first: bool = False) -> list[dict]:
    model = BlockNet()
    optimizers = make_optimizers(model)
    scaler = GradScaler("cpu", track_overflows=track)
    if track:
        scaler.watch(model)
    per_step = []
    for step in range(STEPS):
        if step == OVERFLOW_AT:
            make_block_overflow(model, factor=1e4)
        per_step.append(step_syncs(model, optimizers, scaler, unscale_first))
    # The run overflowed, so both kinds of step were counted.
    assert 0 < scaler.stats().skipped_steps < STEPS
    return per_step


def one_optimizer(name: str, mode: str):
    return lambda model: [OPTIMIZERS[name](model.parameters(), **MODES[mode])]


@pytest.mark.parametrize("unscale_first", [False, True], ids=["step", "unscale_-clip-step"])
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_tracking_adds_no_host_read_on_any_optimizer_path(
    name: str, mode: str, unscale_first: bool
) -> None:
    make = one_optimizer(name, mode)
    without = syncs_of_run(make, track=False, unscale_first=unscale_first)
    with_tracking = syncs_of_run(make, track=True, unscale_first=unscale_first)
    assert with_tracking == without
    for counts in with_tracking:
        assert (counts["scale"], counts["unscale_"], counts["update"]) == (0, 0, 0)


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_fused_adam_stays_at_zero_host_reads_with_tracking(name: str) -> None:
    per_step = syncs_of_run(one_optimizer(name, "fused"), track=True)
    assert per_step == [dict.fromkeys(CALLS, 0)] * STEPS


def test_fused_sgd_keeps_its_budget_with_tracking() -> None:
    # One read while its momentum buffers do not exist (SPEC 1.2), none after: as without.
    per_step = syncs_of_run(one_optimizer("sgd", "fused"), track=True)
    assert per_step == syncs_of_run(one_optimizer("sgd", "fused"), track=False)
    assert [counts["step"] for counts in per_step][-1] == 0


def test_several_optimizers_in_one_step_add_no_host_read() -> None:
    def make(model):
        blocks = [p for n, p in model.named_parameters() if n.startswith("blocks.")]
        others = [p for n, p in model.named_parameters() if not n.startswith("blocks.")]
        return [
            torch.optim.AdamW(blocks, lr=1e-3, fused=True),
            torch.optim.SGD(others, lr=1e-3, momentum=0.9, foreach=True),
            # An empty group of its own: an optimizer with nothing to check this step.
            torch.optim.Adam([torch.nn.Parameter(torch.ones(2))], fused=True),
        ]

    assert syncs_of_run(make, track=True) == syncs_of_run(make, track=False)


def tracked_scaler_after_an_overflow(fused: bool) -> GradScaler:
    model = BlockNet()
    optimizer = torch.optim.Adam(model.parameters(), fused=fused, foreach=not fused)
    scaler = GradScaler("cpu", track_overflows=True)
    for step in range(3):
        optimizer.zero_grad()
        scaler.scale(model(data()[0]).square().mean()).backward()
        if step == 1:
            model.head.bias.grad[0] = math.inf
        scaler.step(optimizer)
        scaler.update()
    return scaler


@pytest.mark.parametrize("fused", [False, True], ids=["host_path", "device_path"])
def test_the_report_is_exactly_one_host_read(fused: bool) -> None:
    scaler = tracked_scaler_after_an_overflow(fused)
    with count_syncs() as counter:
        report = scaler.overflow_report()
    assert counter.count == 1
    assert [row.name for row in report.rows] == ["param_groups[0][15]"]


@pytest.mark.parametrize("fused", [False, True], ids=["host_path", "device_path"])
def test_stats_carries_the_overflowed_count_in_its_one_read(fused: bool) -> None:
    # On the device path stats() already makes one copy, and the count travels in it; on the
    # host path (every flag reached the host in step()) it made none, and the count is one.
    scaler = tracked_scaler_after_an_overflow(fused)
    with count_syncs() as counter:
        stats = scaler.stats()
    assert counter.count == 1
    assert stats.overflowed_tensors == 1
