"""The sync budget (SPEC §1.3) as tests: device-to-host reads counted per call."""

from __future__ import annotations

import pytest
import torch
from scaler_harness import (
    MODES,
    OPTIMIZERS,
    count_syncs,
    forward_backward,
    make_model,
    poison_grads,
)

from scaler import GradScaler

CONFIGS = {
    "default": {},
    "policy": {"min_scale": 1.0, "max_scale": 2.0**20, "hysteresis": 3, "below_one": "raise"},
    "warn": {"below_one": "warn", "hysteresis": 2},
}


def prepared(optimizer_name: str, mode: str, scaler_factory):
    model = make_model()
    optimizer = OPTIMIZERS[optimizer_name](model.parameters(), **MODES[mode])
    return model, optimizer, scaler_factory()


def syncs_per_call(model, optimizer, scaler, poison: bool) -> dict[str, int]:
    counts = {}
    optimizer.zero_grad()
    inputs = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = model(inputs).float().square().mean()
    with count_syncs() as counter:
        scaled = scaler.scale(loss)
    counts["scale"] = counter.count
    scaled.backward()
    if poison:
        poison_grads(model, float("inf"))
    with count_syncs() as counter:
        scaler.unscale_(optimizer)
    counts["unscale_"] = counter.count
    with count_syncs() as counter:
        scaler.step(optimizer)
    counts["step"] = counter.count
    with count_syncs() as counter:
        scaler.update()
    counts["update"] = counter.count
    return counts


@pytest.mark.parametrize("mode", ["foreach", "fused"])
@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("poison", [False, True], ids=["clean", "overflow"])
def test_scale_unscale_update_never_sync(config: str, poison: bool, mode: str) -> None:
    model, optimizer, scaler = prepared("adam", mode, lambda: GradScaler("cpu", **CONFIGS[config]))
    for _ in range(3):
        counts = syncs_per_call(model, optimizer, scaler, poison)
        assert (counts["scale"], counts["unscale_"], counts["update"]) == (0, 0, 0)


@pytest.mark.parametrize("optimizer_name", ["adam", "adamw"])
def test_fused_adam_steps_without_a_sync(optimizer_name: str) -> None:
    model, optimizer, scaler = prepared(optimizer_name, "fused", lambda: GradScaler("cpu"))
    for step in range(4):
        optimizer.zero_grad()
        forward_backward(model, scaler, step)
        if step == 0:
            poison_grads(model, float("inf"))  # a skipped first step needs no sync either
        with count_syncs() as counter:
            scaler.step(optimizer)
            scaler.update()
        assert counter.count == 0


def test_fused_sgd_syncs_only_until_its_momentum_buffers_exist() -> None:
    model, optimizer, scaler = prepared("sgd", "fused", lambda: GradScaler("cpu"))
    counts = []
    for step in range(4):
        optimizer.zero_grad()
        forward_backward(model, scaler, step)
        if step in (0, 2):
            poison_grads(model, float("nan"))
        with count_syncs() as counter:
            scaler.step(optimizer)
        counts.append(counter.count)
        scaler.update()
    # step 0 skipped via the sync path, step 1 initialises the buffers (sync path), then fused.
    assert counts == [1, 1, 0, 0]


@pytest.mark.parametrize("mode", ["forloop", "foreach"])
@pytest.mark.parametrize("optimizer_name", sorted(OPTIMIZERS))
def test_non_fused_step_syncs_no_more_than_torch(optimizer_name: str, mode: str) -> None:
    ours = syncs_per_call(*prepared(optimizer_name, mode, lambda: GradScaler("cpu")), poison=False)
    theirs = syncs_per_call(
        *prepared(optimizer_name, mode, lambda: torch.amp.GradScaler("cpu")), poison=False
    )
    assert ours["step"] <= theirs["step"]
    # Of which exactly one is ours: the rest is the optimizer's own (Adam reads its step count).
    model = make_model()
    optimizer = OPTIMIZERS[optimizer_name](model.parameters(), **MODES[mode])
    model(torch.randn(4, 8)).square().mean().backward()
    with count_syncs() as counter:
        optimizer.step()
    assert ours["step"] - counter.count == 1


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_get_scale_is_exactly_one_sync(config: str) -> None:
    model, optimizer, scaler = prepared(
        "adam", "foreach", lambda: GradScaler("cpu", **CONFIGS[config])
    )
    syncs_per_call(model, optimizer, scaler, poison=False)
    with count_syncs() as counter:
        scaler.get_scale()
    assert counter.count == 1


def test_torch_get_scale_is_one_sync_too() -> None:
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale(torch.ones(()))
    with count_syncs() as counter:
        scaler.get_scale()
    assert counter.count == 1


def test_counter_sees_a_hidden_item() -> None:
    # The counter is the contract's instrument: it must catch each spelling of a host read
    # (every spelling has its own test in test_sync_counter.py).
    t = torch.ones(())
    with count_syncs() as counter:
        t.item()
        bool(t)
        float(t)
        t.tolist()
        t.cpu()
    assert counter.count == 5
