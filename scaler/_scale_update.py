"""The scale's on-device state and its update: growth/backoff, hysteresis, floor/cap, counters.

Everything here is tensor ops on the scale's device, in place, so ``update()`` never waits for the
device and a CUDA graph that captures it keeps working (the tensors keep their storage).
"""

from __future__ import annotations

import torch

#: The smallest normal fp32 value, 2**-126. Its fp32 reciprocal (2**126) is finite, so unscaling
#: by ``1/scale`` can never turn a finite gradient into inf just because the scale is tiny.
#: torch's scale, halved 144 times from 2**16, reaches the subnormal 2**-128, whose reciprocal
#: overflows fp32 to inf; a clean step then writes inf/NaN into the parameters.
SAFETY_FLOOR = torch.finfo(torch.float32).tiny
#: The largest finite fp32 value: a cap that keeps a manually set infinite scale finite.
FP32_MAX = torch.finfo(torch.float32).max

# Positions in ``ScaleState.counters`` (int64). One vector so that ``update()`` touches it with a
# handful of ops and ``stats()`` reads it with one transfer.
STEPS = 0
SKIPPED_STEPS = 1
OVERFLOW_STREAK = 2
LONGEST_OVERFLOW_STREAK = 3
FLOOR_HITS = 4
STEPS_BELOW_ONE = 5
N_COUNTERS = 6
COUNTER_NAMES: tuple[str, ...] = (
    "steps",
    "skipped_steps",
    "overflow_streak",
    "longest_overflow_streak",
    "floor_hits",
    "steps_below_one",
)


class ScaleState:
    """The device tensors behind one scaler: scale, trackers, monitoring counters."""

    __slots__ = (
        "_vectors",
        "counters",
        "growth_tracker",
        "hysteresis_tracker",
        "reported",
        "scale",
        "scale_range",
    )

    def __init__(
        self,
        device: torch.device,
        scale: float,
        growth_tracker: int,
        hysteresis_tracker: int,
    ) -> None:
        #: The loss scale, fp32, 0-dim: torch's layout, so fused optimizers can use it directly.
        self.scale = torch.full((), scale, dtype=torch.float32, device=device)
        #: Consecutive clean steps since the last growth or overflow (torch's ``_growth_tracker``).
        self.growth_tracker = torch.full((), growth_tracker, dtype=torch.int32, device=device)
        #: Overflows still tolerated before backing off; refilled when the scale grows.
        self.hysteresis_tracker = torch.full(
            (), hysteresis_tracker, dtype=torch.int32, device=device
        )
        #: Monitoring counters, indexed by the module constants above.
        self.counters = torch.zeros(N_COUNTERS, dtype=torch.int64, device=device)
        #: ``[min, -max]`` of the scale after each update, negated so one ``minimum`` updates both.
        self.scale_range = torch.tensor([scale, -scale], dtype=torch.float32, device=device)
        #: ``counters[FLOOR_HITS:]`` when the host last reported an event; a difference is a new
        #: event (a floor hit, or an update that ended below 1) found without extra bookkeeping.
        self.reported = torch.zeros(2, dtype=torch.int64, device=device)
        self._vectors = _UpdateVectors(device)

    def event_pending(self) -> torch.Tensor:
        """0-dim bool: an update ended below 1 or at the floor since the last report."""
        return (self.counters[FLOOR_HITS:] != self.reported).any()

    def mark_reported(self) -> None:
        self.reported.copy_(self.counters[FLOOR_HITS:])

    def set_scale_range(self, low: float, high: float) -> None:
        self.scale_range.copy_(torch.tensor([low, -high], dtype=torch.float32))

    def scale_range_host(self) -> list[float]:
        low, negative_high = self.scale_range.tolist()
        return [low, -negative_high]

    def to_host(self) -> dict[str, object]:
        """Everything as Python values (used by state_dict/stats; one transfer per tensor)."""
        return {
            "scale": self.scale.item(),
            "growth_tracker": int(self.growth_tracker.item()),
            "hysteresis_tracker": int(self.hysteresis_tracker.item()),
            "counters": [int(v) for v in self.counters.tolist()],
            "scale_range": self.scale_range_host(),
        }


class _UpdateVectors:
    """Constant vectors that let ``record_update`` advance all counters with a few ops."""

    __slots__ = ("below", "floor", "found", "keep_streak", "reset_streak", "signs", "step")

    def __init__(self, device: torch.device) -> None:
        def unit(*positions: int) -> torch.Tensor:
            vector = torch.zeros(N_COUNTERS, dtype=torch.int64)
            vector[list(positions)] = 1
            return vector.to(device)

        self.step = unit(STEPS)
        self.found = unit(SKIPPED_STEPS, OVERFLOW_STREAK)
        self.floor = unit(FLOOR_HITS)
        self.below = unit(STEPS_BELOW_ONE)
        self.keep_streak = torch.ones(N_COUNTERS, dtype=torch.int64, device=device)
        self.reset_streak = 1 - unit(OVERFLOW_STREAK)
        self.signs = torch.tensor([1.0, -1.0], dtype=torch.float32, device=device)


