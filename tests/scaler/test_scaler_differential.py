"""Ours and torch.amp.GradScaler side by side: same scale sequence, same parameters and state.

Each case trains two copies of one model under CPU fp16 autocast, one with each scaler, and
injects inf/NaN into the gradients at seeded random steps; the scale must match exactly after
every step, the parameters and optimizer state to atol 1e-7 / rtol 1e-5.
"""

from __future__ import annotations

import itertools
import random
import zlib

import pytest
import torch
from scaler_harness import (
    MODES,
    OPTIMIZERS,
    assert_state_close,
    forward_backward,
    make_model,
    poison_grads,
    twin,
)

from scaler import GradScaler

STEPS = 24
POISONS = (float("inf"), float("-inf"), float("nan"))


def poison_schedule(seed: int) -> dict[int, float]:
    """Steps (never the first: see test_scaler_fused_sgd for that) and the value injected."""
    rng = random.Random(seed)
    steps = [*rng.sample(range(1, STEPS), 5), rng.randrange(1, STEPS - 1)]
    schedule = {step: rng.choice(POISONS) for step in steps}
    # Two overflows in a row at least once, so backoff compounds.
    first = min(schedule)
    schedule[first + 1] = float("inf")
    return schedule


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("optimizer_name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("explicit_unscale", [False, True], ids=["step", "unscale_then_step"])
def test_matches_torch(optimizer_name: str, mode: str, explicit_unscale: bool) -> None:
    ours_model = make_model()
    torch_model = twin(ours_model)
    make = OPTIMIZERS[optimizer_name]
    ours_opt = make(ours_model.parameters(), **MODES[mode])
    torch_opt = make(torch_model.parameters(), **MODES[mode])
    # A short growth interval so that the scale also grows during the run.
    ours = GradScaler("cpu", growth_interval=2)
    reference = torch.amp.GradScaler("cpu", growth_interval=2)
    schedule = poison_schedule(seed=zlib.crc32(f"{optimizer_name}-{mode}".encode()))

    scales = []
    for step in range(STEPS):
        for model, opt, scaler in (
            (ours_model, ours_opt, ours),
            (torch_model, torch_opt, reference),
        ):
            opt.zero_grad()
            forward_backward(model, scaler, step)
            if step in schedule:
                poison_grads(model, schedule[step])
            if explicit_unscale:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        assert ours.get_scale() == reference.get_scale(), f"step {step}"
        scales.append(ours.get_scale())
        if step % 4 == 3:
            assert_state_close(ours_opt, torch_opt)
    assert_state_close(ours_opt, torch_opt)

    # The run really exercised both backoff and growth.
    changes = [after / before for before, after in itertools.pairwise(scales)]
    assert 0.5 in changes
    assert 2.0 in changes


def test_schedules_differ_per_case_and_are_reproducible() -> None:
    assert poison_schedule(1) == poison_schedule(1)
    assert poison_schedule(1) != poison_schedule(2)
