"""Count the host syncs a block of code makes: how ampscale's tests prove "no sync"."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class SyncCounter(TorchDispatchMode):
    """Counts device-to-host scalar reads inside a ``with`` block.

    Every ``.item()``, ``bool(tensor)``, ``float(tensor)`` and ``int(tensor)`` goes through
    ``aten._local_scalar_dense``, and on CUDA each one waits for every queued kernel. This works
    on CPU too, so a loop's syncs can be counted where there is no GPU. Whole-tensor copies
    (``.cpu()``, ``.tolist()``) take another path and are not counted. Example::

        with SyncCounter() as syncs:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        print(syncs.count)  # 0 with a fused optimizer
    """

    def __init__(self) -> None:
        super().__init__()
        #: Scalar reads seen so far.
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default:
            self.count += 1
        return func(*args, **(kwargs or {}))
