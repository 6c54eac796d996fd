"""The host mirror (used when every found-inf flag reached the host) equals the device update."""

from __future__ import annotations

import random

import pytest
import torch
from scaler_harness import forward_backward, make_model, poison_grads, twin

from scaler import GradScaler
from scaler._host_mirror import HostMirror, to_fp32
from scaler._scale_update import SAFETY_FLOOR, ScaleState, update_scale_

CONFIGS = [
    {"growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3, "hysteresis": 1},
    {"growth_factor": 1.1, "backoff_factor": 0.7, "growth_interval": 2, "hysteresis": 1},
    {"growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2, "hysteresis": 3},
    {"growth_factor": 1.3, "backoff_factor": 0.3, "growth_interval": 4, "hysteresis": 2},
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(map(str, c.values())))
@pytest.mark.parametrize(("floor", "cap"), [(SAFETY_FLOOR, 3e38), (0.25, 64.0)])
def test_mirror_advances_exactly_like_the_device(config: dict, floor: float, cap: float) -> None:
    rng = random.Random(7)
    state = ScaleState(torch.device("cpu"), 8.0, 0, config["hysteresis"], floor=floor)
    mirror = HostMirror.from_host(state.to_host())
    for _ in range(300):
        found = rng.random() < 0.45
        update_scale_(state, torch.tensor(float(found)), floor=floor, cap=cap, **config)
        mirror.advance(found, floor=floor, cap=cap, **config)
        host = state.to_host()
        assert host["scale"] == mirror.scale
        assert host["growth_tracker"] == mirror.growth_tracker
        assert host["hysteresis_tracker"] == mirror.hysteresis_tracker
        assert host["counters"] == mirror.counters
        assert host["scale_range"] == [mirror.scale_min, mirror.scale_max]


def test_fp32_rounding_matches_a_cpp_conversion() -> None:
    for value in (1.1, 3.0 * 1.1, 1e-40, 3.4028235e38, 3.4028236e38, 1e39, -2.5):
        assert to_fp32(value) == torch.tensor(value, dtype=torch.float64).float().item()


def train(model, optimizer, scaler, steps: int, poison_at: set[int]) -> None:
    for step in range(steps):
        optimizer.zero_grad()
        forward_backward(model, scaler, step)
        if step in poison_at:
            poison_grads(model, float("inf"))
        scaler.step(optimizer)
        scaler.update()


@pytest.mark.parametrize("options", [{}, {"hysteresis": 2, "min_scale": 2.0**13}])
def test_host_path_and_device_path_agree_and_hand_over(options: dict) -> None:
    # Non-fused Adam takes the host path, fused Adam the device path; both see the same
    # overflows, and the host-path scaler hands over to the device halfway.
    poison_at = {0, 1, 2, 5, 9, 10}
    host_model = make_model()
    device_model = twin(host_model)
    host_opt = torch.optim.Adam(host_model.parameters(), lr=1e-3, foreach=True)
    device_opt = torch.optim.Adam(device_model.parameters(), lr=1e-3, fused=True)
    host_scaler = GradScaler("cpu", growth_interval=3, **options)
    device_scaler = GradScaler("cpu", growth_interval=3, **options)
    train(host_model, host_opt, host_scaler, 8, poison_at)
    train(device_model, device_opt, device_scaler, 8, poison_at)
    assert host_scaler._mirror is not None
    assert device_scaler._mirror is None
    # The host path writes the device trackers lazily; torch's attribute still reads true.
    assert host_scaler._growth_tracker.item() == device_scaler._growth_tracker.item() == 2
    assert host_scaler.stats() == device_scaler.stats()
    assert host_scaler.state_dict() == device_scaler.state_dict()
    # Now the host-path scaler meets a fused optimizer: the device takes over.
    for model, scaler in ((host_model, host_scaler), (device_model, device_scaler)):
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
        for step in range(8, 14):
            opt.zero_grad()
            forward_backward(model, scaler, step)
            if step in poison_at:
                poison_grads(model, float("inf"))
            scaler.step(opt)
            scaler.update()
    assert host_scaler._mirror is None
    assert host_scaler.stats() == device_scaler.stats()
    assert host_scaler.stats().steps == 14


def test_host_path_needs_no_extra_sync_and_stats_then_costs_none() -> None:
    from scaler_harness import count_syncs

    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = GradScaler("cpu")
    train(model, optimizer, scaler, 3, {1})
    with count_syncs() as counter:
        stats = scaler.stats()
    assert counter.count == 0
    assert (stats.steps, stats.skipped_steps) == (3, 1)
