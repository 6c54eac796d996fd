"""What the host does once it learns, without a stall, that the scale fell below 1.

The device only records the event (a flag set inside ``update()``); this module turns a recorded
event into a warning or an exception at the next point where the host already holds the value:
``peek_scale()``, ``get_scale()``, ``stats()`` or an explicit ``check()`` (and, for "warn" only,
``state_dict()``: saving a checkpoint, or pickling, never raises for the policy, so that a
collapsing run can still be saved; "raise" raises at the next of the others instead).
"""

from __future__ import annotations

from typing import Literal

from scaler._user_warnings import warn_at_caller

#: The accepted values of ``GradScaler(below_one=...)``.
BelowOnePolicy = Literal["ignore", "warn", "raise"]
BELOW_ONE_POLICIES: tuple[str, ...] = ("ignore", "warn", "raise")


class ScaleBelowOneWarning(UserWarning):
    """The loss scale fell below 1 (or hit ``min_scale``): the model overflows fp16 at any scale.

    A dedicated class so that training code can filter it (``warnings.simplefilter``) or turn it
    into an error without touching other warnings.
    """


class ScaleBelowOneError(RuntimeError):
    """Raised by ``below_one="raise"`` once the host learns that the scale fell below 1."""


def below_one_message(scale: float) -> str:
    """The text of the warning or error: what happened, why, and what to do.

    An event at or above 1 can only be a floor hit (a ``min_scale`` >= 1 stopped the fall).
    """
    where = "hit the min_scale floor" if scale >= 1.0 else "fell below 1"
    return (
        f"the loss scale {where} (now {scale:g}): gradients overflow fp16 whatever the scale, "
        "which is typical of a model pretrained in bf16; train in bf16 or fp32, or check the "
        "model with check_fp16_compat()"
    )


def report_below_one(policy: BelowOnePolicy, scale: float) -> None:
    """Warn (at the user's line) or raise according to ``policy`` ("warn" or "raise")."""
    message = below_one_message(scale)
    if policy == "raise":
        raise ScaleBelowOneError(message)
    warn_at_caller(message, ScaleBelowOneWarning)
