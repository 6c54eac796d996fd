"""min_scale, max_scale, hysteresis and the deferred below-one policy, all on the device."""

from __future__ import annotations

import warnings

import pytest
import torch
from scaler_harness import count_syncs, run_pattern

from scaler import GradScaler, ScaleBelowOneError, ScaleBelowOneWarning
from scaler._scale_update import ScaleState, _update_with_hysteresis


def run(scaler, pattern: str) -> list[float]:
    """`run_pattern`, reading the scale tensor directly: get_scale() would report the policy."""
    return run_pattern(scaler, pattern, read_scale=lambda s: s._scale.item())


def counters(scaler) -> list[int]:
    stats = scaler.stats()
    return [
        stats.steps,
        stats.skipped_steps,
        stats.overflow_streak,
        stats.longest_overflow_streak,
        stats.floor_hits,
        stats.steps_below_one,
    ]


# --------------------------------------------------------------------------- floor and cap


def test_max_scale_caps_growth() -> None:
    scaler = GradScaler("cpu", init_scale=1.0, growth_interval=1, max_scale=8.0)
    assert run(scaler, "......") == [2.0, 4.0, 8.0, 8.0, 8.0, 8.0]


def test_min_scale_floor_counts_hits() -> None:
    scaler = GradScaler("cpu", init_scale=8.0, min_scale=2.0)
    assert run(scaler, "xxxxx") == [4.0, 2.0, 2.0, 2.0, 2.0]
    assert counters(scaler)[4] == 3  # floor_hits


# --------------------------------------------------------------------------- hysteresis


def test_hysteresis_backs_off_only_after_n_overflows_and_refills_on_growth() -> None:
    scaler = GradScaler("cpu", init_scale=64.0, growth_interval=2, hysteresis=3)
    history = run(scaler, "xx" + "x" + "x" + ".." + "x" + "xx")
    # Two overflows absorbed, the third and fourth back off; two clean steps grow and refill
    # the budget, so the next two overflows are absorbed and the third backs off again.
    assert history == [64.0, 64.0, 32.0, 16.0, 16.0, 32.0, 32.0, 32.0, 16.0]


def test_hysteresis_is_not_refilled_by_clean_steps_that_do_not_grow() -> None:
    # Alternating overflows still back off (the reason for the chosen semantics).
    scaler = GradScaler("cpu", init_scale=64.0, growth_interval=100, hysteresis=2)
    assert run(scaler, "x.x.x.") == [64.0, 64.0, 32.0, 32.0, 16.0, 16.0]


def test_hysteresis_one_in_our_kernel_equals_torchs_kernel() -> None:
    # The tensor-op update used for hysteresis > 1, run with hysteresis=1, against torch's kernel.
    generator = torch.Generator().manual_seed(0)
    ours = ScaleState(torch.device("cpu"), 2.0**10, 0, 1)
    scale, tracker = torch.full((), 2.0**10), torch.zeros((), dtype=torch.int32)
    for _ in range(200):
        found_inf = (torch.rand((), generator=generator) < 0.3).float()
        _update_with_hysteresis(ours, found_inf, 2.0, 0.5, 3, 1)
        torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 3)
        assert ours.scale.item() == scale.item()
        assert ours.growth_tracker.item() == tracker.item()


def test_our_kernel_does_not_grow_to_infinity() -> None:
    state = ScaleState(torch.device("cpu"), torch.finfo(torch.float32).max, 0, 2)
    _update_with_hysteresis(state, torch.zeros(()), 2.0, 0.5, 1, 2)
    assert state.scale.item() == torch.finfo(torch.float32).max


# --------------------------------------------------------------------------- below-one policy


def test_ignore_is_silent() -> None:
    scaler = GradScaler("cpu", init_scale=2.0)
    run(scaler, "xxx")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert scaler.get_scale() == 0.25
        scaler.state_dict()
        scaler.check()


def test_warn_is_deferred_to_get_scale_and_reported_once() -> None:
    scaler = GradScaler("cpu", init_scale=2.0, below_one="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(scaler, "xxx")  # update() itself never reports: it cannot know without a sync
    with pytest.warns(ScaleBelowOneWarning, match=r"fell below 1 \(now 0.25\)"):
        assert scaler.get_scale() == 0.25
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert scaler.get_scale() == 0.25  # already reported


def test_warn_at_state_dict_and_check() -> None:
    scaler = GradScaler("cpu", init_scale=1.0, below_one="warn")
    run(scaler, "x")
    with pytest.warns(ScaleBelowOneWarning):
        scaler.state_dict()
    run(scaler, "x")
    with pytest.warns(ScaleBelowOneWarning, match="bf16"):
        scaler.check()


def test_raise_is_deferred_and_raises_our_error() -> None:
    scaler = GradScaler("cpu", init_scale=1.0, below_one="raise")
    run(scaler, "xx")
    with pytest.raises(ScaleBelowOneError, match="fell below 1"):
        scaler.check()
    scaler.check()  # reported once


def test_floor_hit_above_one_is_an_event_too() -> None:
    scaler = GradScaler("cpu", init_scale=8.0, min_scale=4.0, below_one="raise")
    run(scaler, "x")
    scaler.check()  # 4.0: at the floor, not below it
    run(scaler, "x")
    with pytest.raises(ScaleBelowOneError, match="hit the min_scale floor"):
        scaler.get_scale()


def test_warning_class_is_a_user_warning_and_filterable() -> None:
    assert issubclass(ScaleBelowOneWarning, UserWarning)
    assert issubclass(ScaleBelowOneError, RuntimeError)
    scaler = GradScaler("cpu", init_scale=1.0, below_one="warn")
    run(scaler, "x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ScaleBelowOneWarning)
        scaler.get_scale()


def test_get_scale_reports_an_event_within_its_one_sync() -> None:
    scaler = GradScaler("cpu", init_scale=1.0, below_one="warn")
    run(scaler, "x")
    with count_syncs() as counter, pytest.warns(ScaleBelowOneWarning):
        scaler.get_scale()
    assert counter.count == 1  # the event flag travels in the sign of the scale
    with count_syncs() as counter:
        scaler.get_scale()
    assert counter.count == 1


# --------------------------------------------------------------------------- counters


def test_counters_track_steps_skips_streaks_and_steps_below_one() -> None:
    scaler = GradScaler("cpu", init_scale=4.0, growth_interval=100)
    run(scaler, "x.xxxx..x")
    steps, skipped, streak, longest, floor_hits, below_one = counters(scaler)
    assert (steps, skipped, streak, longest, floor_hits) == (9, 6, 1, 4, 0)
    # 4 -> 2 -> 2 -> 1 -> 0.5 -> 0.25 -> 0.125 -> .125 -> .125 -> 0.0625: 6 updates end below 1
    assert below_one == 6
    stats = scaler.stats()
    assert (stats.min_scale_seen, stats.max_scale_seen) == (0.0625, 4.0)
