"""An exact host copy of the scaler's device state, for iterations whose flags reach the host.

A non-fused optimizer's step already reads its found-inf flag on the host (the one sync it
needs). When every optimizer of an iteration did so, ``update()`` knows everything the device
would compute, so it computes it here in Python and writes only the scale and trackers to the
device (two or three fills) instead of a dozen small ops: that bookkeeping would otherwise cost
more host time per step than torch's whole ``update()``. The first iteration whose flag stays on
the device (a fused optimizer) hands the truth back to the device state, after writing the
mirrored counters there; ``state_dict()`` and ``stats()``, which read everything anyway, take it
back.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from scaler._scale_update import (
    FLOOR_HITS,
    FP32_MAX,
    LONGEST_OVERFLOW_STREAK,
    OVERFLOW_STREAK,
    SKIPPED_STEPS,
    STEPS,
    STEPS_BELOW_ONE,
    ScaleState,
)

# Half an ulp above the largest fp32: what rounds down to FP32_MAX rather than up to inf.
_FP32_OVERFLOW = FP32_MAX + 2.0**103


def to_fp32(value: float) -> float:
    """Round a Python float to the nearest fp32, as a C++ double-to-float conversion does."""
    if not math.isfinite(value) or abs(value) >= _FP32_OVERFLOW:
        return math.copysign(math.inf, value) if not math.isnan(value) else value
    if abs(value) > FP32_MAX:
        return math.copysign(FP32_MAX, value)
    return struct.unpack("f", struct.pack("f", value))[0]


@dataclass(slots=True)
class HostMirror:
    """The device state's values, as Python numbers; mutable, advanced by ``update()``."""

    #: The scale (an fp32 value).
    scale: float
    #: Consecutive clean steps (torch's ``_growth_tracker``).
    growth_tracker: int
    #: Overflows still tolerated before backing off.
    hysteresis_tracker: int
    #: The monitoring counters, indexed as ``ScaleState.counters``.
    counters: list[int]
    #: The smallest and largest scale after an update.
    scale_min: float
    scale_max: float
    #: ``counters[FLOOR_HITS:]`` at the last report of a below-one event.
    reported: list[int]
    #: Whether the device trackers and counters lag behind (written only when needed).
    device_counters_stale: bool = False
    #: The version counters of the device scale and growth tracker after our last write. Code
    #: outside the scaler writes torch's ``_scale``/``_growth_tracker`` in place (clamping the
    #: scale, copying it between scalers); a changed version shows it without reading the device.
    versions: tuple[int, int] = (-1, -1)

    @classmethod
    def from_host(cls, host: dict) -> HostMirror:
        """From ``ScaleState.to_host()``-shaped values (``reported`` optional)."""
        counters = list(host["counters"])
        reported = host.get("reported")
        return cls(
            scale=float(host["scale"]),
            growth_tracker=int(host["growth_tracker"]),
            hysteresis_tracker=int(host["hysteresis_tracker"]),
            counters=counters,
            scale_min=float(host["scale_range"][0]),
            scale_max=float(host["scale_range"][1]),
            reported=list(reported if reported is not None else counters[FLOOR_HITS:]),
        )

    def event_pending(self) -> bool:
        return self.counters[FLOOR_HITS:] != self.reported

    def mark_reported(self) -> None:
        self.reported = self.counters[FLOOR_HITS:]
        self.device_counters_stale = True

    def advance(
        self,
        found: bool,
        *,
        growth_factor: float,
        backoff_factor: float,
        growth_interval: int,
        hysteresis: int,
        floor: float,
        cap: float,
    ) -> None:
        """The device update (``update_scale_``), step for step, on Python numbers."""
        scale = self.scale
        # hysteresis=1 is torch's kernel, which leaves the hysteresis tracker alone.
        tracks_hysteresis = hysteresis != 1
        if found:
            self.growth_tracker = 0
            budget = self.hysteresis_tracker - 1
            if not tracks_hysteresis or budget <= 0:
                scale = to_fp32(scale * backoff_factor)
            if tracks_hysteresis:
                self.hysteresis_tracker = max(budget, 0)
        else:
            successful = self.growth_tracker + 1
            if successful == growth_interval:
                grown = to_fp32(scale * growth_factor)
                if math.isfinite(grown):
                    scale = grown
                self.growth_tracker = 0
                if tracks_hysteresis:
                    self.hysteresis_tracker = hysteresis
            else:
                self.growth_tracker = successful
        floor_hit = scale < floor
        scale = min(max(scale, floor), cap)
        self.scale = scale
        counters = self.counters
        counters[STEPS] += 1
        counters[SKIPPED_STEPS] += found
        counters[OVERFLOW_STREAK] = counters[OVERFLOW_STREAK] + 1 if found else 0
        counters[LONGEST_OVERFLOW_STREAK] = max(
            counters[LONGEST_OVERFLOW_STREAK], counters[OVERFLOW_STREAK]
        )
        counters[FLOOR_HITS] += floor_hit
        counters[STEPS_BELOW_ONE] += scale < 1.0
        self.scale_min = min(self.scale_min, scale)
        self.scale_max = max(self.scale_max, scale)
        self.device_counters_stale = True

    def set_scale(self, value: float, floor: float, cap: float) -> None:
        """``update(new_scale)`` with a float, as ``ScaleState.set_scale`` does it."""
        value = to_fp32(value)
        self.counters[FLOOR_HITS] += value < floor
        value = min(max(value, floor), cap)
        self.scale = value
        self.scale_min = min(self.scale_min, value)
        self.scale_max = max(self.scale_max, value)
        self.device_counters_stale = True

    def write_scale(self, state: ScaleState, previous_scale: float) -> None:
        """Copy the scale to the device when it changed (a fill: no copy, no sync).

        The trackers and counters are written only by ``flush()``, when the device needs them.
        """
        if self.scale != previous_scale:
            state.scale.fill_(self.scale)
            self.remember_versions(state)

    def remember_versions(self, state: ScaleState) -> None:
        """Record the device tensors' versions as of now, after our own writes."""
        self.versions = (state.scale._version, state.growth_tracker._version)

    def written_elsewhere(self, state: ScaleState) -> tuple[bool, bool]:
        """Whether the scale, and the growth tracker, were written since our last write."""
        scale_version, tracker_version = self.versions
        return (
            state.scale._version != scale_version,
            state.growth_tracker._version != tracker_version,
        )

    def flush(self, state: ScaleState, keep_growth_tracker: bool = False) -> None:
        """Bring the device trackers and counters up to date (before the device reads them).

        ``keep_growth_tracker``: the device's growth tracker was written by someone else and is
        the truth; leave it.
        """
        if self.device_counters_stale:
            if not keep_growth_tracker:
                state.growth_tracker.fill_(self.growth_tracker)
            state.hysteresis_tracker.fill_(self.hysteresis_tracker)
            state.set_counters(self.counters)
            state.set_scale_range(self.scale_min, self.scale_max)
            state.set_reported(self.reported)
            self.device_counters_stale = False
            self.remember_versions(state)
