"""What the host does once it learns, without a stall, that the scale fell below 1.

The device only records the event (a flag set inside ``update()``); this module turns a recorded
event into a warning or an exception at the next point where the host already holds the value:
``get_scale()``, ``state_dict()``, ``peek_scale()`` or an explicit ``check()``.
"""

from __future__ import annotations

import warnings
from typing import Literal

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


def below_one_message(scale: float, floor_hit: bool) -> str:
    """The text of the warning or error: what happened, why, and what to do."""
    where = "hit the min_scale floor" if floor_hit else "fell below 1"
    return (
        f"the loss scale {where} (now {scale:g}): gradients overflow fp16 whatever the scale, "
        "which is typical of a model pretrained in bf16; train in bf16 or fp32, or check the "
        "model with check_fp16_compat()"
    )


def report_below_one(policy: str, scale: float, floor_hit: bool, stacklevel: int = 3) -> None:
    """Warn or raise according to ``policy``; "ignore" does nothing."""
    if policy == "ignore":
        return
    message = below_one_message(scale, floor_hit)
    if policy == "raise":
        raise ScaleBelowOneError(message)
    warnings.warn(message, ScaleBelowOneWarning, stacklevel=stacklevel)
