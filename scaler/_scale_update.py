"""The scale's on-device state and its update: growth/backoff, hysteresis, floor/cap, counters.

Everything here is tensor ops on the scale's device, in place, so ``update()`` never waits for the
device and a CUDA graph that captures it keeps working (the tensors keep their storage).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from scaler._user_warnings import warn_at_caller

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


# ``ScaleState.probe`` holds, side by side, the values whose comparison with ``limits`` gives
# every per-step flag in one op: probe < limits = [below_one, floor_hit, found_inf, True, False].
_PROBE_SCALE, _PROBE_BEFORE_CLAMP, _PROBE_NEG_FOUND_INF = 0, 1, 2
_FLAG_BELOW_ONE, _FLAG_FLOOR_HIT, _FLAG_FOUND_INF, _FLAG_TRUE, _FLAG_FALSE = 0, 1, 2, 3, 4
# For each counter, the flag that increments it (steps: always; the longest streak: never here)...
_INCREMENT_BY = (
    _FLAG_TRUE,
    _FLAG_FOUND_INF,
    _FLAG_FOUND_INF,
    _FLAG_FALSE,
    _FLAG_FLOOR_HIT,
    _FLAG_BELOW_ONE,
)
# ... and the flag it is then multiplied by (the streak is reset by a clean step).
_KEEP_IF = (_FLAG_TRUE, _FLAG_TRUE, _FLAG_FOUND_INF, _FLAG_TRUE, _FLAG_TRUE, _FLAG_TRUE)
# ``update(new_scale)`` only counts a floor hit.
_INCREMENT_BY_FLOOR_ONLY = tuple(
    _FLAG_FLOOR_HIT if i == FLOOR_HITS else _FLAG_FALSE for i in range(N_COUNTERS)
)


def constant_on_device(values, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A small constant vector made on the device by fills: a host-to-device copy of pageable
    memory would synchronise, and the state is created lazily inside the training loop."""
    vector = torch.empty(len(values), dtype=dtype, device=device)
    for i, value in enumerate(values):
        vector[i].fill_(value)
    return vector


