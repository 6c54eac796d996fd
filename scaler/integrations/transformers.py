"""``LossScaleCallback``: ampscale's scaler, and its counters in the logs, for the HF ``Trainer``.

The ``Trainer`` builds its scaler through accelerate and takes none from the user. This callback
turns it into ampscale's at ``on_train_begin`` (carrying over the init scale, growth settings and
any state loaded from a checkpoint, ours or torch's), so every prepared optimizer uses it, and adds
``loss_scale``, ``skipped_steps``, ``steps_below_one`` and ``floor_hits`` to each training log
(console, ``trainer_state.json``, TensorBoard, W&B…) without a per-step sync::

    trainer = Trainer(model, args, train_dataset=data, callbacks=[LossScaleCallback()])
"""

from __future__ import annotations

import logging
import math
import sys
import warnings
from typing import Any

from scaler._errors import ScalerArgumentError
from scaler._grad_scaler import GradScaler
from scaler._policy import BELOW_ONE_POLICIES, ScaleBelowOneWarning, below_one_message
from scaler._skip_aware_scheduler import SkipAwareScheduler, make_skip_aware
from scaler.integrations._adopt import adopt_scaler
from scaler.integrations._extras import require
from scaler.integrations._log_fields import log_fields

require("transformers", "transformers", "transformers")
require("accelerate", "transformers", "transformers")

from transformers import (  # noqa: E402  (after the check that names the extra)
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)
from transformers.trainer_callback import CallbackHandler, ExportableState  # noqa: E402

__all__ = ["LossScaleCallback"]

logger = logging.getLogger(__name__)

#: Prefixes of the metric logs that are not training-step logs (``evaluate()``, ``predict()``).
_METRIC_PREFIXES = ("eval_", "test_", "predict_")
#: Constructor arguments the callback sets itself rather than the user.
_NOT_SCALER_KWARGS = ("device", "enabled")
#: Frames between ``_run_first`` and ``CallbackHandler.call_event`` (event method, overrides).
_HANDLER_SEARCH_DEPTH = 4

#: The Trainer method that reads the LR at every optimizer step (for the logs of that step).
_TRAINER_LR_READ = Trainer._get_learning_rate.__code__

_WHAT_TO_DO = (
    "With the Trainer: set TrainingArguments(bf16=True) instead of fp16=True (Ampere or newer "
    "GPUs, TPUs, CPUs), or find the module that overflows with "
    "scaler.check_fp16_compat(model, batch)."
)


