"""``ScalerStats``: what the scaler has been through, read all at once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ScalerStats:
    """A snapshot of the scaler's monitoring counters (``GradScaler.stats()``).

    Counters are kept on the device and advanced inside ``update()`` without a sync; reading
    them is one device-to-host copy, so read them at a log interval, not every step. A non-zero
    ``steps_below_one`` or ``floor_hits`` means gradients overflow fp16 whatever the scale.

    Example::

        if step % 100 == 0:
            stats = scaler.stats()
            log(scale=stats.scale, skipped=stats.skipped_steps, below_one=stats.steps_below_one)
    """

    #: The current scale.
    scale: float
    #: ``update()`` calls that advanced the scale (not ``update(new_scale)``).
    steps: int
    #: Of those, iterations in which some optimizer found inf/NaN and skipped its step.
    skipped_steps: int
    #: Consecutive skipped iterations up to the latest one (0 after a clean one).
    overflow_streak: int
    #: The longest such run so far.
    longest_overflow_streak: int
    #: Updates that wanted a scale below the floor (``min_scale``, or the 2**-126 safety floor).
    floor_hits: int
    #: The smallest scale after any update (or the initial scale).
    min_scale_seen: float
    #: The largest scale after any update (or the initial scale).
    max_scale_seen: float
    #: Updates that left the scale below 1.
    steps_below_one: int
    #: With ``track_overflows=True``, the gradient tensors that have held an inf or NaN in at
    #: least one step so far (``overflow_report()`` says which); None when tracking is off.
    #: Not restored from a checkpoint: it counts from the start of this process's tracking.
    overflowed_tensors: int | None = None

    @property
    def skip_rate(self) -> float:
        """The fraction of iterations skipped (0.0 before the first update)."""
        return self.skipped_steps / self.steps if self.steps else 0.0