class ScaleState:
    """The device tensors behind one scaler: scale, trackers, monitoring counters.

    The update runs about a dozen small in-place ops and never reads a value on the host; the
    layout below (a probe vector compared with a limits vector, index vectors that route flags
    to counters) exists to keep that number low, since each op costs host time even on CPU.
    """

    __slots__ = (
        "_before_clamp",
        "_increment_by",
        "_increment_by_floor_only",
        "_keep_if",
        "_limits",
        "_longest",
        "_neg_found_inf",
        "_probe",
        "_signs",
        "_streak",
        "counters",
        "growth_tracker",
        "hysteresis_tracker",
        "one",
        "reported",
        "scale",
        "scale_range",
        "update_graph",
    )

    def __init__(
        self,
        device: torch.device,
        scale: float,
        growth_tracker: int,
        hysteresis_tracker: int,
        floor: float = SAFETY_FLOOR,
    ) -> None:
        self._probe = constant_on_device([scale, scale, 0.0, -1.0, 1.0], torch.float32, device)
        self._limits = constant_on_device([1.0, floor, 0.0, 0.0, 0.0], torch.float32, device)
        #: The loss scale, fp32, 0-dim (a view into the probe): torch's layout, so fused
        #: optimizers can use it directly; updated in place only.
        self.scale = self._probe[_PROBE_SCALE]
        self._before_clamp = self._probe[_PROBE_BEFORE_CLAMP]
        self._neg_found_inf = self._probe[_PROBE_NEG_FOUND_INF]
        #: A constant 1.0 (the probe's last slot), read only: the fused path's dummy inv_scale.
        self.one = self._probe[4]
        #: Consecutive clean steps since the last growth or overflow (torch's ``_growth_tracker``).
        self.growth_tracker = torch.full((), growth_tracker, dtype=torch.int32, device=device)
        #: Overflows still tolerated before backing off; refilled when the scale grows.
        self.hysteresis_tracker = torch.full(
            (), hysteresis_tracker, dtype=torch.int32, device=device
        )
        #: Monitoring counters, indexed by the module constants above.
        self.counters = torch.zeros(N_COUNTERS, dtype=torch.int64, device=device)
        self._streak = self.counters[OVERFLOW_STREAK]
        self._longest = self.counters[LONGEST_OVERFLOW_STREAK]
        #: ``[min, -max]`` of the scale after each update, negated so one ``minimum`` updates both.
        self.scale_range = constant_on_device([scale, -scale], torch.float32, device)
        self._signs = constant_on_device([1.0, -1.0], torch.float32, device)
        #: ``counters[FLOOR_HITS:]`` when the host last reported an event; a difference is a new
        #: event (a floor hit, or an update that ended below 1) found without extra bookkeeping.
        self.reported = torch.zeros(2, dtype=torch.int64, device=device)
        self._increment_by = constant_on_device(_INCREMENT_BY, torch.int64, device)
        self._keep_if = constant_on_device(_KEEP_IF, torch.int64, device)
        self._increment_by_floor_only = constant_on_device(
            _INCREMENT_BY_FLOOR_ONLY, torch.int64, device
        )
        #: On CUDA, the update captured as a graph (see ``UpdateGraph``); None until the first
        #: update there, False where capturing failed and the eager ops are used instead.
        self.update_graph: UpdateGraph | bool | None = None

    def event_pending(self) -> torch.Tensor:
        """0-dim bool: an update ended below 1 or at the floor since the last report."""
        return (self.counters[FLOOR_HITS:] != self.reported).any()

    def mark_reported(self) -> None:
        self.reported.copy_(self.counters[FLOOR_HITS:])

    def set_reported(self, values: list[int]) -> None:
        for slot, value in zip(self.reported, values, strict=True):
            slot.fill_(value)

    def set_counters(self, values: list[int]) -> None:
        for counter, value in zip(self.counters, values, strict=True):
            counter.fill_(value)

    def set_scale_range(self, low: float, high: float) -> None:
        self.scale_range[0].fill_(low)
        self.scale_range[1].fill_(-high)

    def to_host(self, extra: torch.Tensor | None = None) -> dict[str, Any]:
        """Everything as Python values, in one device-to-host copy (fp64 holds the int64
        counters exactly up to 2**53). ``extra``, a tensor on the same device, travels in the
        same copy and comes back as a list under "extra"."""
        parts = [
            self.scale.double().reshape(1),
            self.growth_tracker.double().reshape(1),
            self.hysteresis_tracker.double().reshape(1),
            self.counters.double(),
            self.scale_range.double(),
            self.reported.double(),
        ]
        if extra is not None:
            parts.append(extra.double().reshape(-1))
        packed = torch.cat(parts).tolist()
        extra_values = packed[7 + N_COUNTERS :]
        del packed[7 + N_COUNTERS :]
        counters = [int(v) for v in packed[3 : 3 + N_COUNTERS]]
        low, negative_high = packed[3 + N_COUNTERS : 5 + N_COUNTERS]
        return {
            "scale": packed[0],
            "growth_tracker": int(packed[1]),
            "hysteresis_tracker": int(packed[2]),
            "counters": counters,
            "scale_range": [low, -negative_high],
            "reported": [int(v) for v in packed[5 + N_COUNTERS :]],
            "extra": extra_values,
        }

    def clamp_and_record(self, found_inf: torch.Tensor, floor: float, cap: float) -> None:
        """After the growth/backoff rule: floor and cap, then every counter, in place.

        ``floor`` must be the one the state was created with (it is also in ``_limits``).
        """
        scale = self.scale
        self._before_clamp.copy_(scale)
        scale.clamp_(min=floor, max=cap)
        torch.neg(found_inf, out=self._neg_found_inf)
        flags = self._probe < self._limits
        counters = self.counters
        counters.add_(torch.index_select(flags, 0, self._increment_by))
        counters.mul_(torch.index_select(flags, 0, self._keep_if))
        torch.maximum(self._longest, self._streak, out=self._longest)
        torch.minimum(self.scale_range, scale * self._signs, out=self.scale_range)

    def set_scale(self, new_scale: torch.Tensor | float, floor: float, cap: float) -> None:
        """``update(new_scale)``: copy the user's value in, finite and within the floor and cap.

        A tensor's value cannot be checked without a sync, so a NaN becomes the floor and an
        infinity the cap on the device instead of poisoning every later step.
        """
        scale = self.scale
        if isinstance(new_scale, torch.Tensor):
            scale.copy_(new_scale.reshape(()))
            scale.nan_to_num_(nan=floor, posinf=cap, neginf=floor)
        else:
            scale.fill_(new_scale)
        self._before_clamp.copy_(scale)
        scale.clamp_(min=floor, max=cap)
        flags = self._probe < self._limits
        self.counters.add_(torch.index_select(flags, 0, self._increment_by_floor_only))
        torch.minimum(self.scale_range, scale * self._signs, out=self.scale_range)