def _json_value(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


class LossScaleCallback(TrainerCallback, ExportableState):
    """Use ampscale's :class:`~scaler.GradScaler` in the HF ``Trainer`` and log its counters.

    Keyword arguments are :class:`~scaler.GradScaler`'s (``init_scale``, ``growth_interval``,
    ``min_scale``, ``max_scale``, ``hysteresis``…); the device comes from the Trainer.
    ``init_scale`` applies to a fresh run; a resumed one continues from the checkpoint's scale.
    ``below_one`` (default ``"warn"``) is handled here rather than inside the scaler, so that it
    never interrupts a step: when the scale falls below 1 (or hits ``min_scale``), ``"warn"``
    warns :class:`~scaler.ScaleBelowOneWarning` once per episode and ``"raise"`` stops training
    cleanly (``control.should_training_stop``) with the same message, which says what happened
    and what to do. The scale is checked with ``peek_scale()`` after every step (never waits) and
    the counters at every log.

    Logs gain ``loss_scale``, ``skipped_steps`` (iterations whose optimizer step was skipped for
    inf/NaN gradients), ``steps_below_one`` and ``floor_hits``; on CUDA ``loss_scale`` may be one
    step old. The Trainer's checkpoints save the scaler's full state (``scaler.pt`` holds torch's
    five keys plus ours; ``trainer_state.json`` keeps the counters torch's loader drops), and a
    resumed run restores it, also from a checkpoint saved with torch's scaler. The scaler is
    ``callback.scaler`` once training has begun.

    With ``skip_aware_schedule`` (the default) the Trainer's LR scheduler steps only for
    applied optimizer steps (:class:`~scaler.SkipAwareScheduler`, in place). The Trainer already
    holds it back after a skipped non-fused step, but not after a skipped fused one
    (``optim="adamw_torch_fused"``), which it cannot tell; ours can, with no host read. The
    Trainer reads the LR at every step for its logs: it gets ``peek_last_lr()`` (never waits;
    on CUDA possibly one step old, like ``loss_scale``).

    With ``track_overflows=True`` (a :class:`~scaler.GradScaler` argument) the scaler keeps, per
    gradient tensor, which ones held an inf or NaN (no per-step sync), names them after the
    Trainer's model (:meth:`~scaler.GradScaler.watch`), and each training log also carries
    ``tracked_tensors``, ``overflowed_tensors`` and the first three rows of
    :meth:`~scaler.GradScaler.overflow_report` as ``overflow/<parameter>/nonfinite_steps``,
    ``.../first_step``, ``.../last_step`` and ``.../max_abs`` (steps numbered from 0, as
    ``state.global_step`` was during the step): one more small read per log.

    When the Trainer has no scaler (bf16, fp32, DeepSpeed, or fp16 on CPU, where accelerate
    neither autocasts nor scales) the callback warns once and logs nothing.
    """

    def __init__(self, *, skip_aware_schedule: bool = True, **scaler_kwargs: Any) -> None:
        for name in _NOT_SCALER_KWARGS:
            if name in scaler_kwargs:
                raise TypeError(f"LossScaleCallback: {name!r} is set by the Trainer, not here")
        policy = scaler_kwargs.pop("below_one", "warn")
        if policy not in BELOW_ONE_POLICIES:
            raise ScalerArgumentError(
                f"below_one must be one of {', '.join(map(repr, BELOW_ONE_POLICIES))}, "
                f"got {policy!r}"
            )
        # Fail at construction, not at on_train_begin, on a bad argument.
        GradScaler("cpu", **scaler_kwargs)
        self._scaler_kwargs = {**scaler_kwargs, "below_one": "ignore"}
        self._policy: str = policy
        #: The Trainer's scaler, ampscale's once training has begun; None before, or when the
        #: Trainer scales nothing.
        self.scaler: GradScaler | None = None
        #: The message of the latest below-one event, or None.
        self.below_one_message: str | None = None
        self._in_episode = False
        self._seen_events = (0, 0)
        self._skip_aware_schedule = skip_aware_schedule
        #: The Trainer's scheduler made skip-aware, once training has begun (None otherwise).
        self.schedule: SkipAwareScheduler | None = None

    # --------------------------------------------------------------- checkpoints

    def state(self) -> dict[str, Any]:
        """What ``trainer_state.json`` keeps: our arguments and the scaler's full state."""
        args = {k: v for k, v in self._scaler_kwargs.items() if _json_value(v)}
        args["below_one"] = self._policy
        saved = self.scaler.state_dict() if self.scaler is not None else None
        return {"args": args, "attributes": {"saved_scaler_state": saved}}

    def _saved_state(self, state: TrainerState) -> dict[str, Any] | None:
        if state.global_step == 0:
            return None
        entry = state.stateful_callbacks.get(type(self).__name__)
        if isinstance(entry, list):
            entry = entry[0] if entry else None
        if not isinstance(entry, dict):
            return None
        saved = entry.get("attributes", {}).get("saved_scaler_state")
        return saved if isinstance(saved, dict) else None

    # --------------------------------------------------------------- installing

    def _run_first(self) -> None:
        """Move this callback to the front of the Trainer's callbacks.

        The Trainer calls its report_to callbacks (TensorBoard, W&B…) before the user's; fields
        this callback adds in ``on_log`` would reach only those after it. The handler is the
        caller of every event method; a new list is bound so the loop now running is unaffected.
        """
        frame = sys._getframe(1)
        for _ in range(_HANDLER_SEARCH_DEPTH):
            if frame is None:
                return
            handler = frame.f_locals.get("self")
            if isinstance(handler, CallbackHandler):
                if handler.callbacks[0] is not self:
                    others = (cb for cb in handler.callbacks if cb is not self)
                    handler.callbacks = [self, *others]
                return
            frame = frame.f_back

    def on_init_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._run_first()

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._run_first()
        old = getattr(kwargs.get("optimizer"), "scaler", None)
        if old is None:
            self.scaler = None
            warnings.warn(
                "LossScaleCallback: this Trainer uses no loss scaler, so there is nothing to "
                "replace or log (accelerate builds one only for fp16 on a GPU or other "
                "accelerator, without DeepSpeed)",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        self.scaler = adopt_scaler(
            old,
            self._scaler_kwargs,
            carry_state=state.global_step > 0,
            saved_state=self._saved_state(state),
        )
        model = kwargs.get("model")
        if self.scaler.is_tracking_overflows() and model is not None:
            self.scaler.watch(model)
        stats = self.scaler.stats()
        self._seen_events = (stats.steps_below_one, stats.floor_hits)
        self._in_episode = False
        scheduler = kwargs.get("lr_scheduler")
        if self._skip_aware_schedule and scheduler is not None:
            self.schedule = make_skip_aware(scheduler, self.scaler)
            if self.schedule is not None:
                scheduler.get_last_lr = _peek_for_the_trainer(self.schedule)

    # --------------------------------------------------------------- the policy

    def _floor(self) -> float:
        min_scale = self._scaler_kwargs.get("min_scale")
        return -math.inf if min_scale is None else float(min_scale)

    def _below_one(
        self, state: TrainerState, control: TrainerControl, scale: float, floor_hit: bool
    ) -> None:
        if self._in_episode or self._policy == "ignore":
            return
        self._in_episode = True
        message = f"{below_one_message(scale)} (at step {state.global_step}). "
        message += _WHAT_TO_DO
        if self._policy == "raise":
            message = "stopping training: " + message
            control.should_training_stop = True
            control.should_log = True
            logger.error(message)
        self.below_one_message = message
        warnings.warn(message, ScaleBelowOneWarning, stacklevel=2)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.scaler is None or self._policy == "ignore":
            return
        scale = self.scaler.peek_scale()  # never waits
        if scale is None:
            return
        floor_hit = scale <= self._floor()
        if scale < 1.0 or floor_hit:
            self._below_one(state, control, scale, floor_hit and scale >= 1.0)
        else:
            self._in_episode = False

    # --------------------------------------------------------------- logging

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if self.scaler is None or logs is None:
            return
        if any(key.startswith(_METRIC_PREFIXES) for key in logs):
            return
        fields, stats = log_fields(self.scaler)
        events = (stats.steps_below_one, stats.floor_hits)
        if events != self._seen_events:
            floor_hit = events[1] != self._seen_events[1] and stats.scale >= 1.0
            self._seen_events = events
            self._below_one(state, control, stats.scale, floor_hit)
        # The Trainer copied the logs into its history before calling the callbacks.
        history = state.log_history[-1] if state.log_history else None
        if (
            history is not None
            and history.get("step") == state.global_step
            and history.keys() - {"step"} == logs.keys()
        ):
            history.update(fields)
        logs.update(fields)


def _peek_for_the_trainer(schedule: SkipAwareScheduler) -> Any:
    """``get_last_lr`` that answers the Trainer's per-step read with ``peek_last_lr()``.

    ``Trainer._get_learning_rate()`` runs after every optimizer step and reads a tensor LR with
    ``.item()``: on the device path, one sync per step. Every other caller (user code, and the
    Trainer's other reads) gets the exact ``get_last_lr()``.
    """

    def get_last_lr() -> list[float] | list[Any]:
        if sys._getframe(1).f_code is _TRAINER_LR_READ:
            peeked = schedule.peek_last_lr()
            if peeked is not None:
                return peeked
        return schedule.get_last_lr()

    return get_last_lr
