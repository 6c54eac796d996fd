"""``restoring()``: a checkpoint restore's dummy step through the scaler keeps its loaded state.

``torch.distributed.checkpoint.state_dict`` initialises an empty optimizer state by stepping it
on zero gradients; accelerate's optimizer wrapper sends that step through ``scaler.step`` and
``scaler.update`` after loading the scaler (accelerate #4289). The multi-rank FSDP2 version of
this is in test_scaler_distributed.py; here, one process and the same sequence.
"""

from __future__ import annotations

import pytest
import torch
from scaler_harness import forward_backward, make_model

from scaler import GradScaler


def trained_state() -> dict:
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=True)
    scaler = GradScaler("cpu", growth_interval=3)
    for step in range(2):  # two clean steps: the next clean one grows the scale
        optimizer.zero_grad()
        forward_backward(model, scaler, step)
        scaler.step(optimizer)
        scaler.update()
    return scaler.state_dict()


def dummy_step(scaler, optimizer, model) -> None:
    """What DCP's ``_init_optim_state`` does through accelerate's wrapper."""
    for param in model.parameters():
        param.grad = torch.zeros_like(param)
    scaler.step(optimizer)
    scaler.update()


def restored(make_scaler, fused: bool = True):
    saved = trained_state()
    model = make_model(seed=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=fused, foreach=not fused)
    scaler = make_scaler()
    scaler.load_state_dict(saved)
    scaler._lazy_init_scale_growth_tracker(torch.device("cpu"))  # accelerate does this too
    return saved, model, optimizer, scaler


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "foreach"])
def test_a_step_inside_restoring_keeps_the_loaded_state(fused: bool) -> None:
    saved, model, optimizer, scaler = restored(lambda: GradScaler("cpu"), fused)
    assert saved["_growth_tracker"] == 2
    with scaler.restoring():
        dummy_step(scaler, optimizer, model)
    assert scaler.state_dict() == saved
    assert optimizer.state  # the optimizer itself did step (DCP needs its state to exist)


@pytest.mark.parametrize("kind", ["ours", "torch"])
def test_outside_restoring_the_step_counts_as_torchs_does(kind: str) -> None:
    # accelerate #4289 as torch 2.13 behaves: the dummy step is a clean step, the third in a
    # row with growth_interval=3, so the loaded scale doubles. Ours keeps that parity.
    make = (lambda: GradScaler("cpu")) if kind == "ours" else (lambda: torch.amp.GradScaler("cpu"))
    saved, model, optimizer, scaler = restored(make)
    dummy_step(scaler, optimizer, model)
    assert scaler.get_scale() == 2 * saved["scale"]


def test_training_after_restoring_updates_the_scale_again() -> None:
    saved, model, optimizer, scaler = restored(lambda: GradScaler("cpu"))
    with scaler.restoring():
        dummy_step(scaler, optimizer, model)
    optimizer.zero_grad()
    forward_backward(model, scaler, 5)
    scaler.step(optimizer)
    scaler.update()
    assert scaler.get_scale() == 2 * saved["scale"]  # the third clean step grew it
    assert scaler.stats().steps == saved["_ampscale_stats"]["counters"][0] + 1


def test_restoring_ends_with_its_block_even_when_the_restore_fails() -> None:
    _, model, optimizer, scaler = restored(lambda: GradScaler("cpu"))
    with pytest.raises(OSError, match="checkpoint missing"), scaler.restoring():
        raise OSError("checkpoint missing")
    before = scaler.get_scale()
    dummy_step(scaler, optimizer, model)
    assert scaler.get_scale() == 2 * before