def combine_found_inf(found_infs: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """Sum the per-optimizer, per-device flags onto the scale's device, as torch does."""
    if len(found_infs) == 1 and found_infs[0].device == device:
        return found_infs[0]
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
    found = found_inf != 0
    budget = state.hysteresis_tracker - found.int()
    back_off = found & (budget <= 0)
    # torch's kernel does the arithmetic (fp32 rounding and the finite-growth check included).
    # An absorbed overflow must not count as a clean step there: its tracker starts at -2, so
    # the kernel's +1 gives -1 (never the interval, so no growth), clamped back to 0 below.
    tracker = state.growth_tracker
    tracker.masked_fill_(found ^ back_off, -2)
    torch._amp_update_scale_(
        state.scale, tracker, back_off.float(), growth_factor, backoff_factor, growth_interval
    )
    tracker.clamp_(min=0)
    grew = (tracker == 0) > found  # a clean step that reset the tracker: the scale grew
    budget.masked_fill_(grew, hysteresis)
    torch.clamp(budget, min=0, out=state.hysteresis_tracker)


#: Replay the CUDA update as a graph; tests turn it off to compare with the eager ops.
USE_CUDA_GRAPH = True


@dataclass(frozen=True, slots=True)
class UpdateGraph:
    """The whole device update, captured once as a CUDA graph and replayed every step.

    The update is about a dozen tiny kernels, and on CUDA each launch costs the host several
    microseconds, which made ours add more host time per step than torch's single-kernel update
    with fused optimizers. Every tensor the update touches is persistent and updated in place, so
    one capture replays correctly for the life of the state; only the found-inf flag is an input,
    copied into ``found_inf`` first. The factors are baked into the graph, so it is captured again
    when one of them (``key``) changes.
    """

    #: (growth_factor, backoff_factor, growth_interval, hysteresis, floor, cap) at capture.
    key: tuple[float, float, int, int, float, float]
    #: The graph's input: the combined found-inf flag of the step.
    found_inf: torch.Tensor
    #: The captured update.
    graph: Any


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
    """One ``update()``: new scale, trackers, floor/cap and counters, all in place."""
    key = (growth_factor, backoff_factor, growth_interval, hysteresis, floor, cap)
    graph = _update_graph_for(state, key)
    if graph is not None:
        graph.found_inf.copy_(found_inf.reshape(()))
        graph.graph.replay()
        return
    _update_eagerly(state, found_inf, key)


def _update_eagerly(
    state: ScaleState, found_inf: torch.Tensor, key: tuple[float, float, int, int, float, float]
) -> None:
    growth_factor, backoff_factor, growth_interval, hysteresis, floor, cap = key
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
    state.clamp_and_record(found_inf, floor, cap)


def _update_graph_for(
    state: ScaleState, key: tuple[float, float, int, int, float, float]
) -> UpdateGraph | None:
    """The state's captured update for these factors, capturing it if needed; None means eager.

    Eager on other devices, while the caller is itself capturing a CUDA graph (our kernels then
    become part of theirs), and where a capture failed once.
    """
    if (
        not USE_CUDA_GRAPH
        or state.scale.device.type != "cuda"
        or state.update_graph is False
        or torch.cuda.is_current_stream_capturing()
    ):
        return None
    cached = state.update_graph
    if isinstance(cached, UpdateGraph) and cached.key == key:
        return cached
    device = state.scale.device
    found_inf = torch.zeros((), dtype=torch.float32, device=device)
    graph = torch.cuda.CUDAGraph()
    try:
        # Capture on a side stream (the default stream cannot capture); capturing records the
        # kernels without running them, so no ordering with the current stream is needed.
        # No torch.cuda.graph(): it synchronises the device before capturing.
        with torch.cuda.device(device), torch.cuda.stream(torch.cuda.Stream(device)):
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                _update_eagerly(state, found_inf, key)
            finally:
                graph.capture_end()
    except RuntimeError as error:
        give_up_capturing(state, error)
        return None
    state.update_graph = UpdateGraph(key, found_inf, graph)
    return state.update_graph


def give_up_capturing(state: ScaleState, error: RuntimeError) -> None:
    """Use the eager update from now on, and say so once: it costs host time every step."""
    state.update_graph = False
    warn_at_caller(
        f"GradScaler could not capture its update as a CUDA graph ({error}); every update() "
        "now launches its dozen small kernels one by one (correct, but slower on the host)",
        RuntimeWarning,
    )
