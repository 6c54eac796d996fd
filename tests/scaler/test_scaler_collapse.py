"""The scale collapse: torch's bug reproduced as measured, and ours staying safe."""

from __future__ import annotations

import math

import pytest
import torch
from scaler_harness import forward_backward, make_model

from scaler import GradScaler
from scaler._scale_update import SAFETY_FLOOR


def overflowing_steps(scaler, steps: int) -> list[float]:
    """Run ``steps`` iterations whose gradients are all inf; the scale after each."""
    param = torch.nn.Parameter(torch.ones(4))
    optimizer = torch.optim.SGD([param], lr=0.1)
    history = []
    for _ in range(steps):
        scaler.scale(torch.ones(()))
        param.grad = torch.full((4,), float("inf"))
        scaler.step(optimizer)
        scaler.update()
        history.append(scaler.get_scale())
    return history


def clean_step(scaler, param: torch.nn.Parameter, optimizer) -> None:
    """A step whose gradients are finite and honestly scaled (a true gradient of 1)."""
    param.grad = torch.ones_like(param) * scaler._scale
    scaler.step(optimizer)
    scaler.update()


def test_torch_scale_collapses_as_measured() -> None:
    # Documents the torch 2.13 bug that issue 3 is about; if torch fixes it, this fails and the
    # docs must be updated.
    history = overflowing_steps(torch.amp.GradScaler("cpu"), 170)
    assert next(i for i, s in enumerate(history, 1) if s < 1) == 17
    assert history[142 - 1] == 2.0**-126
    assert history[144 - 1] == 2.0**-128
    assert math.isinf(torch.tensor(history[144 - 1]).double().reciprocal().float().item())
    assert next(i for i, s in enumerate(history, 1) if s == 0) == 166
    assert history[-1] == 0.0


def test_torch_writes_non_finite_params_after_collapse() -> None:
    scaler = torch.amp.GradScaler("cpu")
    overflowing_steps(scaler, 144)
    param = torch.nn.Parameter(torch.ones(4))
    optimizer = torch.optim.SGD([param], lr=0.1)
    scaler.scale(torch.ones(()))
    clean_step(scaler, param, optimizer)
    assert not torch.isfinite(param).all()


def test_ours_matches_torch_above_the_floor_and_stops_there() -> None:
    ours = overflowing_steps(GradScaler("cpu"), 300)
    theirs = overflowing_steps(torch.amp.GradScaler("cpu"), 142)
    assert ours[:142] == theirs
    assert all(scale == SAFETY_FLOOR for scale in ours[142:])
    assert SAFETY_FLOOR == 2.0**-126
    assert math.isfinite(torch.tensor(SAFETY_FLOOR).double().reciprocal().float().item())


def test_ours_keeps_params_finite_and_training_resumes_after_300_overflows() -> None:
    scaler = GradScaler("cpu", growth_interval=1)
    overflowing_steps(scaler, 300)
    param = torch.nn.Parameter(torch.ones(4))
    optimizer = torch.optim.SGD([param], lr=0.1)
    for _ in range(200):
        clean_step(scaler, param, optimizer)
    assert torch.isfinite(param).all()
    # 200 clean steps of a true gradient 1 with lr 0.1 moved the params by 20 (fp32 rounding).
    torch.testing.assert_close(param.detach(), torch.full((4,), 1.0 - 20.0), atol=1e-4, rtol=0)
    # and the scale grew back from the floor (growth_interval=1 doubles it each clean step).
    assert scaler.get_scale() == 2.0**-126 * 2.0**200


def test_real_model_trains_after_collapse() -> None:
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = GradScaler("cpu", growth_interval=1)
    overflowing_steps(scaler, 300)
    before = [p.detach().clone() for p in model.parameters()]
    for step in range(140):
        optimizer.zero_grad()
        forward_backward(model, scaler, step)
        scaler.step(optimizer)
        scaler.update()
    assert all(torch.isfinite(p).all() for p in model.parameters())
    # Every clean step grew the scale back from the floor, and the weights moved.
    assert scaler.get_scale() == 2.0**-126 * 2.0**140
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))


