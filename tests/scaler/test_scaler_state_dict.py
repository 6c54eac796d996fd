"""State dicts interchange with torch.amp.GradScaler in both directions."""

from __future__ import annotations

import torch
from scaler_harness import run_pattern as run

from scaler import GradScaler

TORCH_KEYS = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}


def test_ours_has_torchs_keys_with_torchs_values() -> None:
    ours, theirs = (
        GradScaler("cpu", growth_interval=4),
        torch.amp.GradScaler("cpu", growth_interval=4),
    )
    run(ours, "x..x..")
    run(theirs, "x..x..")
    ours_dict, theirs_dict = ours.state_dict(), theirs.state_dict()
    assert ours_dict.keys() >= TORCH_KEYS
    assert {key: ours_dict[key] for key in TORCH_KEYS} == theirs_dict
    assert all(key.startswith("_") for key in ours_dict.keys() - TORCH_KEYS)


def test_torch_loads_ours_and_continues_identically() -> None:
    ours = GradScaler("cpu", growth_interval=3)
    run(ours, "x.x..")
    theirs = torch.amp.GradScaler("cpu")
    theirs.load_state_dict(ours.state_dict())
    assert theirs.get_scale() == ours.get_scale()
    assert theirs._get_growth_tracker() == 2
    assert run(theirs, "..x...") == run(ours, "..x...")


def test_ours_loads_torchs_and_continues_identically() -> None:
    theirs = torch.amp.GradScaler("cpu", growth_interval=3)
    run(theirs, "xx..")
    ours = GradScaler("cpu")
    ours.load_state_dict(theirs.state_dict())
    assert ours.get_scale() == theirs.get_scale() == 2.0**14
    assert ours.get_growth_interval() == 3
    assert run(ours, ".x....") == run(theirs, ".x....")


def test_loading_after_the_scale_exists_updates_it_in_place() -> None:
    source = GradScaler("cpu")
    run(source, "xxx")
    target = GradScaler("cpu")
    run(target, "..")
    scale_tensor = target._scale
    target.load_state_dict(source.state_dict())
    assert target._scale is scale_tensor
    assert target.state_dict() == source.state_dict()


def test_ours_round_trips_counters_and_hysteresis() -> None:
    source = GradScaler("cpu", hysteresis=3, growth_interval=2)
    run(source, "x.xx..x")
    target = GradScaler("cpu", hysteresis=3, growth_interval=2)
    target.load_state_dict(source.state_dict())
    assert target.state_dict() == source.state_dict()
    assert target.state_dict()["_ampscale_stats"]["counters"][:2] == [7, 4]
    assert run(target, "xx.x") == run(source, "xx.x")


def test_disabled_scalers_save_nothing_and_load_nothing() -> None:
    disabled = GradScaler("cpu", enabled=False)
    assert disabled.state_dict() == {}
    disabled.load_state_dict({"anything": 1})  # a no-op, as in torch
    assert disabled.get_scale() == 1.0
