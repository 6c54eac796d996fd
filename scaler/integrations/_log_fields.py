"""The fields every integration adds to the training logs, read without a per-step sync."""

from __future__ import annotations

from scaler._grad_scaler import GradScaler
from scaler._stats import ScalerStats

#: Logged names, in the order they appear.
LOG_FIELDS: tuple[str, ...] = ("loss_scale", "skipped_steps", "steps_below_one", "floor_hits")


def log_fields(scaler: GradScaler) -> tuple[dict[str, float], ScalerStats]:
    """The logged values, and the stats they came from.

    The scale is ``peek_scale()`` (never waits; on CUDA usually the previous step's value) and,
    before any copy has landed, the value ``stats()`` just read. ``stats()`` is one small
    device-to-host copy — none when the found-inf flags already reached the host in ``step()`` —
    so call this at a log interval, where the framework reads the loss anyway.
    """
    peeked = scaler.peek_scale()
    stats = scaler.stats()
    fields = {
        "loss_scale": stats.scale if peeked is None else peeked,
        "skipped_steps": stats.skipped_steps,
        "steps_below_one": stats.steps_below_one,
        "floor_hits": stats.floor_hits,
    }
    return fields, stats