@pytest.mark.parametrize("min_scale", [1.0, 2.0**-10])
def test_min_scale_is_a_floor_and_hits_are_counted(min_scale: float) -> None:
    scaler = GradScaler("cpu", min_scale=min_scale)
    history = overflowing_steps(scaler, 40)
    assert min(history) == min_scale
    expected_hits = sum(1 for before in [2.0**16, *history[:-1]] if before * 0.5 < min_scale)
    assert scaler.stats().floor_hits == expected_hits > 0


def test_a_collapsed_torch_checkpoint_loads_at_the_floor_and_training_recovers() -> None:
    collapsed = torch.amp.GradScaler("cpu", growth_interval=1)
    overflowing_steps(collapsed, 170)
    state = collapsed.state_dict()
    assert state["scale"] == 0.0  # torch's own checkpoint of a collapsed run

    ours = GradScaler("cpu", growth_interval=1)
    ours.load_state_dict(state)
    assert ours.get_scale() == SAFETY_FLOOR
    param = torch.nn.Parameter(torch.ones(4))
    optimizer = torch.optim.SGD([param], lr=0.1)
    for _ in range(10):
        ours.scale(torch.ones(()))
        clean_step(ours, param, optimizer)
    assert torch.isfinite(param).all()
    torch.testing.assert_close(param.detach(), torch.zeros(4), rtol=0, atol=1e-6)  # 1 - 10 * 0.1
    assert ours.get_scale() == SAFETY_FLOOR * 2**10


# The device path: fused Adam/AdamW (the recommended setup) skip inside their own kernel, and
# ours updates the scale with device ops instead of the host mirror. Same checks against torch.
FUSED_OPTIMIZERS = {
    "adam": lambda params: torch.optim.Adam(params, lr=0.1, fused=True),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.1, fused=True),
}


def overflowing_fused_steps(scaler, optimizer_name: str, steps: int) -> list[float]:
    """``overflowing_steps`` through a fused optimizer; the scale read via the tensor."""
    param = torch.nn.Parameter(torch.ones(4))
    optimizer = FUSED_OPTIMIZERS[optimizer_name]([param])
    history = []
    for _ in range(steps):
        scaler.scale(torch.ones(()))
        param.grad = torch.full((4,), float("inf"))
        scaler.step(optimizer)
        scaler.update()
        history.append(scaler._scale.item())
    assert torch.equal(param.detach(), torch.ones(4))  # every step was skipped
    return history


@pytest.mark.parametrize("optimizer_name", sorted(FUSED_OPTIMIZERS))
def test_fused_path_matches_torch_above_the_floor_and_stops_there(optimizer_name: str) -> None:
    ours = overflowing_fused_steps(GradScaler("cpu"), optimizer_name, 200)
    theirs = overflowing_fused_steps(torch.amp.GradScaler("cpu"), optimizer_name, 170)
    assert ours[:142] == theirs[:142]
    assert theirs[144 - 1] == 2.0**-128  # torch collapses on this path too
    assert theirs[-1] == 0.0
    assert all(scale == SAFETY_FLOOR for scale in ours[142:])


@pytest.mark.parametrize("optimizer_name", sorted(FUSED_OPTIMIZERS))
def test_fused_path_keeps_params_finite_and_training_resumes(optimizer_name: str) -> None:
    scaler = GradScaler("cpu", growth_interval=1)
    overflowing_fused_steps(scaler, optimizer_name, 300)
    assert scaler.stats().floor_hits == 300 - 142
    param = torch.nn.Parameter(torch.ones(4))
    optimizer = FUSED_OPTIMIZERS[optimizer_name]([param])
    for _ in range(20):
        clean_step(scaler, param, optimizer)
    assert torch.isfinite(param).all()
    # Adam's first steps move each weight by about lr against the sign of its gradient (+1).
    assert (param.detach() < 1.0 - 0.1 * 10).all()
    assert scaler.get_scale() == 2.0**-126 * 2.0**20
