"""SkipAwareScheduler on CUDA: the device path under sync-debug mode, and peek_last_lr().

Skipped without CUDA (CI has none); run on a GPU machine with
``python -m pytest tests/gpu -p no:cacheprovider``. Not yet run on a GPU (written without one).
"""

from __future__ import annotations

import time

import pytest
import torch
from test_gpu_scaler import make_model, sync_is_an_error, train_step

from scaler import GradScaler, SkipAwareScheduler

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def _scheduled(optimizer_name: str):
    model = make_model()
    optimizer = getattr(torch.optim, optimizer_name)(model.parameters(), lr=1e-3, fused=True)
    scaler = GradScaler("cuda")
    plain = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.5)
    return model, optimizer, scaler, SkipAwareScheduler(plain, scaler)


@pytest.mark.parametrize("optimizer_name", ["Adam", "AdamW", "SGD"])
def test_fused_training_with_a_skip_aware_schedule_never_syncs(optimizer_name: str) -> None:
    model, optimizer, scaler, scheduler = _scheduled(optimizer_name)
    inputs = 0.1 * torch.randn(8, 16, device="cuda")
    # Fused SGD reads the flag until its momentum buffers exist: two clean steps first.
    for _ in range(2):
        train_step(model, optimizer, scaler, inputs)
        scheduler.step()
    with sync_is_an_error():
        for step in range(6):
            train_step(model, optimizer, scaler, inputs, poison=step in (1, 4))
            scheduler.step()
    assert scheduler.last_epoch == 6  # 8 steps, 2 skipped
    assert scheduler.get_last_lr() == [1e-3 * 0.5**6]
    assert optimizer.param_groups[0]["lr"].item() == pytest.approx(1e-3 * 0.5**6, rel=1e-6)


def test_peek_last_lr_lands_without_waiting() -> None:
    model, optimizer, scaler, scheduler = _scheduled("Adam")
    inputs = 0.1 * torch.randn(8, 16, device="cuda")
    with sync_is_an_error():
        assert scheduler.peek_last_lr() is None  # starts the copies; nothing landed yet
        for _ in range(3):
            train_step(model, optimizer, scaler, inputs)
            scheduler.step()
    torch.cuda.synchronize()
    deadline = time.monotonic() + 5
    peeked = scheduler.peek_last_lr()
    while peeked is None and time.monotonic() < deadline:
        peeked = scheduler.peek_last_lr()
    assert peeked == pytest.approx([1e-3 * 0.5**3], rel=1e-6)
