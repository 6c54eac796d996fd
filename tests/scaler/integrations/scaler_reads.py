"""Count the integrations' own reads of the scaler, to account for every sync they add.

On CPU, ``peek_scale()`` reads the scale tensor itself (on CUDA it reads a pinned copy that an
earlier step queued, no sync), and ``stats()`` is the one explicit transfer per log. The sync
tests allow at most those, one ``SyncCounter`` count per call as measured on a bare scaler, and
nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from scaler import GradScaler, SyncCounter

READS = ("peek_scale", "stats")


@contextmanager
def counting_reads() -> Iterator[Counter[str]]:
    """Count calls of ``GradScaler.peek_scale`` and ``GradScaler.stats`` while inside."""
    calls: Counter[str] = Counter()
    originals = {name: GradScaler.__dict__[name] for name in READS}

    def counting(name: str) -> Any:
        def counted(self: GradScaler, *args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return originals[name](self, *args, **kwargs)

        return counted

    try:
        for name in READS:
            setattr(GradScaler, name, counting(name))
        yield calls
    finally:
        for name, original in originals.items():
            setattr(GradScaler, name, original)


def syncs_per_read() -> dict[str, int]:
    """What one call of each read costs in ``SyncCounter`` counts on a CPU scaler that stepped
    a fused optimizer (the path the sync tests train on)."""
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.Adam([param], fused=True)
    scaler = GradScaler("cpu")
    scaler.scale(param.sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    cost = {}
    for name in READS:
        with SyncCounter() as syncs:
            getattr(scaler, name)()
        cost[name] = syncs.count
    return cost
