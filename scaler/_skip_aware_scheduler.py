"""``SkipAwareScheduler``: an LR schedule that advances only for optimizer steps that were applied.

A step the scaler skips (inf/NaN gradients) still advances a plain scheduler, so every overflow
moves the schedule one step ahead of the weights (pytorch #44511, Lightning #21339, accelerate
#4242). Knowing whether a step was skipped costs a host read of the found-inf flag, which a
fused optimizer never needs otherwise. So there are two paths:

* **Host path.** When the flag already reached the host in ``scaler.step()`` (a non-fused
  optimizer: the scaler read it to decide), the wrapped scheduler is stepped, or not, right away.
  Exact, and no read of its own.
* **Device path** (fused SGD/Adam/AdamW, whose flag stays on the device). The optimizer's LR
  becomes a 0-dim fp32 tensor on the parameters' device (torch's tensor-``lr`` form, which fused
  kernels read on the device). A *shadow* copy of the scheduler, bound to a stand-in optimizer
  with float LRs, runs ahead on the host: each ``step()`` writes the LRs at the next position
  into a table on the device and keeps the shadow's state for that position; the device adds
  "not skipped" to its count of applied steps and copies ``table[count]`` into the LR tensors.
  The wrapped scheduler stays at the last position the host knows; a host read
  (``get_last_lr()``, ``last_epoch``, ``state_dict()``, ``sync()``) reads the count (one read)
  and loads the shadow's state at that count into it: the very state stepping it would give.

Everything else (a fused optimizer without tensor-``lr`` support, a schedule that also cycles
momentum, torch's GradScaler on a non-fused optimizer) takes the host path with one read of the
flag per step, documented as the fallback.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau

from scaler._errors import ScalerArgumentError, ScalerUsageError
from scaler._grad_scaler import GradScaler

__all__ = ["SkipAwareScheduler"]

#: Optimizers whose fused step reads a tensor ``lr`` on the device, with no host read.
TENSOR_LR_OPTIMIZERS: tuple[type[torch.optim.Optimizer], ...] = (
    torch.optim.SGD,
    torch.optim.Adam,
    torch.optim.AdamW,
)
#: Scheduler attributes that, when true, mean it writes more than ``lr`` (OneCycleLR and CyclicLR
#: cycle momentum/beta1), which the LR table cannot carry: such schedules take the host path.
WRITES_MORE_THAN_LR: tuple[str, ...] = ("cycle_momentum",)
#: Methods a scheduler adopted in place (``make_skip_aware``) routes through its wrapper.
ROUTED_METHODS: tuple[str, ...] = ("step", "get_last_lr", "state_dict", "load_state_dict")
#: Device steps between reads of the applied-step count (when nothing else reads it).
DEFAULT_HORIZON = 1024
#: Table rows the shadow computes at a time, written with one copy (one op, not one per step).
LOOKAHEAD = 64


class _StandInOptimizer:
    """What a scheduler reads and writes of its optimizer, without parameters: the shadow's."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.defaults = dict(optimizer.defaults)
        self.param_groups = [
            {key: _detached_copy(value) for key, value in group.items() if key != "params"}
            | {"params": []}
            for group in optimizer.param_groups
        ]
        #: torch's schedulers warn unless they see that ``step()`` ran before theirs.
        self._opt_called = True

    def step(self) -> None:
        """Never called; present so schedulers see a patched ``step`` (see ``LRScheduler``)."""

    step._wrapped_by_lr_sched = True  # type: ignore[attr-defined]


def _detached_copy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()  # on its own device: no transfer
    return copy.deepcopy(value)


def _schedulers_within(scheduler: Any) -> list[Any]:
    """The scheduler and, for SequentialLR/ChainedScheduler, those it runs, recursively."""
    found = [scheduler]
    for inner in getattr(scheduler, "_schedulers", ()):
        found.extend(_schedulers_within(inner))
    return found


def _innermost(optimizer: Any) -> Any:
    """The optimizer a framework's wrapper holds (accelerate's ``AcceleratedOptimizer``): the
    one the scaler steps, whose flag and fused support count."""
    inner = getattr(optimizer, "optimizer", None)
    while isinstance(inner, torch.optim.Optimizer) and inner is not optimizer:
        optimizer, inner = inner, getattr(inner, "optimizer", None)
    return optimizer


