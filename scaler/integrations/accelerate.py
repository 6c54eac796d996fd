"""``use_ampscale(accelerator)``: ampscale's scaler in a hand-written accelerate loop.

accelerate builds a ``torch.amp.GradScaler`` inside ``Accelerator(mixed_precision="fp16")`` and
keeps it in ``accelerator.scaler`` and in every optimizer ``prepare()`` wraps; there is no
argument to pass another. ``use_ampscale`` turns that scaler into ampscale's in place, so every
holder uses it, whether it runs before or after ``prepare()``::

    accelerator = Accelerator(mixed_precision="fp16")
    scaler = use_ampscale(accelerator, below_one="warn")
    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    ...
    if step % 100 == 0:
        print(scaler.peek_scale(), scaler.stats().skipped_steps)

With ``use_ampscale(accelerator, track_overflows=True)``, every ``accelerator.log(...)`` also
writes which parameters' gradients overflowed (the top rows of ``scaler.overflow_report()``).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from scaler._grad_scaler import GradScaler
from scaler._skip_aware_scheduler import make_skip_aware
from scaler.integrations._adopt import adopt_scaler
from scaler.integrations._extras import require
from scaler.integrations._log_fields import overflow_fields

require("accelerate", "accelerate", "accelerate")

from accelerate import Accelerator  # noqa: E402  (after the check that names the extra)

__all__ = ["use_ampscale"]


def use_ampscale(
    accelerator: Accelerator, *, skip_aware_schedule: bool = True, **scaler_kwargs: Any
) -> GradScaler:
    """Replace the accelerator's loss scaler with ampscale's :class:`~scaler.GradScaler`.

    The scaler keeps its device, growth settings and any state it loaded or reached (call it
    before ``accelerator.load_state()`` to also restore ampscale's monitoring counters from a
    checkpoint it saved); ``scaler_kwargs`` (``below_one``, ``min_scale``, ``hysteresis``,
    ``init_scale``…) override them. ``init_scale`` applies only while the scaler has not
    stepped. Every optimizer already prepared uses the new scaler too; ``accelerator.save_state``
    saves its full state, and ``accelerator.load_state`` restores it exactly: it runs inside
    :meth:`~scaler.GradScaler.restoring`, so the dummy optimizer step that restoring an FSDP2
    checkpoint takes cannot change the state just loaded (accelerate #4289). Returns it, for
    ``peek_scale()`` and ``stats()``. An accelerator whose scaler is already ampscale's gets it
    back unchanged (``scaler_kwargs`` are then ignored).

    With ``skip_aware_schedule`` (the default) every scheduler the accelerator prepared, or
    prepares later, steps only for applied optimizer steps (:class:`~scaler.SkipAwareScheduler`,
    in place): accelerate already holds back a scheduler after a skipped non-fused step, but
    cannot tell that a fused optimizer skipped (accelerate #4242); ours can, with no host read.

    With ``track_overflows=True`` the scaler keeps, per gradient tensor, which ones held an inf
    or NaN (no per-step sync), and every ``accelerator.log(values, step)`` on the main process
    also writes ``tracked_tensors``, ``overflowed_tensors`` and the first three rows of
    :meth:`~scaler.GradScaler.overflow_report` (``overflow/<parameter>/nonfinite_steps``,
    ``.../first_step``, ``.../last_step``, ``.../max_abs``), the parameters named after the
    prepared models: one more small read per log, none between logs. Each process tracks its
    own gradients; accelerate logs the main process's.

    Raises ``ValueError`` when the accelerator has no scaler: bf16, fp32, DeepSpeed (which scales
    on its own), or fp16 on CPU, where accelerate neither autocasts nor scales.
    """
    if not isinstance(accelerator, Accelerator):
        raise TypeError(
            f"use_ampscale: expected an accelerate.Accelerator, got {type(accelerator).__name__}"
        )
    old = accelerator.scaler
    if old is None:
        raise ValueError(
            "use_ampscale: this Accelerator has no loss scaler to replace "
            f"(mixed_precision={accelerator.mixed_precision!r} on {accelerator.device.type}); "
            "accelerate builds one only for fp16 on a GPU or other accelerator, without DeepSpeed"
        )
    stepped = getattr(old, "_scale", None) is not None
    scaler = adopt_scaler(old, scaler_kwargs, carry_state=stepped)
    _load_state_while_restoring(accelerator)
    if skip_aware_schedule:
        _make_schedules_skip_aware(accelerator, scaler)
    if scaler.is_tracking_overflows():
        _log_overflows(accelerator)
    return scaler


def _log_overflows(accelerator: Accelerator) -> None:
    """``accelerator.log`` that adds the overflow report's top rows on the main process.

    The models are watched at each log rather than at ``prepare()``: ``use_ampscale`` may run
    before or after it, and a log is where the names are needed.
    """
    log = accelerator.log
    if getattr(log, "_overflows", False):
        return

    def log_with_overflows(values: dict, step: int | None = None, **kwargs: Any) -> Any:
        scaler = accelerator.scaler
        if accelerator.is_main_process and isinstance(scaler, GradScaler):
            for model in accelerator._models:
                scaler.watch(accelerator.unwrap_model(model))
            values = {**values, **overflow_fields(scaler)}
        return log(values, step=step, **kwargs)

    functools.update_wrapper(log_with_overflows, log)
    log_with_overflows._overflows = True  # type: ignore[attr-defined]
    accelerator.log = log_with_overflows  # type: ignore[method-assign]


def _load_state_while_restoring(accelerator: Accelerator) -> None:
    """Run the accelerator's ``load_state`` inside ``scaler.restoring()`` (accelerate #4289).

    With FSDP2, ``Accelerator.load_state`` loads the scaler first and then the optimizers through
    ``torch.distributed.checkpoint``'s ``get/set_optimizer_state_dict``, which initialise an
    empty optimizer state with a dummy ``step()``; accelerate's optimizer wrapper sends it
    through ``scaler.step`` and ``scaler.update``, which would count it as a clean step of the
    state just loaded (the growth tracker moves, the scale may grow). On the other paths the
    scaler is loaded after the optimizers and the block changes nothing.
    """
    load_state = accelerator.load_state
    if getattr(load_state, "_restoring", False):
        return

    def load_state_restoring(*args: Any, **kwargs: Any) -> Any:
        scaler = accelerator.scaler
        holding = scaler.restoring() if isinstance(scaler, GradScaler) else contextlib.nullcontext()
        with holding:
            return load_state(*args, **kwargs)

    functools.update_wrapper(load_state_restoring, load_state)
    load_state_restoring._restoring = True  # type: ignore[attr-defined]
    accelerator.load_state = load_state_restoring  # type: ignore[method-assign]


def _make_schedules_skip_aware(accelerator: Accelerator, scaler: GradScaler) -> None:
    """Schedulers already prepared now, and those ``prepare()`` wraps later, through the
    accelerator's own ``prepare_scheduler`` (which ``prepare()`` calls for each scheduler)."""
    for prepared in accelerator._schedulers:
        make_skip_aware(prepared.scheduler, scaler)
    prepare_scheduler = accelerator.prepare_scheduler
    if getattr(prepare_scheduler, "_skip_aware", False):
        return

    def prepare_skip_aware(scheduler: Any) -> Any:
        prepared = prepare_scheduler(scheduler)
        make_skip_aware(prepared.scheduler, scaler)
        return prepared

    prepare_skip_aware._skip_aware = True  # type: ignore[attr-defined]
    accelerator.prepare_scheduler = prepare_skip_aware  # type: ignore[method-assign]
