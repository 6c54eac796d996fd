"""``GradScaler``: torch's dynamic loss scaler, drop-in, without its collapse and surprise syncs."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import math
import warnings
import weakref
from collections import abc, defaultdict
from collections.abc import Iterator
from typing import Any, overload

import torch
import torch.distributed as dist
from torch.amp.grad_scaler import OptState

from scaler import _scale_update
from scaler._compile_boundary import eager_under_compile
from scaler._errors import ScalerArgumentError, ScalerUsageError
from scaler._fused_support import fused_step_is_safe
from scaler._grad_groups import GradGroups
from scaler._host_mirror import HostMirror, to_fp32
from scaler._overflow_report import OverflowReport
from scaler._overflow_tracking import OverflowTracker, named_tensors
from scaler._peek import CudaScalePeek
from scaler._per_optimizer import PerOptimizer
from scaler._policy import BELOW_ONE_POLICIES, BelowOnePolicy, report_below_one
from scaler._reciprocal import inverse_scale
from scaler._scale_update import (
    FLOOR_HITS,
    FP32_MAX,
    LONGEST_OVERFLOW_STREAK,
    OVERFLOW_STREAK,
    SAFETY_FLOOR,
    SKIPPED_STEPS,
    STEPS,
    STEPS_BELOW_ONE,
    ScaleState,
)
from scaler._stats import ScalerStats
from scaler._user_warnings import warn_at_caller
from scaler._validation import (
    HYSTERESIS_KEY,
    INT32_MAX,
    STATS_KEY,
    check_backoff_factor,
    check_bounds,
    check_count,
    check_growth_factor,
    check_growth_interval,
    check_optimizer,
    check_report_top,
    check_scale,
    fresh_stats,
    is_int,
    validate_state_dict,
)

__all__ = ["GradScaler", "OptState"]

_NO_SCALE_FIX = (
    "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the "
    "iteration."
)


def _fresh_optimizer_state() -> dict[str, Any]:
    # Module level (not a lambda) so that the defaultdict pickles, as torch's does.
    return {"stage": OptState.READY, "found_inf_per_device": {}}


#: ``optimizer.step`` functions → whether they take ``grad_scaler`` (inspect is slow per step).
_TAKES_GRAD_SCALER: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _step_takes_grad_scaler(optimizer: torch.optim.Optimizer) -> bool:
    step = optimizer.step
    key = getattr(step, "__func__", None)
    if key is None:  # a plain function set on the instance: ask each time
        return "grad_scaler" in inspect.signature(step).parameters
    takes = _TAKES_GRAD_SCALER.get(key)
    if takes is None:
        takes = _TAKES_GRAD_SCALER[key] = "grad_scaler" in inspect.signature(step).parameters
    return takes


def _cuda_definitely_unavailable() -> bool:
    return not torch.cuda.is_available() and importlib.util.find_spec("torch_xla") is None


class GradScaler(torch.amp.GradScaler):
    """Dynamic loss scaling for fp16 mixed precision; a drop-in for ``torch.amp.GradScaler``.

    Same constructor, methods, per-optimizer state machine, errors, state-dict keys and, in the
    default configuration, the same scale trajectory and parameters as torch. It subclasses
    torch's class, overriding every method, so that ``isinstance(scaler, torch.amp.GradScaler)``
    checks in user and framework code (checkpoint loaders, precision plugins) still pass. It
    differs where torch is unsafe or slow:

    * **The scale can fall below 1 — and in torch, to 0.** Every overflow halves the scale. When a
      model overflows fp16 at *any* scale (typically one pretrained in bf16, whose activations
      exceed fp16's 65504), every step overflows, every step is skipped, and the scale halves
      forever: below 1 after 17 steps from 2**16, the subnormal 2**-128 after 144, where
      ``1/scale`` overflows fp32 to inf so the next clean step writes inf/NaN into the
      parameters, and exactly 0 after ~166, for good. torch does not tell you, because looking
      costs a sync. Ours never goes below a safety floor (2**-126, or ``min_scale``) whose
      reciprocal is finite, so parameters stay finite; it counts floor hits and steps below 1 on
      the device, and ``below_one="warn"``/``"raise"`` reports the event at the next point the
      host sees the scale anyway (``peek_scale()``, ``get_scale()``, ``stats()``,
      ``check()``; ``state_dict()`` warns but never raises, so a collapsing run can still be
      saved). To watch without a sync: log ``peek_scale()`` every step
      (it never waits), read ``stats()`` (``steps_below_one``, ``floor_hits``) at your log
      interval, and use ``step_skipped(optimizer)``, a device flag, instead of comparing
      ``get_scale()`` before and after ``update()``. A scale below 1 means fp16 is the wrong
      format for this model: train in bf16 or fp32 (``check_fp16_compat`` shows where).
    * **No surprise syncs.** ``scale``, ``unscale_``, ``update`` and all bookkeeping never wait
      for the device; fused Adam/AdamW step with no sync. ``get_scale()`` syncs (as in torch).
    * **Fused SGD with momentum is safe**: torch's fused SGD keeps uninitialised momentum
      buffers when its first step is skipped; until they exist ours reads the found-inf flag
      first (one sync) and calls the fused step only for finite gradients.
    * **Faster**: gradients are regrouped by device and dtype only when their layout changes.
    * **torch.compile**: inside a compiled step every public method runs eagerly, as torch's
      own scaler does (dynamo skips it), so the step has torch's graph count and eager results.

    Example::

        scaler = GradScaler("cuda", below_one="warn")
        for inputs, target in data:
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(inputs), target)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    Args (positional ones as torch's):
        device: device type of the scaled tensors ("cuda", "cpu", ...). "cuda" without CUDA
            warns and disables the scaler, as torch does.
        init_scale: initial scale.
        growth_factor: multiplier after ``growth_interval`` clean steps (> 1).
        backoff_factor: multiplier after an overflow (in (0, 1)).
        growth_interval: clean steps needed before growing.
        enabled: ``False`` makes every method a pass-through.
        min_scale: keyword-only floor (default: the 2**-126 safety floor only).
        max_scale: keyword-only cap (default: none).
        hysteresis: keyword-only; overflows needed before backing off (1 = torch). Megatron-LM's
            semantics (also DeepSpeed's default): each overflow spends one unit and resets the
            growth count; once spent, every overflow backs off until ``growth_interval`` clean
            steps grow the scale and refill the budget. Not DeepSpeed's
            ``consecutive_hysteresis=True`` (refill on every clean step), under which an overflow
            on every other step would never back off and half the steps would be skipped forever.
        process_group: keyword-only; a ``torch.distributed`` group across which the found-inf
            flag is all-reduced (MAX) on every path, fused optimizers included, so that all
            ranks skip together and keep identical scales. The reduce is asynchronous and is
            waited on by the stream (NCCL) where the flag is used; it adds no host sync.
        below_one: keyword-only; "ignore" (torch's behaviour), "warn"
            (:class:`ScaleBelowOneWarning`) or "raise" (:class:`ScaleBelowOneError`), deferred to
            the next point where the host reads the scale. ``state_dict()`` (checkpointing,
            pickling) never raises: with "raise" the event waits for the next ``peek_scale()``,
            ``get_scale()``, ``stats()`` or ``check()``.
        track_overflows: keyword-only; keep, per gradient tensor and on the device, the steps
            in which it was non-finite (how many, the first, the last) and its largest finite
            magnitude, for :meth:`overflow_report` — which layer overflowed, during the run.
            Costs one more foreach reduction per step and no host read; ``watch(model)`` names
            the tensors. Not saved in ``state_dict()``.
    """

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
        *,
        min_scale: float | None = None,
        max_scale: float | None = None,
        hysteresis: int = 1,
        below_one: BelowOnePolicy = "ignore",
        process_group: Any = None,
        track_overflows: bool = False,
    ) -> None:
        if isinstance(device, torch.device):
            device = device.type
        if not isinstance(device, str):
            raise ScalerArgumentError(f"device must be a device type string, got {device!r}")
        # torch takes any truthy value; 0 and 1 are common (argparse ``type=int`` flags).
        if not isinstance(enabled, bool) and not (is_int(enabled) and enabled in (0, 1)):
            raise ScalerArgumentError(f"enabled must be a bool, got {enabled!r}")
        self._device = device
        self._enabled = bool(enabled)
        # Every argument is checked before the scaler may disable itself below, so that a bad
        # configuration fails on a CPU-only CI machine as it would on the GPU.
        self._min_scale, self._max_scale = check_bounds(min_scale, max_scale)
        hysteresis = check_count(hysteresis, "hysteresis", 1, INT32_MAX)
        growth_factor = check_growth_factor(growth_factor)
        backoff_factor = check_backoff_factor(backoff_factor)
        growth_interval = check_growth_interval(growth_interval)
        init_scale = check_scale("init_scale", init_scale, self._floor, self._cap)
        if below_one not in BELOW_ONE_POLICIES:
            raise ScalerArgumentError(
                f"below_one must be one of {', '.join(map(repr, BELOW_ONE_POLICIES))}, "
                f"got {below_one!r}"
            )
        self._hysteresis = hysteresis
        self._below_one = below_one
        if not isinstance(track_overflows, bool):
            raise ScalerArgumentError(f"track_overflows must be a bool, got {track_overflows!r}")
        self._track_overflows = track_overflows
        #: Per-tensor overflow verdicts (``track_overflows=True``); None when off. Set even
        #: when disabled, so that ``watch()`` and ``overflow_report()`` work everywhere.
        self._overflows: OverflowTracker | None = OverflowTracker() if track_overflows else None
        if process_group is not None and not (dist.is_available() and dist.is_initialized()):
            raise ScalerArgumentError(
                "process_group was given but torch.distributed is not initialized; call "
                "torch.distributed.init_process_group() first"
            )
        self._process_group = process_group
        if device == "cuda" and enabled and _cuda_definitely_unavailable():
            warnings.warn(
                "GradScaler is enabled, but CUDA is not available.  Disabling.", stacklevel=2
            )
            self._enabled = False
        if not self._enabled:
            return
        self._init_scale = init_scale
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._init_hysteresis_tracker = self._hysteresis
        #: Host copy of counters to restore when the device state is created (after a load or
        #: unpickling); None means fresh.
        self._init_stats: dict[str, list] | None = None
        self._state: ScaleState | None = None
        #: Asynchronous scale copies for ``peek_scale()`` on CUDA; started by its first call.
        self._peek: CudaScalePeek | None = None
        #: The device state's values on the host while every flag reaches the host (see
        #: ``_host_mirror``); None when the device tensors are the only truth.
        self._mirror: HostMirror | None = None
        self._inv_scale_cache: tuple[float, torch.Tensor] | None = None
        #: The flag ``unscale_``/``_check_inf_per_device`` just made for ``_unscale_grads_``,
        #: which may write it directly; any other caller's flag is copied first, as in torch.
        self._own_found_inf: torch.Tensor | None = None
        self._per_optimizer_states: dict[int, dict[str, Any]] = defaultdict(_fresh_optimizer_state)
        self._grad_groups: PerOptimizer[GradGroups] = PerOptimizer()
        #: Each optimizer's found-inf flag of its latest step (for ``step_skipped``).
        self._last_found_inf: PerOptimizer[torch.Tensor] = PerOptimizer()
        #: That flag and its value, for the steps that read it on the host anyway.
        self._last_found_on_host: PerOptimizer[tuple[torch.Tensor, bool]] = PerOptimizer()
        #: Inside ``restoring()``: ``update()`` keeps the state as it is.
        self._restoring = False

    # ----------------------------------------------------------------- configuration

    @property
    def _floor(self) -> float:
        return self._min_scale if self._min_scale is not None else SAFETY_FLOOR

    @property
    def _cap(self) -> float:
        return self._max_scale if self._max_scale is not None else FP32_MAX

    @property
    def _scale(self) -> torch.Tensor | None:
        """The scale tensor, or None before the first ``scale()`` (torch's attribute).

        Third-party code reads it and writes it in place, as in torch, and assigns it (MMEngine
        copies one scaler's scale into another's): assignment copies the value into our tensor,
        where torch's would alias the assigned tensor.
        """
        return None if self._state is None else self._state.scale

    @_scale.setter
    def _scale(self, value: torch.Tensor | float) -> None:
        # Copied into our tensor (fused optimizers and a captured update hold it), not adopted.
        state = self._state
        if state is None and not isinstance(value, torch.Tensor):
            self._init_scale = check_scale("_scale", value, self._floor, self._cap)
            return
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ScalerArgumentError(
                    f"_scale must be a 1-element tensor or a float, got shape {tuple(value.shape)}"
                )
            value = value.detach()
            state = state or self._lazy_init(value.device)
        else:
            value = check_scale("_scale", value, 0.0, math.inf)
        self._hand_over_to_device(state)
        state.set_scale(value, self._floor, self._cap)

    @property
    def _growth_tracker(self) -> torch.Tensor | None:
        """torch's attribute: consecutive clean steps, an int32 tensor (None before ``scale()``)."""
        if self._state is None:
            return None
        mirror = self._live_mirror()
        if mirror is not None:
            mirror.flush(self._state)  # the host path writes it lazily
        return self._state.growth_tracker

    @_growth_tracker.setter
    def _growth_tracker(self, value: torch.Tensor | int) -> None:
        state = self._state
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ScalerArgumentError(
                    f"_growth_tracker must be a 1-element tensor or an int, got shape "
                    f"{tuple(value.shape)}"
                )
        elif not is_int(value) or value < 0:
            raise ScalerArgumentError(f"_growth_tracker must be an int >= 0, got {value!r}")
        if state is None:
            if isinstance(value, torch.Tensor):
                state = self._lazy_init(value.device)
            else:
                self._init_growth_tracker = int(value)
                return
        self._hand_over_to_device(state)
        if isinstance(value, torch.Tensor):
            state.growth_tracker.copy_(value.detach().reshape(()))
        else:
            state.growth_tracker.fill_(int(value))

    def _live_mirror(self) -> HostMirror | None:
        """The host mirror if it still holds the truth; dropped when code outside the scaler
        wrote the scale or growth tracker in place (seen from version counters, no sync)."""
        mirror = self._mirror
        if mirror is None:
            return None
        assert self._state is not None
        scale_written, tracker_written = mirror.written_elsewhere(self._state)
        if scale_written or tracker_written:
            mirror.flush(self._state, keep_growth_tracker=tracker_written)
            self._mirror = None
            return None
        return mirror

    def get_growth_factor(self) -> float:
        """The multiplier applied after ``growth_interval`` clean steps."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Set the growth multiplier (> 1)."""
        self._growth_factor = check_growth_factor(new_factor, name="new_factor")

    def get_backoff_factor(self) -> float:
        """The multiplier applied after an overflow."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Set the backoff multiplier (in (0, 1))."""
        self._backoff_factor = check_backoff_factor(new_factor, name="new_factor")

    def get_growth_interval(self) -> int:
        """The number of consecutive clean steps before the scale grows."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Set the growth interval (an int >= 1)."""
        self._growth_interval = check_growth_interval(new_interval, name="new_interval")

    def is_enabled(self) -> bool:
        """Whether scaling is on (False also after "cuda" was requested without CUDA)."""
        return self._enabled

    # ----------------------------------------------------------------- the training step

    def _lazy_init(self, device: torch.device) -> ScaleState:
        state = ScaleState(
            device,
            self._init_scale,
            self._init_growth_tracker,
            self._init_hysteresis_tracker,
            floor=self._floor,
        )
        stats = self._init_stats or fresh_stats(self._init_scale)
        if self._init_stats is not None:
            state.set_counters(stats["counters"])
            state.set_scale_range(*stats["scale_range"])
            state.mark_reported()
            self._init_stats = None
        self._mirror = HostMirror.from_host(
            {
                "scale": self._init_scale,
                "growth_tracker": self._init_growth_tracker,
                "hysteresis_tracker": self._init_hysteresis_tracker,
                **stats,
            }
        )
        self._mirror.remember_versions(state)
        self._state = state
        return state

    def _lazy_init_scale_growth_tracker(self, dev: torch.device) -> None:
        """torch's private initialiser, for subclasses written against torch."""
        if self._state is not None:
            raise ScalerUsageError("_growth_tracker initialized before _scale")
        self._lazy_init(dev)

    def _check_scale_growth_tracker(self, funcname: str) -> tuple[torch.Tensor, torch.Tensor]:
        """torch's private check, for subclasses written against torch (ShardedGradScaler's
        pattern): the scale and growth tracker tensors, or torch's error before ``scale()``."""
        self._require_state(funcname)
        scale, growth_tracker = self._scale, self._growth_tracker
        assert scale is not None
        assert growth_tracker is not None
        return scale, growth_tracker

    def _require_state(self, funcname: str) -> ScaleState:
        if self._state is None:
            raise ScalerUsageError(f"Attempted {funcname} but _scale is None.  " + _NO_SCALE_FIX)
        return self._state

    @overload
    def scale(self, outputs: torch.Tensor) -> torch.Tensor: ...

    @overload
    def scale(self, outputs: list[torch.Tensor]) -> list[torch.Tensor]: ...

    @overload
    def scale(self, outputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]: ...

    @overload
    def scale(self, outputs: abc.Iterable[torch.Tensor]) -> abc.Iterable[torch.Tensor]: ...

    @eager_under_compile
    def scale(self, outputs):
        """Multiply a tensor, or nested lists/tuples/iterables of tensors, by the scale.

        The scale is created lazily, in fp32, on the device of the first tensor scaled.
        """
        if not self._enabled:
            return outputs
        if isinstance(outputs, torch.Tensor):
            state = self._state or self._lazy_init(outputs.device)
            return outputs * state.scale.to(device=outputs.device, non_blocking=True)
        per_device: dict[torch.device, torch.Tensor] = {}

        def apply(value):
            if isinstance(value, torch.Tensor):
                state = self._state or self._lazy_init(value.device)
                scale = per_device.get(value.device)
                if scale is None:
                    scale = state.scale.to(device=value.device, non_blocking=True, copy=True)
                    per_device[value.device] = scale
                return value * scale
            if isinstance(value, abc.Iterable):
                scaled = map(apply, value)
                return type(value)(scaled) if isinstance(value, (list, tuple)) else scaled
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    def _unscale_grads_(
        self,
        optimizer: torch.optim.Optimizer,
        inv_scale: torch.Tensor,
        found_inf: torch.Tensor,
        allow_fp16: bool,
    ) -> dict[torch.device, torch.Tensor]:
        """Unscale (or only check) the optimizer's grads; one found-inf flag per device."""
        groups = self._grad_groups.get(optimizer)
        if groups is None:
            groups = self._grad_groups[optimizer] = GradGroups()
        found_inf_per_device: dict[torch.device, torch.Tensor] = {}
        inv_scale_per_device: dict[torch.device, torch.Tensor] = {}
        with torch.no_grad():
            grouped = groups.group(optimizer.param_groups, allow_fp16)
            for device, _, grads in grouped:
                device_found_inf = found_inf_per_device.get(device)
                if device_found_inf is None:
                    # Our own fresh flag serves its own device; other devices, and a flag a
                    # caller passed in (it may reuse it for several optimizers), get copies,
                    # as in torch.
                    if device == found_inf.device and found_inf is getattr(
                        self, "_own_found_inf", None
                    ):
                        device_found_inf = found_inf
                        device_inv_scale = inv_scale
                    else:
                        device_found_inf = found_inf.to(device, non_blocking=True, copy=True)
                        device_inv_scale = inv_scale.to(device, non_blocking=True)
                    found_inf_per_device[device] = device_found_inf
                    inv_scale_per_device[device] = device_inv_scale
                # Private API: torch's own unscale kernel (what torch.amp.GradScaler calls), one
                # fused pass per device and dtype; no public op checks and unscales together.
                torch._amp_foreach_non_finite_check_and_unscale_(
                    grads, device_found_inf, inv_scale_per_device[device]
                )
            if self._overflows is not None:
                divisor = self._still_scaled_by(inv_scale, found_inf)
                self._overflows.record(optimizer, groups, grouped, divisor)
        return found_inf_per_device

    def _still_scaled_by(
        self, inv_scale: torch.Tensor, found_inf: torch.Tensor
    ) -> torch.Tensor | None:
        """What the gradients ``_unscale_grads_`` just checked must still be divided by to be
        unscaled: nothing after our ``unscale_``; the scale on the fused path, which only checks
        (the optimizer unscales in its kernel); ``scale * inv_scale`` for a caller's factor."""
        state = self._state
        if state is None:
            return None
        if inv_scale is state.one:
            return state.scale
        if found_inf is self._own_found_inf:
            return None
        return state.scale * inv_scale.to(state.scale.device, non_blocking=True)

    @eager_under_compile
    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide the optimizer's gradients by the scale, in place, and record inf/NaN.

        Optional: call it before clipping or inspecting gradients; ``step()`` does it otherwise.
        At most once per optimizer per iteration. No sync. Sparse fp16 gradients are coalesced
        first, which replaces ``param.grad``.
        """
        if not self._enabled:
            return
        check_optimizer(optimizer, "unscale_")
        state = self._require_state("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # torch's reciprocal to the bit (fp64 where the device has it, see _reciprocal).
        scale = state.scale
        mirror = self._live_mirror()
        if mirror is not None:  # the same value, from the host's copy of the scale
            inv_scale = self._inv_scale_for(mirror.scale, scale.device)
        else:
            inv_scale = inverse_scale(scale)
        optimizer_state["found_inf_per_device"] = self._reduce_found_inf(
            self._unscale_with_own_flag(optimizer, inv_scale, scale.device, False),
            optimizer_state,
        )
        optimizer_state["stage"] = OptState.UNSCALED

    def _unscale_with_own_flag(
        self,
        optimizer: torch.optim.Optimizer,
        inv_scale: torch.Tensor,
        device: torch.device,
        allow_fp16: bool,
    ) -> dict[torch.device, torch.Tensor]:
        found_inf = self._own_found_inf = torch.zeros((), dtype=torch.float32, device=device)
        try:
            return self._unscale_grads_(optimizer, inv_scale, found_inf, allow_fp16)
        finally:
            self._own_found_inf = None

    def _inv_scale_for(self, scale: float, device: torch.device) -> torch.Tensor:
        """``1/scale`` as torch computes it (fp64, rounded to fp32), made once per scale value.

        The tensor is only read (by the unscale kernel), so it can be reused while the scale
        stays the same, which is most steps.
        """
        cached = self._inv_scale_cache
        if cached is None or cached[0] != scale or cached[1].device != device:
            inverse = torch.full((), to_fp32(1.0 / scale), dtype=torch.float32, device=device)
            cached = self._inv_scale_cache = (scale, inverse)
        return cached[1]

    def _check_inf_per_device(self, optimizer: torch.optim.Optimizer) -> dict[torch.device, Any]:
        """Record inf/NaN in the (still scaled) grads without unscaling (fused-optimizer path)."""
        state = self._require_state("_check_inf_per_device")
        one = state.one  # read only: a 1.0 kept on the device
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        optimizer_state["found_inf_per_device"] = self._reduce_found_inf(
            self._unscale_with_own_flag(optimizer, one, state.scale.device, True), optimizer_state
        )
        return optimizer_state["found_inf_per_device"]

    def _reduce_found_inf(
        self, found_inf_per_device: dict[torch.device, torch.Tensor], optimizer_state: dict
    ) -> dict[torch.device, torch.Tensor]:
        """With a process group: one flag, all-reduced (MAX) across ranks, asynchronously.

        Every rank takes part even when it has no gradients, so that none waits forever.
        """
        if self._process_group is None:
            return found_inf_per_device
        device = self._require_state("unscale_").scale.device
        flags = list(found_inf_per_device.values())
        if not flags:
            flag = torch.zeros((), dtype=torch.float32, device=device)
        else:
            flag = _scale_update.combine_found_inf(flags, device)
            if len(flags) > 1:
                flag = flag.clamp(max=1.0)
        optimizer_state["reduce_work"] = dist.all_reduce(
            flag, op=dist.ReduceOp.MAX, group=self._process_group, async_op=True
        )
        return {device: flag}

    @staticmethod
    def _await_reduce(optimizer_state: dict) -> None:
        # NCCL: the current stream waits, the host does not. Gloo (CPU): the host waits.
        work = optimizer_state.pop("reduce_work", None)
        if work is not None:
            work.wait()

    def _found_inf_per_device(self, optimizer: torch.optim.Optimizer) -> dict[torch.device, Any]:
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]

    def _combined_found_inf(self, optimizer_state: dict[str, Any]) -> torch.Tensor:
        # Clamped to 1: torch's fused kernels skip only when found_inf == 1.0, and a sum over
        # two devices that both overflowed would be 2.0.
        scale = self._require_state("step").scale
        self._await_reduce(optimizer_state)
        flags = list(optimizer_state["found_inf_per_device"].values())
        if not flags:  # a fused optimizer with no gradients this iteration: torch passes 0
            return torch.zeros((), dtype=torch.float32, device=scale.device)
        combined = _scale_update.combine_found_inf(flags, scale.device)
        return combined.clamp(max=1.0) if len(flags) > 1 else combined

    @eager_under_compile
    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        """Unscale (unless ``unscale_`` ran) and call ``optimizer.step()`` if grads are finite.

        Returns what ``optimizer.step`` returns, or None when the step is skipped. Closures are
        not supported. Fused Adam/AdamW/Adagrad (and fused SGD once its momentum buffers exist)
        skip inside their own kernel, with no sync; other optimizers need one sync to decide.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        check_optimizer(optimizer, "step")
        state = self._require_state("step")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if getattr(optimizer, "_step_supports_amp_scaling", False):
            return self._fused_step(optimizer, optimizer_state, state, args, kwargs)
        if optimizer_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not optimizer_state["found_inf_per_device"]:
            raise ScalerUsageError("No inf checks were recorded for this optimizer.")
        self._await_reduce(optimizer_state)
        retval = self._maybe_opt_step(optimizer, optimizer_state, *args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        return retval

    def _maybe_opt_step(
        self,
        optimizer: torch.optim.Optimizer,
        optimizer_state: dict[str, Any],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """Call ``optimizer.step`` unless an inf was found (the non-fused path).

        torch's hook: subclasses written against torch override it (XLA-style scalers step
        unconditionally with ``found_inf``); they keep working, with ``update()`` then reading
        the flags on the device.
        """
        found_inf = self._combined_found_inf(optimizer_state)
        optimizer_state["found_inf"] = found_inf
        self._last_found_inf[optimizer] = found_inf
        # The one sync a non-fused optimizer needs; update() reuses the value (_host_mirror).
        found = bool(found_inf.item())
        optimizer_state["found_on_host"] = found
        self._last_found_on_host[optimizer] = (found_inf, found)
        if found:
            return None
        return optimizer.step(*args, **kwargs)

    def _fused_step(
        self,
        optimizer: torch.optim.Optimizer,
        optimizer_state: dict[str, Any],
        state: ScaleState,
        args: tuple,
        kwargs: dict,
    ) -> Any:
        """torch's fused-optimizer contract; for a step whose kernel is not trusted to skip
        cleanly on this device, torch version and dtype (``_fused_support``), the flag is read
        first (one sync) and the optimizer is called only for finite gradients, still unscaling
        them in its kernel (so fp16 parameters work as on torch's fused path)."""
        passes_itself = _step_takes_grad_scaler(optimizer)
        if passes_itself:
            warn_at_caller(
                "GradScaler is going to stop passing itself as a keyword argument to the passed "
                "optimizer. In the near future GradScaler registers `grad_scale: Tensor` and "
                "`found_inf: Tensor` to the passed optimizer and let the optimizer use them "
                "directly.",
                FutureWarning,
            )
            kwargs = {**kwargs, "grad_scaler": self}
        else:
            if optimizer_state["stage"] is OptState.READY:
                self._check_inf_per_device(optimizer)
            found_inf = self._combined_found_inf(optimizer_state)
            optimizer_state["found_inf"] = found_inf
            self._last_found_inf[optimizer] = found_inf
            groups = self._grad_groups.get(optimizer)
            where = None if groups is None else groups.devices_and_dtypes()
            if not fused_step_is_safe(optimizer, where):
                found = bool(found_inf.item())
                optimizer_state["found_on_host"] = found
                self._last_found_on_host[optimizer] = (found_inf, found)
                if found:
                    optimizer_state["stage"] = OptState.STEPPED
                    return None
            # After unscale_ the grads are already unscaled: keep only a scale the user set.
            if optimizer_state["stage"] is OptState.UNSCALED:
                grad_scale = getattr(optimizer, "grad_scale", None)
            else:
                user_scale = getattr(optimizer, "grad_scale", None)
                # Fused kernels only read it, so the scale itself saves torch's extra multiply.
                grad_scale = state.scale if user_scale is None else state.scale * user_scale
            optimizer.grad_scale = grad_scale
            optimizer.found_inf = found_inf
        try:
            retval = optimizer.step(*args, **kwargs)
        finally:
            if not passes_itself:
                del optimizer.grad_scale
                del optimizer.found_inf
        optimizer_state["stage"] = OptState.STEPPED
        return retval

    @eager_under_compile
    def step_skipped(self, optimizer: torch.optim.Optimizer) -> torch.Tensor:
        """Whether ``optimizer``'s latest ``step()`` was skipped: a 0-dim bool tensor, no sync.

        Valid from ``step(optimizer)`` until that optimizer's next step (``update()`` does not
        clear it), on the scale's device. Use it instead of comparing ``get_scale()`` before
        and after ``update()``, the most common per-step sync in training loops. Example: keep
        a warmup schedule in step with the updates that really happened, on the device::

            real_steps = torch.zeros((), dtype=torch.int64, device="cuda")
            lr = torch.tensor(0.0, device="cuda")
            optimizer = torch.optim.AdamW(params, lr=lr, fused=True)  # a tensor lr
            for batch in data:
                ...
                scaler.step(optimizer)
                real_steps += ~scaler.step_skipped(optimizer)
                scaler.update()
                lr.copy_(peak_lr * (real_steps / warmup_steps).clamp(max=1.0))

        A logger can likewise sum the flags on the device and read the sum at its interval.
        """
        if not self._enabled:
            return torch.zeros((), dtype=torch.bool)
        found_inf = self._last_found_inf.get(optimizer)
        if found_inf is None:
            raise ScalerUsageError(
                "step_skipped(optimizer) is valid after scaler.step(optimizer); this optimizer "
                "has not stepped through this scaler (or its step() takes grad_scaler itself)"
            )
        return found_inf > 0

    def _latest_found_inf(self, optimizer: Any) -> tuple[torch.Tensor, bool | None] | None:
        """The found-inf flag of ``optimizer``'s latest step, and its value when that step read
        it on the host anyway (non-fused optimizers; fused SGD before its buffers exist), else
        None; never reads the device. A new flag tensor means a new step: ``SkipAwareScheduler``
        tells a fresh step from a repeated ``scheduler.step()`` by identity."""
        found_inf = self._last_found_inf.get(optimizer)
        if found_inf is None:
            return None
        on_host = self._last_found_on_host.get(optimizer)
        known = on_host[1] if on_host is not None and on_host[0] is found_inf else None
        return found_inf, known

    @eager_under_compile
    def update(self, new_scale: float | torch.Tensor | None = None) -> None:
        """Update the scale at the end of the iteration, on the device, without a sync.

        After an overflow in any optimizer the scale is multiplied by ``backoff_factor`` (after
        ``hysteresis`` overflows); after ``growth_interval`` clean steps, by ``growth_factor``.
        ``new_scale`` (a float, or a 1-element tensor on the scaler's device) sets it instead.

        .. warning::
            The scale may fall below 1. That happens when gradients overflow fp16 whatever the
            scale — typically a model pretrained in bf16 trained in fp16 — so every step is
            skipped and the scale keeps shrinking. In torch it reaches 2**-128 after 144
            straight overflows from 2**16, where ``1/scale`` is inf in fp32 and the next clean
            step writes inf/NaN into the parameters, and 0 after ~166, where it stays. Ours stops
            at a floor whose reciprocal is finite (``min_scale`` or 2**-126), counts floor hits
            and steps below 1 on the device, and with ``below_one="warn"``/``"raise"`` reports
            it when the host next reads the scale. To check without a sync, read ``stats()``
            (one transfer) at a log interval rather than ``get_scale()`` every step.

        Inside ``with scaler.restoring():`` it leaves the scale, trackers and counters as they
        are (see ``restoring``).
        """
        if not self._enabled:
            return
        state = self._require_state("update")
        if new_scale is not None:
            self._set_scale(state, new_scale)
        else:
            recorded = [s for s in self._per_optimizer_states.values() if s["found_inf_per_device"]]
            for optimizer_state in recorded:
                self._await_reduce(optimizer_state)
            if not recorded:
                raise ScalerUsageError("No inf checks were recorded prior to update.")
            if self._restoring:  # a restore's dummy step: keep the loaded state
                self._per_optimizer_states = defaultdict(_fresh_optimizer_state)
                return
            if self._overflows is not None:
                self._overflows.advance()
            mirror = self._live_mirror()
            if mirror is not None and all("found_on_host" in s for s in recorded):
                previous_scale = mirror.scale
                mirror.advance(
                    any(s["found_on_host"] for s in recorded),
                    growth_factor=self._growth_factor,
                    backoff_factor=self._backoff_factor,
                    growth_interval=self._growth_interval,
                    hysteresis=self._hysteresis,
                    floor=self._floor,
                    cap=self._cap,
                )
                mirror.write_scale(state, previous_scale)
                self._per_optimizer_states = defaultdict(_fresh_optimizer_state)
                return
            self._hand_over_to_device(state)
            found_infs = [f for s in recorded for f in s["found_inf_per_device"].values()]
            found_inf = _scale_update.combine_found_inf(found_infs, state.scale.device)
            _scale_update.update_scale_(
                state,
                found_inf,
                growth_factor=self._growth_factor,
                backoff_factor=self._backoff_factor,
                growth_interval=self._growth_interval,
                hysteresis=self._hysteresis,
                floor=self._floor,
                cap=self._cap,
            )
            if self._peek is not None:
                self._peek.enqueue(state)
        self._per_optimizer_states = defaultdict(_fresh_optimizer_state)

    def _hand_over_to_device(self, state: ScaleState) -> None:
        """From now on the device tensors are the truth: bring their counters up to date."""
        mirror = self._live_mirror()
        if mirror is not None:
            mirror.flush(state)
        self._mirror = None

    def _set_scale(self, state: ScaleState, new_scale: float | torch.Tensor) -> None:
        if isinstance(new_scale, torch.Tensor):
            reason = (
                "new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                "torch.FloatTensor with requires_grad=False."
            )
            if (
                new_scale.device.type != self._device
                or new_scale.numel() != 1
                or new_scale.requires_grad
            ):
                raise ScalerArgumentError(reason)
        else:
            new_scale = check_scale("new_scale", new_scale, 0.0, math.inf)
            mirror = self._live_mirror()
            if mirror is not None:
                previous_scale = mirror.scale
                mirror.set_scale(new_scale, self._floor, self._cap)
                mirror.write_scale(state, previous_scale)
                return
        self._hand_over_to_device(state)
        state.set_scale(new_scale, self._floor, self._cap)

    # ----------------------------------------------------------------- reading the scale

    def _get_scale_async(self) -> torch.Tensor | None:
        """The scale tensor without a sync (torch's private accessor, kept for compatibility)."""
        return self._scale

    @eager_under_compile
    def peek_scale(self) -> float | None:
        """The most recent scale that has already reached the host, or None; never waits.

        Log it every step at no synchronous cost. When every optimizer's found-inf flag reached
        the host in ``step()`` (non-fused optimizers), the value is current. Otherwise, on CUDA,
        the first call starts an asynchronous copy into pinned memory after each ``update()``;
        the value is the newest copy that has landed (usually the previous step's), None until
        one has. On CPU, where there is no device to wait for, it reads the scale tensor (host
        memory) and is current. A below-one event seen this way is reported by
        ``below_one="warn"``/``"raise"`` right here, within a few steps of happening.
        """
        if not self._enabled:
            return 1.0
        state = self._state
        if state is None:
            return None
        mirror = self._live_mirror()
        if mirror is not None:
            if self._peek is not None:
                self._peek.reset(mirror.scale)
            self._report_event(mirror.scale, mirror.event_pending(), mirror.mark_reported)
            return mirror.scale
        if state.scale.device.type == "cpu":  # host memory: the one read waits for nothing
            return self._read_scale_and_report()
        if state.scale.device.type != "cuda":
            return None
        if self._peek is None:
            self._peek = CudaScalePeek(state)
            self._peek.enqueue(state)
        latest = self._peek.peek()
        if latest is None:
            return None
        scale, pending = latest
        self._report_event(scale, pending, state.mark_reported)  # marking: an async device copy
        return scale

    @eager_under_compile
    def get_scale(self) -> float:
        """The current scale as a Python float (1.0 when disabled).

        .. warning::
            This waits for the device (one sync), as in torch: calling it every step stalls a
            GPU pipeline. To log the scale every step use ``peek_scale()``, which never waits;
            for counters (skips, steps below 1) read ``stats()`` at a log interval; to react to
            a skipped step use ``step_skipped(optimizer)``, a device flag.
        """
        if not self._enabled:
            return 1.0
        if self._state is None:
            return self._init_scale
        return self._read_scale_and_report()

    def _report_event(self, scale: float, pending: bool, mark_reported: Any) -> None:
        """The one place a recorded below-one event is reported: mark it (so it is reported
        once), then warn or raise as the policy says; nothing under "ignore"."""
        if pending and self._below_one != "ignore":
            mark_reported()
            report_below_one(self._below_one, scale)

    def _read_scale_and_report(self) -> float:
        """Read the scale (one sync) and report an event recorded since the last report."""
        state = self._state
        assert state is not None
        if self._below_one == "ignore":
            return state.scale.item()
        mirror = self._live_mirror()
        if mirror is not None:
            scale = state.scale.item()  # equal to mirror.scale; read for torch's semantics
            self._report_event(scale, mirror.event_pending(), mirror.mark_reported)
            return scale
        # One transfer carries both: a pending event flips the sign (the scale is always > 0).
        signed = torch.where(state.event_pending(), -state.scale, state.scale).item()
        self._report_event(abs(signed), signed < 0, state.mark_reported)  # an async copy
        return abs(signed)

    @eager_under_compile
    def check(self) -> None:
        """Report a scale-below-1 (or floor) event the device recorded; one sync.

        With ``below_one="warn"`` warns :class:`ScaleBelowOneWarning`, with ``"raise"`` raises
        :class:`ScaleBelowOneError`; with "ignore" does nothing. An event is an ``update()`` that
        ended below 1 or at the floor; each is reported once, at the first of ``check()``,
        ``get_scale()``, ``peek_scale()`` or ``stats()`` after it (and, for "warn",
        ``state_dict()``, which never raises: a collapsing run can always be saved).
        """
        if self._enabled and self._state is not None and self._below_one != "ignore":
            self._read_scale_and_report()

    @eager_under_compile
    def stats(self) -> ScalerStats:
        """The monitoring counters and the scale, all at once: one device-to-host copy.

        Counters advance on the device inside ``update()`` with no sync; this reads them (when
        every optimizer's flag already reached the host in ``step()``, with no copy at all).
        Call it at a log interval. Reports a pending below-one event like ``get_scale()``.
        With ``track_overflows=True`` the count of tensors that have overflowed travels in the
        same copy (on the path without a copy, it is the one read).
        """
        tracker = self._overflows
        overflowed = None if tracker is None else 0
        if not self._enabled:
            scale, counters, (low, high) = 1.0, [0] * _scale_update.N_COUNTERS, (1.0, 1.0)
        elif self._state is None:
            scale = self._init_scale
            saved = self._init_stats or fresh_stats(scale)
            counters, (low, high) = saved["counters"], saved["scale_range"]
        else:
            count = None if tracker is None else tracker.overflowed_count(self._state.scale.device)
            host = self._host_state(extra=count)
            scale, counters = host["scale"], host["counters"]
            low, high = host["scale_range"]
            if count is not None:
                overflowed = int(host["extra"][0])
            mirror = self._mirror
            assert mirror is not None  # _host_state() leaves one
            self._report_event(scale, mirror.event_pending(), mirror.mark_reported)
        return ScalerStats(
            scale=scale,
            steps=counters[STEPS],
            skipped_steps=counters[SKIPPED_STEPS],
            overflow_streak=counters[OVERFLOW_STREAK],
            longest_overflow_streak=counters[LONGEST_OVERFLOW_STREAK],
            floor_hits=counters[FLOOR_HITS],
            min_scale_seen=low,
            max_scale_seen=high,
            steps_below_one=counters[STEPS_BELOW_ONE],
            overflowed_tensors=overflowed,
        )

    # ----------------------------------------------------------------- which tensor overflowed

    def is_tracking_overflows(self) -> bool:
        """Whether the scaler was made with ``track_overflows=True``."""
        return self._overflows is not None

    def _require_tracking(self, method: str) -> OverflowTracker:
        tracker = self._overflows
        if tracker is None:
            raise ScalerUsageError(
                f"{method} needs a scaler that tracks overflows: "
                "GradScaler(..., track_overflows=True)"
            )
        return tracker

    @eager_under_compile
    def watch(self, model: torch.nn.Module | Any, *, prefix: str = "") -> None:
        """Name the tensors of :meth:`overflow_report` after the model's parameters.

        Takes a module (its ``named_parameters()``), a dict of names to parameters, or
        (name, parameter) pairs; ``prefix`` is put before each name (``watch(generator,
        prefix="G.")`` and ``watch(discriminator, prefix="D.")`` when two models share the
        scaler). Call it before or during training, as often as you like; the latest name of a
        tensor wins. Names only: nothing is copied, and parameters are referenced weakly. A
        tensor that is not watched is named by its position in its optimizer,
        ``param_groups[0][57]``. Raises ``TypeError`` for anything else than the above, and
        ``RuntimeError`` unless the scaler tracks overflows.
        """
        named = named_tensors(model, prefix)
        self._require_tracking("watch()").watch(named)

    @eager_under_compile
    def overflow_report(self, top: int | None = 10) -> OverflowReport:
        """Which gradient tensors held an inf or NaN, since when and how often: one host read.

        With ``track_overflows=True`` every step keeps, on the device and with no sync, for each
        gradient tensor: the steps in which it was non-finite, the first and the last of them,
        and its largest finite magnitude after unscaling. This reads all of it (one
        device-to-host copy per device) and returns the ``top`` tensors (None: all) that
        overflowed, the first to overflow first, as an :class:`OverflowReport`: ``print()`` it,
        or log ``report.to_dict()``. Call it when the scale falls or at a log interval, not
        every step. Steps are numbered as :meth:`stats` counts them (``update()`` calls before
        the step); a loaded checkpoint continues the numbering. Each rank of a process group
        reports its own tensors (its shards, under FSDP2). A disabled scaler reports nothing.

        Example::

            scaler = GradScaler("cuda", track_overflows=True)
            scaler.watch(model)
            ...  # train
            print(scaler.overflow_report(top=5))
        """
        top = check_report_top(top)
        return self._require_tracking("overflow_report()").report(top)

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        if self._state is None:
            return self._init_growth_tracker
        mirror = self._live_mirror()
        if mirror is not None:
            return mirror.growth_tracker
        return int(self._state.growth_tracker.item())

    # ----------------------------------------------------------------- state dict and pickling

    @eager_under_compile
    def state_dict(self) -> dict[str, Any]:
        """The scaler's state: torch's five keys plus ours, which torch's loader ignores.

        Empty when disabled. Call it after ``update()``. With ``below_one="warn"`` it warns of a
        pending below-one event; it never raises for the policy (a collapsing run must stay
        savable, and pickling calls it): with "raise" the event stays pending and the next
        ``peek_scale()``, ``get_scale()``, ``stats()`` or ``check()`` raises.
        """
        if not self._enabled:
            return {}
        if self._state is None:
            scale = self._init_scale
            growth_tracker = self._init_growth_tracker
            hysteresis_tracker = self._init_hysteresis_tracker
            stats = self._init_stats or fresh_stats(self._init_scale)
        else:
            host = self._host_state()
            if self._below_one == "warn":
                mirror = self._mirror
                assert mirror is not None  # _host_state() leaves one
                self._report_event(host["scale"], mirror.event_pending(), mirror.mark_reported)
            scale = float(host["scale"])
            growth_tracker = int(host["growth_tracker"])
            hysteresis_tracker = int(host["hysteresis_tracker"])
            stats = {"counters": host["counters"], "scale_range": host["scale_range"]}
        return {
            "scale": scale,
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": growth_tracker,
            HYSTERESIS_KEY: hysteresis_tracker,
            STATS_KEY: {
                "counters": list(stats["counters"]),
                "scale_range": list(stats["scale_range"]),
            },
        }

    def _host_state(self, extra: torch.Tensor | None = None) -> dict[str, Any]:
        """All device state as Python values: from the mirror, or read (and mirrored again).

        ``extra`` (a tensor on the scale's device) comes back as a list under "extra": in the
        same copy as the state, or read alone when the mirror makes that copy unnecessary.
        """
        state = self._state
        assert state is not None
        mirror = self._live_mirror()
        extra_values = None
        if mirror is None:
            host = state.to_host(extra)
            extra_values = host["extra"]
            mirror = self._mirror = HostMirror.from_host(host)
            mirror.remember_versions(state)
        elif extra is not None:
            extra_values = extra.reshape(-1).tolist()
        return {
            "extra": extra_values,
            "scale": mirror.scale,
            "growth_tracker": mirror.growth_tracker,
            "hysteresis_tracker": mirror.hysteresis_tracker,
            "counters": list(mirror.counters),
            "scale_range": [mirror.scale_min, mirror.scale_max],
        }

    @eager_under_compile
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict from ours or from ``torch.amp.GradScaler``; no-op when disabled.

        Everything is validated before anything is applied. A scale below the floor (for
        example a collapsed torch checkpoint, 0 <= scale < 2**-126) is raised to the floor.
        To restore the optimizer afterwards through code that steps it via the scaler, do it
        inside ``restoring()``.
        """
        if not self._enabled:
            return
        if not isinstance(state_dict, abc.Mapping):
            raise ScalerArgumentError(f"state_dict must be a dict, got {type(state_dict).__name__}")
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved "
                "from a disabled instance of GradScaler."
            )
        loaded = validate_state_dict(state_dict, self._hysteresis)
        scale = min(max(loaded["scale"], self._floor), self._cap)
        self._init_scale = scale
        self._growth_factor = loaded["growth_factor"]
        self._backoff_factor = loaded["backoff_factor"]
        self._growth_interval = loaded["growth_interval"]
        self._init_growth_tracker = loaded["_growth_tracker"]
        self._init_hysteresis_tracker = loaded[HYSTERESIS_KEY]
        stats = loaded[STATS_KEY] or fresh_stats(scale)
        if self._overflows is not None:  # what was tracked stays; the numbering follows the load
            self._overflows.restart_at(stats["counters"][STEPS])
        if self._state is None:
            self._init_stats = stats
            return
        self._state.scale.fill_(scale)
        self._state.growth_tracker.fill_(loaded["_growth_tracker"])
        self._state.hysteresis_tracker.fill_(loaded[HYSTERESIS_KEY])
        self._state.set_counters(stats["counters"])
        self._state.set_scale_range(*stats["scale_range"])
        self._state.mark_reported()
        self._mirror = HostMirror.from_host(
            {
                "scale": scale,
                "growth_tracker": loaded["_growth_tracker"],
                "hysteresis_tracker": loaded[HYSTERESIS_KEY],
                **stats,
            }
        )
        self._mirror.remember_versions(self._state)

    @contextlib.contextmanager
    def restoring(self) -> Iterator[None]:
        """Keep the scaler's state unchanged by the steps of a checkpoint restore.

        ``torch.distributed.checkpoint.state_dict`` initialises an empty optimizer state by
        stepping the optimizer on zero gradients (``get_optimizer_state_dict``,
        ``set_optimizer_state_dict``). When the optimizer is wrapped so that ``step()`` goes
        through the scaler, as accelerate's is, that dummy step reaches ``scaler.update()``
        after the scaler was loaded and counts as a clean step: the restored growth tracker
        moves and the scale may grow (accelerate #4289). Inside this block ``update()`` keeps
        the scale, trackers and counters as they are; the optimizer still steps. Example::

            scaler.load_state_dict(saved)
            with scaler.restoring():
                set_optimizer_state_dict(model, wrapped_optimizer, optim_state)

        Outside the block ``update()`` keeps torch's semantics exactly: a step after a load
        with no ``scale()`` in between cannot be told from a restore's, so nothing is guessed.
        """
        previous, self._restoring = self._restoring, True
        try:
            yield
        finally:
            self._restoring = previous

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise ScalerUsageError(
                    "A GradScaler instance may only be pickled at the beginning "
                    "of an iteration, or at the end after scaler.update()."
                )
            # Tensors are not pickled: the unpickled scaler recreates them lazily from these.
            saved = self.state_dict()
            state["_init_scale"] = saved["scale"]
            state["_init_growth_tracker"] = saved["_growth_tracker"]
            state["_init_hysteresis_tracker"] = saved[HYSTERESIS_KEY]
            state["_init_stats"] = saved[STATS_KEY]
            state["_state"] = None
            state["_mirror"] = None
            state["_peek"] = None
            state["_inv_scale_cache"] = None
            state["_grad_groups"] = None
            state["_last_found_inf"] = None
            state["_last_found_on_host"] = None
            # A process group cannot travel; pass one again to the unpickled scaler's owner.
            state["_process_group"] = None
        # Tracked overflows are not part of the scaler's state (nor of its checkpoints), and the
        # names of watch() refer to this process's tensors: the unpickled scaler starts afresh.
        state["_overflows"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_restoring", False)  # pickled before it existed
        self.__dict__.setdefault("_track_overflows", False)
        if self._track_overflows:
            saved = self.__dict__.get("_init_stats")
            self._overflows = OverflowTracker(saved["counters"][STEPS] if saved else 0)
        else:
            self._overflows = None
        if self._enabled:
            self._grad_groups = PerOptimizer()
            self._last_found_inf = PerOptimizer()
            self._last_found_on_host = PerOptimizer()
