"""Which optimizers' fused GradScaler path we trust, with the evidence.

Optimizers that set ``_step_supports_amp_scaling`` receive the scale and the found-inf flag and
are expected to unscale and skip inside their own kernel, with no host sync. That is only safe if
a skipped step leaves every bit of optimizer state as if the step had never been called. When it
does not, we decide that step on the host: check the gradients, read the flag (one sync, as for
a non-fused optimizer) and call the fused ``step()`` only when they are finite; its kernel still
unscales them, so fp16 parameters work as on torch's fused path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch


@dataclass(frozen=True, slots=True)
class FusedVerdict:
    """Whether one optimizer class's fused path honours ``found_inf`` on torch 2.13 CPU."""

    #: The optimizer class, as ``torch.optim`` spells it.
    optimizer: str
    #: "always", or "once its momentum buffers exist" (checked per step, on the host).
    trusted: Literal["always", "after-momentum-init"]
    #: What we measured (tests/scaler/test_fused_support.py reproduces it).
    evidence: str


FUSED_VERDICTS: dict[str, FusedVerdict] = {
    verdict.optimizer: verdict
    for verdict in (
        FusedVerdict(
            "Adam",
            "always",
            "state is zero-initialised before the kernel and the step count is decremented "
            "when found_inf is set; a skipped first step then matches foreach within 3e-8",
        ),
        FusedVerdict("AdamW", "always", "same kernel family as Adam; same measurement"),
        FusedVerdict(
            "Adagrad",
            "always",
            "a skipped first step leaves parameters equal to foreach, bit for bit",
        ),
        FusedVerdict(
            "SGD",
            "after-momentum-init",
            "with momentum, a skipped first step allocates momentum buffers with empty_like, the "
            "kernel returns before writing them, and they are kept in the optimizer state; the "
            "next real step uses the garbage (10 of 10 trials deviated from foreach by 0.59 to "
            "5e34). Once the buffers exist, a skipped step leaves them untouched",
        ),
    )
}


def fused_step_is_safe(optimizer: torch.optim.Optimizer) -> bool:
    """Whether this step may use the optimizer's fused found_inf handling (no sync).

    Unknown optimizers that opt into the contract are trusted, as torch does.
    """
    verdict = FUSED_VERDICTS.get(type(optimizer).__name__)
    if verdict is None or type(optimizer).__module__.split(".")[0] != "torch":
        return True
    if verdict.trusted == "always":
        return True
    return all(_momentum_ready(optimizer, group) for group in optimizer.param_groups)


def _momentum_ready(optimizer: torch.optim.Optimizer, group: dict) -> bool:
    # torch's fused SGD treats a step as the first one when no parameter has a buffer yet.
    if group.get("momentum", 0) == 0:
        return True
    for param in group["params"]:
        if param.grad is not None:
            return optimizer.state.get(param, {}).get("momentum_buffer") is not None
    return True
