"""SyncCounter counts each scalar read the way a CUDA sync would happen, and nothing else."""

from __future__ import annotations

import torch

from scaler import SyncCounter


def test_counts_item_bool_float_and_int_reads() -> None:
    value = torch.tensor(2.5)
    with SyncCounter() as syncs:
        value.item()
        bool(value > 1)
        float(value)
        int(value)
    assert syncs.count == 4


def test_device_side_arithmetic_is_not_counted() -> None:
    value = torch.ones(8)
    with SyncCounter() as syncs:
        (value * 2).sum().mul_(3)
        torch.where(value > 0, value, -value)
    assert syncs.count == 0
