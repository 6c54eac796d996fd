"""SyncCounter counts each host read of tensor memory once, in every spelling, and nothing else.

CPU tensors stand in for device memory (the counter treats them as if they lived on an
accelerator); ``meta`` tensors, which have no data, show the transfer path a real device takes:
the copy is counted, then fails for want of data.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from scaler import SyncCounter

#: Each spelling of a host read, on a CPU tensor of 4 values (the last one 0).
SPELLINGS: dict[str, Callable[[torch.Tensor], object]] = {
    "item": lambda t: t[0].item(),
    "bool": lambda t: bool(t[0]),
    "int": lambda t: int(t[0]),
    "float": lambda t: float(t[0]),
    "if-tensor": lambda t: 1 if t[0] > 0 else 0,
    "tolist": lambda t: t.tolist(),
    "cpu": lambda t: t.cpu(),
    "to-cpu": lambda t: t.to("cpu"),
    "to-device-cpu": lambda t: t.to(device="cpu", non_blocking=True),
    "numpy": lambda t: t.numpy(),
    "np.asarray": lambda t: np.asarray(t),
    "nonzero": lambda t: t.nonzero(),
    "masked_select": lambda t: t.masked_select(t > 0),
    "boolean-mask-index": lambda t: t[t > 0],
    "unique": lambda t: t.unique(),
    "equal": lambda t: torch.equal(t, t),
    "allclose": lambda t: torch.allclose(t, t),
}


def values() -> torch.Tensor:
    return torch.tensor([1.0, 2.0, 3.0, 0.0])


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_each_spelling_of_a_host_read_counts_once(spelling: str) -> None:
    tensor = values()
    with SyncCounter() as syncs:
        SPELLINGS[spelling](tensor)
    assert syncs.count == 1


#: Each spelling of a device-to-host copy, on a tensor that is not on the CPU.
TRANSFERS: dict[str, Callable[[torch.Tensor], object]] = {
    "cpu": lambda t: t.cpu(),
    "to-cpu": lambda t: t.to("cpu"),
    "to-device-object": lambda t: t.to(torch.device("cpu")),
    "tolist": lambda t: t.tolist(),
    "copy_-into-cpu": lambda t: torch.empty(4).copy_(t),
}


@pytest.mark.parametrize("spelling", sorted(TRANSFERS))
def test_each_copy_off_a_device_counts_once(spelling: str) -> None:
    tensor = torch.empty(4, device="meta")
    with SyncCounter() as syncs, pytest.raises(NotImplementedError, match="meta tensor"):
        TRANSFERS[spelling](tensor)
    assert syncs.count == 1


def test_a_scalar_read_on_a_device_counts_once() -> None:
    with SyncCounter() as syncs, pytest.raises(RuntimeError, match="meta"):
        torch.empty((), device="meta").item()
    assert syncs.count == 1


def test_device_side_arithmetic_and_copies_are_not_counted() -> None:
    value = torch.ones(8)
    flag = torch.zeros(())
    with SyncCounter() as syncs:
        (value * 2).sum().mul_(3)
        torch.where(value > 0, value, -value)
        flag.copy_(value.sum())  # device to device
        value.to(value.device, non_blocking=True)  # "to where it is needed": a no-op here
        value.to(torch.float64)
        value.clamp_(max=1.0)
    assert syncs.count == 0


def test_counts_add_up_and_stop_at_the_end_of_the_block() -> None:
    tensor = values()
    with SyncCounter() as syncs:
        tensor.tolist()
        tensor[0].item()
        tensor.nonzero()
    tensor.tolist()
    assert syncs.count == 3