def combine_found_inf(found_infs: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """Sum the per-optimizer, per-device flags onto the scale's device, as torch does."""
    combined = found_infs[0].to(device=device, non_blocking=True)
    for found_inf in found_infs[1:]:
        combined = combined + found_inf.to(device=device, non_blocking=True)
    return combined


def _update_with_hysteresis(
    state: ScaleState,
    found_inf: torch.Tensor,
    growth_factor: float,
    backoff_factor: float,
    growth_interval: int,
    hysteresis: int,
) -> None:
    """Growth/backoff where ``hysteresis`` overflows are needed before the scale backs off.

    Semantics (Megatron-LM's ``DynamicGradScaler``, and DeepSpeed's default
    ``consecutive_hysteresis=False``): every overflow spends one unit of the hysteresis budget and
    resets the growth count; the scale backs off once the budget is spent, and on every further
    overflow, until ``growth_interval`` clean steps grow the scale and refill the budget. We chose
    it over refilling on every clean step (DeepSpeed's ``consecutive_hysteresis=True``) because
    with that rule an overflow on every other step never backs off and half the steps are skipped
    forever. ``hysteresis=1`` is exactly torch's rule.
    """
    scale = state.scale
    found = found_inf != 0
    budget = torch.where(found, state.hysteresis_tracker - 1, state.hysteresis_tracker)
    back_off = found & (budget <= 0)
    successful = torch.where(found, 0, state.growth_tracker + 1)
    grow = successful == growth_interval
    grown = scale * growth_factor
    new_scale = torch.where(
        back_off,
        scale * backoff_factor,
        torch.where(grow & torch.isfinite(grown), grown, scale),
    )
    state.growth_tracker.copy_(torch.where(grow, 0, successful))
    state.hysteresis_tracker.copy_(torch.where(grow, hysteresis, budget.clamp(min=0)))
    scale.copy_(new_scale)


def update_scale_(
    state: ScaleState,
    found_inf: torch.Tensor,
    *,
    growth_factor: float,
    backoff_factor: float,
    growth_interval: int,
    hysteresis: int,
    floor: float,
    cap: float,
) -> None:
    """One ``update()``: new scale, trackers, floor/cap, counters and events, all in place."""
    if hysteresis == 1:
        # torch's own kernel: the default trajectory is torch's, bit for bit, above the floor.
        torch._amp_update_scale_(
            state.scale,
            state.growth_tracker,
            found_inf,
            growth_factor,
            backoff_factor,
            growth_interval,
        )
    else:
        _update_with_hysteresis(
            state, found_inf, growth_factor, backoff_factor, growth_interval, hysteresis
        )
    scale = state.scale
    floor_hit = scale < floor
    scale.clamp_(min=floor, max=cap)
    record_update(state, found_inf != 0, floor_hit, scale < 1.0)


def record_update(
    state: ScaleState, found: torch.Tensor, floor_hit: torch.Tensor, below_one: torch.Tensor
) -> None:
    """Advance the monitoring counters after the scale has been updated (about a dozen ops)."""
    counters, vectors = state.counters, state._vectors
    counters.add_(vectors.step)
    counters.addcmul_(vectors.found, found)
    counters.addcmul_(vectors.floor, floor_hit)
    counters.addcmul_(vectors.below, below_one)
    counters.mul_(torch.where(found, vectors.keep_streak, vectors.reset_streak))
    longest = counters[LONGEST_OVERFLOW_STREAK]
    torch.maximum(longest, counters[OVERFLOW_STREAK], out=longest)
    torch.minimum(state.scale_range, state.scale * vectors.signs, out=state.scale_range)


def set_scale_(
    state: ScaleState, new_scale: torch.Tensor | float, floor: float, cap: float
) -> None:
    """``update(new_scale)``: copy the user's value in, kept finite and within the floor and cap.

    A tensor's value cannot be checked without a sync, so a NaN becomes the floor and an infinity
    the cap on the device instead of poisoning every later step.
    """
    scale = state.scale
    if isinstance(new_scale, torch.Tensor):
        scale.copy_(new_scale.reshape(()))
        scale.nan_to_num_(nan=floor, posinf=cap, neginf=floor)
    else:
        scale.fill_(new_scale)
    floor_hit = scale < floor
    scale.clamp_(min=floor, max=cap)
    state.counters.addcmul_(state._vectors.floor, floor_hit)
    torch.minimum(state.scale_range, scale * state._vectors.signs, out=state.scale_range)
