"""ampscale's scaler in Lightning: ``precision_plugin()`` and the ``LossScaleMonitor`` callback.

Lightning accepts a scaler in its ``MixedPrecision`` plugin and saves its state in checkpoints;
``precision_plugin`` builds that plugin with ampscale's scaler (for the ``Trainer`` or, with
``fabric=True``, for ``Fabric``). ``LossScaleMonitor``, in the spirit of ``LearningRateMonitor``,
writes the scale and the scaler's counters to the trainer's loggers at ``log_every_n_steps``::

    trainer = Trainer(
        plugins=[precision_plugin("16-mixed", below_one="warn")],
        callbacks=[LossScaleMonitor()],
    )
"""

from __future__ import annotations

from typing import Any, Literal

from scaler._grad_scaler import GradScaler
from scaler._skip_aware_scheduler import make_skip_aware
from scaler.integrations._extras import require
from scaler.integrations._log_fields import log_fields

require("lightning", "lightning", "lightning")

from lightning.fabric.plugins.precision import (  # noqa: E402  (after the check naming the extra)
    MixedPrecision as FabricMixedPrecision,
)
from lightning.pytorch import Callback, LightningModule, Trainer  # noqa: E402
from lightning.pytorch.plugins.precision import MixedPrecision  # noqa: E402
from lightning.pytorch.utilities.exceptions import MisconfigurationException  # noqa: E402

__all__ = ["LossScaleMonitor", "SkipAwareMixedPrecision", "precision_plugin"]

#: ``LossScaleMonitor(logging_interval=...)`` values.
LOGGING_INTERVALS = ("step", "epoch")


class SkipAwareMixedPrecision(MixedPrecision):
    """Lightning's ``MixedPrecision`` whose per-step LR schedulers skip with a skipped step.

    Lightning steps a scheduler whether or not the scaler skipped the optimizer step (Lightning
    #21339). After each optimizer step this plugin makes the Trainer's schedulers with
    ``interval="step"`` skip-aware, in place (:class:`~scaler.SkipAwareScheduler`): with a fused
    optimizer, with no host read. Per-epoch schedules and ReduceLROnPlateau are left alone.
    """

    def optimizer_step(  # type: ignore[override]
        self, optimizer: Any, model: Any, closure: Any, **kwargs: Any
    ) -> Any:
        result = super().optimizer_step(optimizer, model=model, closure=closure, **kwargs)
        trainer = getattr(model, "_trainer", None)
        if trainer is not None and self.scaler is not None:
            for config in trainer.lr_scheduler_configs:
                if config.interval == "step":
                    make_skip_aware(config.scheduler, self.scaler)
        return result


def precision_plugin(
    precision: Literal["16-mixed"] = "16-mixed",
    device: str = "cuda",
    *,
    fabric: bool = False,
    skip_aware_schedule: bool = True,
    **scaler_kwargs: Any,
) -> MixedPrecision | FabricMixedPrecision:
    """Lightning's ``MixedPrecision`` plugin with ampscale's :class:`~scaler.GradScaler`.

    ``device`` is the autocast and scaler device ("cuda", "cpu"…); ``scaler_kwargs`` are the
    scaler's (``below_one``, ``min_scale``, ``hysteresis``, ``init_scale``…). Pass the result as
    ``Trainer(plugins=[...])``, or with ``fabric=True`` as ``Fabric(plugins=[...])``. Only fp16
    needs a loss scaler: for bf16 use ``precision="bf16-mixed"`` without this plugin. The
    scaler's state (with its counters) is saved in checkpoints and restored by ``ckpt_path=``.
    With ``skip_aware_schedule`` (the default; Trainer only) the per-step LR schedulers advance
    only for applied optimizer steps (:class:`SkipAwareMixedPrecision`). Fabric users step their
    scheduler themselves: wrap it in :class:`~scaler.SkipAwareScheduler`.
    """
    if precision != "16-mixed":
        raise ValueError(
            f"precision_plugin: precision must be '16-mixed', got {precision!r}; only fp16 needs "
            "a loss scaler (for bf16 pass precision='bf16-mixed' to the Trainer instead)"
        )
    scaler = GradScaler(device, **scaler_kwargs)
    if fabric:
        return FabricMixedPrecision(precision, device, scaler=scaler)
    plugin_class = SkipAwareMixedPrecision if skip_aware_schedule else MixedPrecision
    return plugin_class(precision, device, scaler=scaler)


class LossScaleMonitor(Callback):
    """Log the loss scale and the scaler's counters, like ``LearningRateMonitor`` logs the LR.

    Writes ``loss_scale``, ``skipped_steps`` (iterations whose optimizer step was skipped for
    inf/NaN gradients), ``steps_below_one`` and ``floor_hits`` to every logger of the trainer:
    with ``logging_interval="step"`` at the steps Lightning logs (``log_every_n_steps``), with
    ``"epoch"`` at the end of each training epoch. No per-step work, no tensors created: the
    scale is ``peek_scale()`` (never waits) and the counters one small copy per log. A scale
    below 1 and ``floor_hits`` mean the model overflows fp16 at any scale (see the
    ``below_one`` option of :func:`precision_plugin`).

    With ``precision_plugin(..., track_overflows=True)`` it also watches the LightningModule
    (:meth:`~scaler.GradScaler.watch`) and each of its logs carries ``tracked_tensors``,
    ``overflowed_tensors`` and the first three rows of :meth:`~scaler.GradScaler.overflow_report`
    as ``overflow/<parameter>/nonfinite_steps``, ``.../first_step``, ``.../last_step`` and
    ``.../max_abs``: which parameters' gradients overflowed, one more small read per log.

    Needs ampscale's scaler in the trainer (:func:`precision_plugin`) and at least one logger.
    """

    def __init__(self, logging_interval: Literal["step", "epoch"] = "step") -> None:
        if logging_interval not in LOGGING_INTERVALS:
            raise MisconfigurationException(
                f"LossScaleMonitor: logging_interval must be 'step' or 'epoch', "
                f"got {logging_interval!r}"
            )
        self.logging_interval = logging_interval
        self._scaler: GradScaler | None = None

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.loggers:
            raise MisconfigurationException(
                "LossScaleMonitor: the Trainer has no logger to write to (logger=False)"
            )
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        if not isinstance(scaler, GradScaler):
            found = "no loss scaler" if scaler is None else f"{type(scaler).__qualname__}"
            raise MisconfigurationException(
                f"LossScaleMonitor needs ampscale's GradScaler, but the Trainer has {found} "
                f"(precision={trainer.precision!r}); pass "
                "Trainer(plugins=[scaler.integrations.lightning.precision_plugin(...)])"
            )
        self._scaler = scaler
        if scaler.is_tracking_overflows():
            scaler.watch(pl_module)

    def _log(self, trainer: Trainer, step_offset: int = 0) -> None:
        if self._scaler is None:
            return
        fields, _ = log_fields(self._scaler)
        # The step Lightning's own metrics of this batch or epoch are logged at, so rows line up.
        step = trainer.fit_loop.epoch_loop._batches_that_stepped + step_offset
        for logger in trainer.loggers:
            logger.log_metrics(fields, step=step)

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.logging_interval == "step" and trainer._logger_connector.should_update_logs:
            self._log(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.logging_interval == "epoch":
            self._log(trainer, step_offset=-1)  # Lightning logs epoch metrics at the last step
