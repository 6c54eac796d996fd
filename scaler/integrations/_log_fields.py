"""The fields every integration adds to the training logs, read without a per-step sync."""

from __future__ import annotations

from scaler._grad_scaler import GradScaler
from scaler._stats import ScalerStats

#: Logged names, in the order they appear.
LOG_FIELDS: tuple[str, ...] = ("loss_scale", "skipped_steps", "steps_below_one", "floor_hits")
#: With ``track_overflows=True``, the rows of the overflow report each log carries: the first
#: tensors to overflow (four keys each, ``overflow/<name>/...``). More would crowd every log line;
#: ``scaler.overflow_report(top=...)`` gives them all.
LOGGED_OVERFLOW_ROWS = 3


def overflow_fields(scaler: GradScaler) -> dict[str, int | float]:
    """The top rows of the overflow report and its counts, flat, for a metrics logger; empty
    when the scaler does not track overflows. One host read (the report's), at a log step."""
    if not scaler.is_tracking_overflows():
        return {}
    return scaler.overflow_report(top=LOGGED_OVERFLOW_ROWS).to_dict()


def log_fields(scaler: GradScaler) -> tuple[dict[str, float], ScalerStats]:
    """The logged values, and the stats they came from.

    The scale is ``peek_scale()`` (never waits; on CUDA usually the previous step's value) and,
    before any copy has landed, the value ``stats()`` just read. ``stats()`` is one small
    device-to-host copy — none when the found-inf flags already reached the host in ``step()`` —
    so call this at a log interval, where the framework reads the loss anyway. With
    ``track_overflows=True`` the fields also carry ``overflow_fields()`` (one more read).
    """
    peeked = scaler.peek_scale()
    stats = scaler.stats()
    fields = {
        "loss_scale": stats.scale if peeked is None else peeked,
        "skipped_steps": stats.skipped_steps,
        "steps_below_one": stats.steps_below_one,
        "floor_hits": stats.floor_hits,
        **overflow_fields(scaler),
    }
    return fields, stats
