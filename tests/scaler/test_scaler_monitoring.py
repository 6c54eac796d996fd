"""Issue 4, items 1-3: stats(), peek_scale() and step_skipped(), all without a per-step sync."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch
from scaler_harness import count_syncs, forward_backward, make_model, poison_grads

from scaler import GradScaler, ScaleBelowOneWarning, ScalerStats

FUSED = pytest.mark.parametrize("fused", [False, True], ids=["host_path", "device_path"])


def train(scaler, optimizer, model, pattern: str, start: int = 0) -> list:
    """Steps with ``pattern`` ("x" = overflow); returns step_skipped after each."""
    skipped = []
    for offset, char in enumerate(pattern):
        optimizer.zero_grad()
        forward_backward(model, scaler, start + offset)
        if char == "x":
            poison_grads(model, float("inf"))
        scaler.step(optimizer)
        skipped.append(scaler.step_skipped(optimizer))
        scaler.update()
    return skipped


def setup(fused: bool, **options):
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused, foreach=not fused)
    return model, optimizer, GradScaler("cpu", growth_interval=3, **options)


# --------------------------------------------------------------------------- stats()


@FUSED
def test_stats_count_what_happened(fused: bool) -> None:
    model, optimizer, scaler = setup(fused)
    train(scaler, optimizer, model, "xx...xxx.")
    assert scaler.stats() == ScalerStats(
        scale=2.0**12,
        steps=9,
        skipped_steps=5,
        overflow_streak=0,
        longest_overflow_streak=3,
        floor_hits=0,
        min_scale_seen=2.0**12,
        max_scale_seen=2.0**16,
        steps_below_one=0,
    )
    assert scaler.stats().skip_rate == 5 / 9


def test_stats_before_the_first_step_and_when_disabled() -> None:
    fresh = GradScaler("cpu", init_scale=8.0).stats()
    assert (fresh.scale, fresh.steps, fresh.min_scale_seen, fresh.max_scale_seen) == (8.0, 0, 8, 8)
    assert fresh.skip_rate == 0.0
    assert GradScaler("cpu", enabled=False).stats().scale == 1.0


def test_scaler_stats_is_a_frozen_slotted_dataclass() -> None:
    stats = GradScaler("cpu").stats()
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.steps = 3  # type: ignore[misc]
    assert not hasattr(stats, "__dict__")


@FUSED
def test_stats_survive_state_dict_and_torch_tolerates_the_extra_keys(fused: bool) -> None:
    model, optimizer, scaler = setup(fused, hysteresis=2)
    train(scaler, optimizer, model, "x.xx")
    restored = GradScaler("cpu", hysteresis=2)
    restored.load_state_dict(scaler.state_dict())
    assert restored.stats() == scaler.stats()
    theirs = torch.amp.GradScaler("cpu")
    theirs.load_state_dict(scaler.state_dict())
    assert theirs.get_scale() == scaler.get_scale()


@FUSED
def test_stats_is_one_packed_read_on_the_device_path_and_none_on_the_host_path(
    fused: bool,
) -> None:
    model, optimizer, scaler = setup(fused)
    train(scaler, optimizer, model, "x..")
    with count_syncs() as counter:
        scaler.stats()
    assert counter.count == (1 if fused else 0)
    with count_syncs() as counter:
        scaler.stats()  # the first read left a host mirror: a second one reads nothing
    assert counter.count == 0


# --------------------------------------------------------------------------- peek_scale()


@FUSED
def test_peek_scale_is_current_on_cpu(fused: bool) -> None:
    model, optimizer, scaler = setup(fused)
    assert scaler.peek_scale() is None  # no scale yet
    for pattern in ("x", ".", "x", "x"):
        train(scaler, optimizer, model, pattern)
        assert scaler.peek_scale() == scaler.get_scale()


@FUSED
def test_peek_scale_reads_nothing_on_the_host_path_and_the_host_scale_once_on_cpu(
    fused: bool,
) -> None:
    # On CUDA the device path reads only pinned copies (tests/gpu); on CPU the scale tensor is
    # host memory, read directly, and the counter (which treats it as device memory) sees it.
    model, optimizer, scaler = setup(fused)
    for pattern in ("x", ".", "x"):
        train(scaler, optimizer, model, pattern)
        with count_syncs() as counter:
            scaler.peek_scale()
        assert counter.count == (1 if fused else 0)


@FUSED
def test_peek_scale_reports_a_scale_below_one(fused: bool) -> None:
    model, optimizer, scaler = setup(fused, below_one="warn")
    scaler.scale(torch.ones(()))
    scaler.update(1.0)
    train(scaler, optimizer, model, "x")
    with pytest.warns(ScaleBelowOneWarning, match="fell below 1"):
        assert scaler.peek_scale() == 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScaleBelowOneWarning)
        assert scaler.peek_scale() == 0.5  # reported once


def test_peek_scale_when_disabled_is_one() -> None:
    assert GradScaler("cpu", enabled=False).peek_scale() == 1.0


# --------------------------------------------------------------------------- step_skipped()


@FUSED
def test_step_skipped_is_a_device_flag_per_step(fused: bool) -> None:
    model, optimizer, scaler = setup(fused)
    flags = train(scaler, optimizer, model, "x.xx.")
    assert [bool(f) for f in flags] == [True, False, True, True, False]
    assert all(f.dtype == torch.bool and f.dim() == 0 for f in flags)
    assert scaler.step_skipped(optimizer).device == scaler._scale.device
    assert not scaler.step_skipped(optimizer)  # still valid after update()


def test_step_skipped_costs_no_sync_and_needs_a_step() -> None:
    model, optimizer, scaler = setup(True)
    with pytest.raises(RuntimeError, match=r"valid after scaler\.step"):
        scaler.step_skipped(optimizer)
    train(scaler, optimizer, model, "x")
    with count_syncs() as counter:
        scaler.step_skipped(optimizer)
    assert counter.count == 0
    assert not GradScaler("cpu", enabled=False).step_skipped(optimizer)


def test_step_skipped_keeps_a_warmup_schedule_in_step_without_a_sync() -> None:
    # The pattern shown in step_skipped's docstring, with a tensor lr on a fused optimizer.
    model = make_model()
    lr = torch.tensor(0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)
    scaler = GradScaler("cpu")
    real_steps = torch.zeros((), dtype=torch.int64)
    with count_syncs() as counter:
        for step, char in enumerate("xx.x...."):
            optimizer.zero_grad()
            forward_backward(model, scaler, step)
            if char == "x":
                poison_grads(model, float("nan"))
            scaler.step(optimizer)
            real_steps += ~scaler.step_skipped(optimizer)
            scaler.update()
            lr.copy_(1e-3 * (real_steps / 10).clamp(max=1.0))
    assert counter.count == 0
    assert int(real_steps) == 5
    assert lr.item() == pytest.approx(5e-4)


# --------------------------------------------------------------------------- the sync budget


def test_monitoring_and_policy_add_no_sync_per_step() -> None:
    counts = []
    for options in ({}, {"below_one": "warn", "min_scale": 1.0, "hysteresis": 2}):
        model, optimizer, scaler = setup(True, **options)
        with count_syncs() as counter:
            for step in range(6):
                optimizer.zero_grad()
                forward_backward(model, scaler, step)
                if step % 2:
                    poison_grads(model, float("inf"))
                scaler.step(optimizer)
                scaler.step_skipped(optimizer)
                scaler.update()
        counts.append(counter.count)
    assert counts == [0, 0]
