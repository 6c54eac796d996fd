"""Count the integrations' own reads of the scaler, to account for every sync they add.

On CPU, ``peek_scale()`` reads the scale tensor itself (on CUDA it reads a pinned copy that an
earlier step queued, no sync), ``stats()`` is the one explicit transfer per log, and, with
``track_overflows=True``, ``overflow_report()`` is one more. The sync
tests allow at most those, one ``SyncCounter`` count per call as measured on a bare scaler, and
nothing else. ``SkipAwareScheduler.peek_last_lr()`` is the same kind of read of the LR (the HF
Trainer reads the LR at every step): CPU-only, none on CUDA.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from scaler import GradScaler, SkipAwareScheduler, SyncCounter

#: The counted reads, and the class each is a method of.
READS: dict[str, type] = {
    "peek_scale": GradScaler,
    "stats": GradScaler,
    "overflow_report": GradScaler,
    "peek_last_lr": SkipAwareScheduler,
}


@contextmanager
def counting_reads() -> Iterator[Counter[str]]:
    """Count calls of each method in ``READS`` while inside."""
    calls: Counter[str] = Counter()
    originals = {name: owner.__dict__[name] for name, owner in READS.items()}

    def counting(name: str) -> Any:
        def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return originals[name](self, *args, **kwargs)

        return counted

    try:
        for name, owner in READS.items():
            setattr(owner, name, counting(name))
        yield calls
    finally:
        for name, original in originals.items():
            setattr(READS[name], name, original)


def syncs_per_read() -> dict[str, int]:
    """What one call of each read costs in ``SyncCounter`` counts on a CPU scaler that stepped
    a fused optimizer (the path the sync tests train on), tracking overflows (which costs
    ``stats()`` nothing more there: the count travels in its one copy)."""
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.Adam([param], fused=True)
    scaler = GradScaler("cpu", track_overflows=True)
    schedule = SkipAwareScheduler(torch.optim.lr_scheduler.StepLR(optimizer, 2), scaler)
    scaler.scale(param.sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    schedule.step()
    owners = {GradScaler: scaler, SkipAwareScheduler: schedule}
    cost = {}
    for name, owner in READS.items():
        with SyncCounter() as syncs:
            getattr(owners[owner], name)()
        cost[name] = syncs.count
    return cost