def _set_lr(group: dict[str, Any], value: Any) -> None:
    """Write an LR as the scheduler would: in place into a tensor LR, else by assignment."""
    lr = group["lr"]
    if isinstance(lr, torch.Tensor):
        if isinstance(value, torch.Tensor):
            lr.copy_(value)
        else:
            lr.fill_(value)
    else:
        group["lr"] = value


def _step_scheduler(scheduler: Any) -> None:
    """The class's own ``step`` (an adopted scheduler's instance ``step`` is the wrapper's)."""
    type(scheduler).step(scheduler)


def _as_float(value: Any) -> Any:
    """A tensor LR as a float (a read: only when a path is set up), anything else as it is."""
    return float(value) if isinstance(value, torch.Tensor) else value


def _own_state(scheduler: Any) -> dict[str, Any]:
    """The scheduler's state dict without what ``make_skip_aware`` put on the instance."""
    state = type(scheduler).state_dict(scheduler)
    return {k: v for k, v in state.items() if k not in ROUTED_METHODS and k != "_skip_aware"}


class _CudaLrPeek:
    """Asynchronous copies of the LRs into pinned memory, two slots read when their event has
    completed (the scheme of ``_peek.CudaScalePeek``): the host never waits."""

    __slots__ = ("_events", "_latest", "_next", "_slots")

    def __init__(self, n_groups: int, dtype: torch.dtype) -> None:
        self._slots = [torch.empty(n_groups, dtype=dtype, pin_memory=True) for _ in range(2)]
        self._events: list[Any] = [None, None]
        self._next = 0
        self._latest: list[float] | None = None

    def enqueue(self, lrs: torch.Tensor) -> None:
        self._slots[self._next].copy_(lrs, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self._events[self._next] = event
        self._next = 1 - self._next

    def peek(self) -> list[float] | None:
        newest, older = 1 - self._next, self._next
        for slot in (newest, older):
            event = self._events[slot]
            if event is not None and event.query():
                self._latest = self._slots[slot].tolist()  # pinned host memory: a plain read
                self._events[slot] = None
                if slot == newest:
                    self._events[older] = None  # never go back to an older value
                break
        return self._latest


class SkipAwareScheduler(LRScheduler):
    """Step ``scheduler`` only for optimizer steps the scaler applied; no host read when fused.

    Call ``step()`` where you stepped the plain scheduler, after ``scaler.update()``. Each call
    advances the schedule unless the latest ``scaler.step()`` of the scheduler's optimizer was
    skipped (inf/NaN gradients), and does nothing before that optimizer's first step. Contract:

    * After any host read — ``get_last_lr()``, ``last_epoch``, ``state_dict()``, ``sync()`` —
      the wrapped scheduler's position (``last_epoch``) is its initial one plus the number of
      applied steps, exactly, and its LRs are the schedule's there.
    * The LR in use at every optimizer step is the schedule's at the number of steps applied
      before it — exactly, not one step late — on both paths.
    * Fused SGD/Adam/AdamW: no host read at all (the LR is a tensor the device indexes), except
      one read of the applied-step count every ``horizon`` steps, to keep the LR table short.
      Their ``lr`` in ``param_groups`` becomes a 0-dim fp32 tensor on the parameters' device,
      torch's tensor-``lr`` form; the schedule itself (``get_last_lr()``, ``state_dict()``)
      stays in Python floats, equal to a plain scheduler's.
    * Non-fused optimizers: the scaler read the flag already; no read of our own. Other fused
      optimizers and schedules that cycle momentum: one read of the flag per step.
    * torch's ``GradScaler`` works too, at a cost: it keeps no flag after ``update()``, so a skip
      is inferred on the device from the scale falling (exact for one optimizer per scaler; with
      several, an iteration where any of them overflowed counts as skipped for all; a manual
      ``update(new_scale)`` below the current scale counts as a skip), and on the host path
      that comparison is one read per step.

    ``state_dict()`` is the wrapped scheduler's own (it loads into a plain scheduler, and back).
    Other attributes are the wrapped scheduler's; on the device path they lag until a host read.
    One wrapper per scheduler; several optimizers each get their own, each with its own flag.

    Example::

        scheduler = SkipAwareScheduler(CosineAnnealingLR(optimizer, T_max=1000), scaler)
        for batch in data:
            ...
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()  # does not advance when the step was skipped
    """

    def __init__(
        self,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        scaler: torch.amp.GradScaler,
        *,
        horizon: int = DEFAULT_HORIZON,
    ) -> None:
        # LRScheduler.__init__ is not called: it would step and re-patch the optimizer.
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ScalerArgumentError(
                "SkipAwareScheduler: ReduceLROnPlateau steps on a metric, not per optimizer "
                "step; step it yourself, only when scaler.step_skipped(optimizer) is False"
            )
        if isinstance(scheduler, SkipAwareScheduler) or not isinstance(scheduler, LRScheduler):
            raise ScalerArgumentError(
                "SkipAwareScheduler: scheduler must be a torch.optim.lr_scheduler.LRScheduler, "
                f"got {type(scheduler).__qualname__}"
            )
        if not isinstance(scaler, torch.amp.GradScaler):
            raise ScalerArgumentError(
                "SkipAwareScheduler: scaler must be a scaler.GradScaler or torch.amp.GradScaler, "
                f"got {type(scaler).__qualname__}"
            )
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
            raise ScalerArgumentError(
                f"SkipAwareScheduler: horizon must be a positive int, got {horizon!r}"
            )
        self._scheduler = scheduler
        self._scaler = scaler
        self._horizon = horizon
        #: torch's scaler: the scale at our last step (a float before its first ``scale()``).
        self._previous_scale: torch.Tensor | float | None = None
        self._setup()

    # ----------------------------------------------------------------- setup

    def _setup(self) -> None:
        """Choose the path and, for the device path, make the LR tensors, shadow and table."""
        optimizer = self._scheduler.optimizer
        self._stepped = _innermost(optimizer)
        self._device_path = self._takes_device_path(self._stepped)
        #: Table rows past the one the wrapped scheduler is at (the device count is at most this).
        self._ahead = 0
        #: Device steps since the last read of the count.
        self._unread = 0
        if not self._device_path:
            return
        groups = optimizer.param_groups
        tensors = [group["lr"] for group in groups if isinstance(group["lr"], torch.Tensor)]
        if tensors:
            first = tensors[0]
            if len(tensors) != len(groups) or any(
                lr.device != first.device or lr.dtype != first.dtype for lr in tensors
            ):
                self._device_path = False
                return
            device, dtype = first.device, first.dtype
        else:
            device = next((g["params"][0].device for g in groups if g["params"]), None)
            device, dtype = device or torch.device("cpu"), torch.float32
        last_lrs = [_as_float(lr) for lr in type(self._scheduler).get_last_lr(self._scheduler)]
        #: The LRs the device indexes into, one row: ``index_select`` writes it in one op.
        self._row = torch.empty((1, len(groups)), dtype=dtype, device=device)
        if not tensors:
            for column, (group, lr) in enumerate(zip(groups, last_lrs, strict=True)):
                self._row[0, column].fill_(lr)  # a fill, not torch.tensor(): no copy
                group["lr"] = self._row[0, column]
        self._lrs: list[torch.Tensor] = [group["lr"] for group in groups]
        self._writes_row_only = all(
            lr.data_ptr() == self._row[0, column].data_ptr() for column, lr in enumerate(self._lrs)
        )
        self._table = torch.empty(
            (self._horizon + LOOKAHEAD + 1, len(groups)), dtype=dtype, device=device
        )
        for column, lr in enumerate(last_lrs):
            self._table[0, column].fill_(lr)
        self._shadow = self._make_shadow(last_lrs)
        #: The shadow's state at each table row filled so far (None past a schedule's end).
        self._states: list[dict[str, Any] | None] = [_own_state(self._scheduler)]
        #: The LRs of the last row filled, on the host.
        self._last_row: list[float] = list(last_lrs)
        #: What the shadow raised when stepped past the schedule's end (OneCycleLR), if it did.
        self._exhausted: ValueError | None = None
        #: Applied steps since the last read, on the device, shape (1,) to index the table.
        self._count = torch.zeros(1, dtype=torch.int64, device=device)
        #: ``peek_last_lr()``'s asynchronous copies on CUDA; started by its first call.
        self._lr_peek: _CudaLrPeek | None = None

    def _takes_device_path(self, optimizer: torch.optim.Optimizer) -> bool:
        return (
            self._scaler.is_enabled()
            and getattr(optimizer, "_step_supports_amp_scaling", False)
            and isinstance(optimizer, TENSOR_LR_OPTIMIZERS)
            and bool(optimizer.param_groups)
            and not any(
                getattr(inner, name, False)
                for inner in _schedulers_within(self._scheduler)
                for name in WRITES_MORE_THAN_LR
            )
        )

    def _make_shadow(self, last_lrs: list[Any]) -> Any:
        """A deep copy of the scheduler bound to a stand-in optimizer with float LRs, at the
        same position, so that its steps are host arithmetic only."""
        scheduler = self._scheduler
        stand_in = _StandInOptimizer(scheduler.optimizer)
        for group, lr in zip(stand_in.param_groups, last_lrs, strict=True):
            group["lr"] = lr
            if "initial_lr" in group:
                group["initial_lr"] = _as_float(group["initial_lr"])
        memo: dict[int, Any] = {id(scheduler.optimizer): stand_in, id(self): None}
        routed = [scheduler.__dict__[name] for name in ROUTED_METHODS if name in scheduler.__dict__]
        memo.update((id(method), None) for method in routed)
        shadow = copy.deepcopy(scheduler, memo)
        for name in ROUTED_METHODS:
            shadow.__dict__.pop(name, None)
        shadow.__dict__.pop("_skip_aware", None)
        for inner in _schedulers_within(shadow):
            for name in ("base_lrs", "_last_lr"):
                values = inner.__dict__.get(name)
                if isinstance(values, list):
                    inner.__dict__[name] = [_as_float(value) for value in values]
        return shadow

    # ----------------------------------------------------------------- stepping

    def step(self, epoch: int | None = None) -> None:  # type: ignore[override]
        """Advance the schedule by one step unless the optimizer's latest step was skipped."""
        if epoch is not None:
            raise ScalerArgumentError(
                "SkipAwareScheduler.step() takes no epoch: it counts applied optimizer steps"
            )
        if self._device_path and self._lrs_replaced():
            # optimizer.load_state_dict() (or add_param_group) replaced the LRs we index into:
            # bring the wrapped scheduler up to date on the new ones, and start again from it.
            self.sync()
            self._setup()
        skipped_on_host, applied = self._latest_skip()
        if not self._device_path:
            if skipped_on_host is None:
                assert applied is not None
                skipped_on_host = not applied.item()  # the documented fallback: one read
            if not skipped_on_host:
                _step_scheduler(self._scheduler)
            return
        self._step_on_device(applied if skipped_on_host is None else int(not skipped_on_host))

    def _lrs_replaced(self) -> bool:
        groups = self._scheduler.optimizer.param_groups
        if len(groups) != len(self._lrs):
            raise ScalerUsageError(
                "SkipAwareScheduler: the optimizer's param groups changed since the scheduler "
                "was made; torch's schedulers do not follow add_param_group() either"
            )
        return any(group["lr"] is not lr for group, lr in zip(groups, self._lrs, strict=True))

    def _latest_skip(self) -> tuple[bool | None, torch.Tensor | None]:
        """(skipped, when the host knows it without a read; else "applied" on the device)."""
        scaler = self._scaler
        optimizer = self._stepped
        if not scaler.is_enabled():
            return False, None
        if isinstance(scaler, GradScaler):
            latest = scaler._latest_found_inf(optimizer)
            if latest is None:
                return True, None  # no step yet: nothing applied
            found_inf, known = latest
            return known, None if known is not None else found_inf == 0
        return None, self._scale_held(scaler)

    def _scale_held(self, scaler: torch.amp.GradScaler) -> torch.Tensor:
        """torch's scaler: whether the scale did not fall since our last step (a backoff is a
        skip; a clean step keeps or grows it)."""
        scale = getattr(scaler, "_scale", None)
        previous = self._previous_scale
        if previous is None:
            previous = float(getattr(scaler, "_init_scale", 2.0**16))
        if scale is None:
            self._previous_scale = previous
            return torch.zeros((), dtype=torch.bool)  # never scaled: no step applied
        held = scale >= previous
        if isinstance(self._previous_scale, torch.Tensor):
            self._previous_scale.copy_(scale)
        else:
            self._previous_scale = scale.detach().clone()
        return held

    def _step_on_device(self, applied: torch.Tensor | int) -> None:
        if self._unread == self._horizon:
            self.sync()  # the bounded read: keeps the table short
        self._ahead += 1
        if self._ahead == len(self._states):
            self._fill_rows()
        self._unread += 1
        if isinstance(applied, torch.Tensor):
            if applied.device != self._count.device:
                applied = applied.to(self._count.device, non_blocking=True)
            self._count.add_(applied)
        elif applied:
            self._count.add_(1)
        torch.index_select(self._table, 0, self._count, out=self._row)
        if not self._writes_row_only:  # the user's own LR tensors
            for column, lr in enumerate(self._lrs):
                lr.copy_(self._row[0, column])
        if self._lr_peek is not None:
            self._lr_peek.enqueue(self._row[0])

    def _fill_rows(self) -> None:
        """The next ``LOOKAHEAD`` rows: the shadow's LRs and states one position further each."""
        start = len(self._states)
        rows: list[list[float]] = []
        for _ in range(LOOKAHEAD):
            if self._exhausted is None:
                try:
                    _step_scheduler(self._shadow)
                except ValueError as error:
                    # OneCycleLR refuses to step past total_steps. The shadow runs ahead of the
                    # real schedule, which may never get there: repeat the last row, and raise
                    # at the read if the applied steps do get there, as the plain one would.
                    self._exhausted = error
            if self._exhausted is None:
                self._last_row = [group["lr"] for group in self._shadow.optimizer.param_groups]
                self._states.append(_own_state(self._shadow))
            else:
                self._states.append(None)
            rows.append(self._last_row)
        end = start + LOOKAHEAD
        if end > len(self._table):
            # Rows stay for steps not yet applied: the shadow is ahead by every skip so far.
            grown = self._table.new_empty((2 * end, self._table.shape[1]))
            grown[:start].copy_(self._table[:start])
            self._table = grown
        chunk = torch.tensor(rows, dtype=self._table.dtype)
        if self._table.device.type == "cuda":
            chunk = chunk.pin_memory()  # an asynchronous copy, whatever the driver does
        self._table[start:end].copy_(chunk, non_blocking=True)

    # ----------------------------------------------------------------- host reads

    def sync(self) -> None:
        """Bring the wrapped scheduler to the applied count: one read on the device path."""
        if not self._device_path or self._unread == 0:
            return
        self._unread = 0
        applied = int(self._count.item())
        state = self._states[applied]
        if state is None:
            assert self._exhausted is not None
            raise self._exhausted
        # A copy: loaders pop keys (LambdaLR's lr_lambdas), and a row may be loaded again.
        type(self._scheduler).load_state_dict(self._scheduler, copy.deepcopy(state))
        self._states = self._states[applied:]
        if applied:
            filled = len(self._states)
            self._table[:filled] = self._table[applied : applied + filled].clone()
            self._count.zero_()
        self._ahead -= applied

    def _reset(self) -> None:
        """Start again from the wrapped scheduler's current state (after a load)."""
        groups = self._scheduler.optimizer.param_groups
        last_lrs = type(self._scheduler).get_last_lr(self._scheduler)
        for group, last in zip(groups, last_lrs, strict=True):
            _set_lr(group, last)
        self._setup()

    @property
    def scheduler(self) -> torch.optim.lr_scheduler.LRScheduler:
        """The wrapped scheduler, brought up to date (a host read on the device path)."""
        self.sync()
        return self._scheduler

    @property
    def optimizer(self) -> torch.optim.Optimizer:  # type: ignore[override]
        return self._scheduler.optimizer

    @property
    def last_epoch(self) -> int:  # type: ignore[override]
        """The wrapped scheduler's position: its initial one plus the applied steps."""
        self.sync()
        return self._scheduler.last_epoch

    @property
    def _step_count(self) -> int:
        """The wrapped scheduler's (accelerate writes it during gradient accumulation)."""
        return self._scheduler._step_count

    @_step_count.setter
    def _step_count(self, value: int) -> None:
        self._scheduler._step_count = value

    def get_last_lr(self) -> list[float | torch.Tensor]:
        """The LRs at the applied count (a host read on the device path)."""
        self.sync()
        return type(self._scheduler).get_last_lr(self._scheduler)

    def peek_last_lr(self) -> list[float] | None:
        """The LRs in use, as the latest value that already reached the host; never waits.

        For logging every step at no synchronous cost, like ``GradScaler.peek_scale()``. Host
        path: the wrapped scheduler's LRs, current. Device path on CPU: the LR tensors are host
        memory, read directly (current). On CUDA the first call starts an asynchronous copy into
        pinned memory after each ``step()``, and the value is the newest copy that has landed
        (usually the previous step's), None until one has.
        """
        if not self._device_path:
            return [float(lr) for lr in type(self._scheduler).get_last_lr(self._scheduler)]
        if self._lrs[0].device.type == "cpu":
            return torch.stack(self._lrs).tolist()  # host memory: waits for nothing
        if self._lrs[0].device.type != "cuda":
            return None
        if self._lr_peek is None:
            self._lr_peek = _CudaLrPeek(len(self._lrs), self._lrs[0].dtype)
            self._lr_peek.enqueue(torch.stack(self._lrs))
        return self._lr_peek.peek()

    def get_lr(self) -> list[float | torch.Tensor]:
        raise ScalerUsageError("SkipAwareScheduler: use get_last_lr() for the current LRs")

    def state_dict(self) -> dict[str, Any]:
        """The wrapped scheduler's state at the applied count; loads into a plain scheduler."""
        self.sync()
        return _own_state(self._scheduler)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state saved by this wrapper or by the plain scheduler, and start from it."""
        type(self._scheduler).load_state_dict(self._scheduler, state_dict)
        self._reset()

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this class lacks: the wrapped scheduler's own attributes.
        if name.startswith("__") or name == "_scheduler":
            raise AttributeError(name)
        return getattr(self._scheduler, name)

    def __repr__(self) -> str:
        path = "device" if self._device_path else "host"
        return f"SkipAwareScheduler({self._scheduler!r}, path={path!r})"


def make_skip_aware(scheduler: Any, scaler: torch.amp.GradScaler) -> SkipAwareScheduler | None:
    """Make ``scheduler`` itself skip-aware: its ``step``, ``get_last_lr``, ``state_dict`` and
    ``load_state_dict`` go through a :class:`SkipAwareScheduler` from now on.

    Frameworks hold their scheduler in several places (the HF Trainer, accelerate's wrapper,
    Lightning's configs, checkpoint code), so, as with the scaler (``_adopt``), changing the
    object reaches every holder at once. Returns the wrapper, the one already installed, or
    None for what it cannot wrap (ReduceLROnPlateau, a scheduler that is not an LRScheduler).
    """
    existing = scheduler.__dict__.get("_skip_aware") if hasattr(scheduler, "__dict__") else None
    if isinstance(existing, SkipAwareScheduler):
        return existing
    if isinstance(scheduler, (ReduceLROnPlateau, SkipAwareScheduler)) or not isinstance(
        scheduler, LRScheduler
    ):
        return None
    wrapper = SkipAwareScheduler(scheduler, scaler)
    for name in ROUTED_METHODS:
        setattr(scheduler, name, getattr(wrapper, name))
    scheduler._skip_aware = wrapper  # type: ignore[attr-defined]
    return wrapper
