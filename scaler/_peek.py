"""``peek_scale()``: the latest scale that has already reached the host, without waiting.

On CUDA, each ``update()`` (once peeking has started) enqueues an asynchronous copy of the
device state into pinned host memory and records an event after it; ``peek()`` only *queries*
events, newest first, and reads the newest slot whose copy has landed. Two slots alternate, so
a slot is never read while a newer copy into it is pending (its event would not be complete).
"""

from __future__ import annotations

import torch

from scaler._scale_update import FLOOR_HITS, N_COUNTERS, ScaleState


class _Slot:
    __slots__ = ("counters", "event", "filled", "probe")

    def __init__(self, state: ScaleState) -> None:
        self.probe = torch.empty(state._probe.shape, dtype=torch.float32, pin_memory=True)
        self.counters = torch.empty(N_COUNTERS + 2, dtype=torch.int64, pin_memory=True)
        self.event = torch.cuda.Event()
        self.filled = False


class CudaScalePeek:
    """Asynchronous device-to-host copies of the scale and event counters (CUDA only)."""

    __slots__ = ("_acknowledged", "_latest", "_next", "_slots")

    def __init__(self, state: ScaleState) -> None:
        self._slots = (_Slot(state), _Slot(state))
        self._next = 0
        #: (scale, events pending) from the newest slot read so far.
        self._latest: tuple[float, bool] | None = None
        #: Event counters already reported through this channel (copies in flight may still
        #: show them as new).
        self._acknowledged: list[int] | None = None

    def enqueue(self, state: ScaleState) -> None:
        """After an update: copy without waiting; the event marks when the copy has landed."""
        slot = self._slots[self._next]
        slot.probe.copy_(state._probe, non_blocking=True)
        slot.counters[:N_COUNTERS].copy_(state.counters, non_blocking=True)
        slot.counters[N_COUNTERS:].copy_(state.reported, non_blocking=True)
        slot.event.record()
        slot.filled = True
        self._next = 1 - self._next

    def peek(self) -> tuple[float, bool] | None:
        """(scale, new below-one event) from the newest landed copy; never waits."""
        newest_first = (self._slots[1 - self._next], self._slots[self._next])
        for age, slot in enumerate(newest_first):
            if slot.filled and slot.event.query():
                # Pinned host memory: plain reads, no device involved.
                counters = slot.counters.tolist()
                events = counters[FLOOR_HITS:N_COUNTERS]
                pending = events != counters[N_COUNTERS:] and events != self._acknowledged
                self._latest = (slot.probe.tolist()[0], pending)
                for older in newest_first[age:]:  # never go back to an older value
                    older.filled = False
                if pending:
                    self._acknowledged = events
                break
        return self._latest

    def reset(self, scale: float) -> None:
        """The host learned a newer value another way (the host mirror)."""
        self._latest = (scale, False)
        for slot in self._slots:
            slot.filled = False
