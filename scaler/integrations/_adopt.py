"""Turn a framework's ``torch.amp.GradScaler`` into ampscale's, in place.

Frameworks keep their scaler in several places at once: accelerate in ``accelerator.scaler`` and
in every ``AcceleratedOptimizer`` it prepared, the HF ``Trainer`` through its accelerator, and
none of them lets a user hand one in. Replacing the *object* (its class and its attributes)
rather than the references reaches every holder at once, before or after ``prepare()``, without
knowing where they are. Our ``GradScaler`` subclasses torch's, so the object still passes the
frameworks' ``isinstance`` checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch
import torch.distributed as dist

from scaler._grad_scaler import GradScaler
from scaler._validation import TORCH_STATE_KEYS

#: Constructor settings that are part of the state dict: when the user names one, it wins over
#: the value carried from the framework's scaler or a checkpoint.
_GROWTH_SETTERS: dict[str, str] = {
    "growth_factor": "set_growth_factor",
    "backoff_factor": "set_backoff_factor",
    "growth_interval": "set_growth_interval",
}


def _process_group(old: torch.amp.GradScaler) -> Any:
    """FSDP's ShardedGradScaler all-reduces found-inf over its group; ours does with this."""
    group = getattr(old, "process_group", None)
    if group is None or not (dist.is_available() and dist.is_initialized()):
        return None
    return group


def adopt_scaler(
    old: torch.amp.GradScaler,
    scaler_kwargs: Mapping[str, Any],
    *,
    carry_state: bool,
    saved_state: Mapping[str, Any] | None = None,
) -> GradScaler:
    """Make ``old`` an ampscale ``GradScaler`` (the same object) and return it.

    The new scaler takes ``old``'s device, enabled flag and growth settings, overridden by
    ``scaler_kwargs``. With ``carry_state`` (training resumed or already under way, or no
    ``init_scale`` given) it also takes ``old``'s scale and growth tracker. ``saved_state``, our
    full state dict from a checkpoint (with the monitoring counters torch's loader dropped), is
    loaded on top when it matches what ``old`` loaded from the same checkpoint. A scaler that is
    already ours is returned unchanged. Call it between iterations.
    """
    if isinstance(old, GradScaler):
        return old
    if not isinstance(old, torch.amp.GradScaler):
        raise TypeError(
            f"expected a torch.amp.GradScaler to replace, got {type(old).__module__}."
            f"{type(old).__qualname__}"
        )
    if getattr(old, "_per_optimizer_states", None):
        raise RuntimeError(
            "the scaler can only be replaced between iterations (after scaler.update()), "
            "not between scale() and update()"
        )
    enabled = old.is_enabled()
    kwargs = dict(scaler_kwargs)
    current = old.state_dict() if enabled else {}
    constructor: dict[str, Any] = {"device": getattr(old, "_device", "cuda"), "enabled": enabled}
    if enabled:
        constructor.update(
            init_scale=current["scale"],
            growth_factor=current["growth_factor"],
            backoff_factor=current["backoff_factor"],
            growth_interval=current["growth_interval"],
        )
    group = _process_group(old)
    if group is not None:
        constructor["process_group"] = group
    constructor.update(kwargs)
    new = GradScaler(**constructor)
    if new.is_enabled() and enabled:
        if carry_state or "init_scale" not in kwargs:
            new.load_state_dict(current)
        if saved_state is not None and all(
            saved_state.get(key) == current.get(key) for key in TORCH_STATE_KEYS
        ):
            new.load_state_dict(dict(saved_state))
        for name, setter in _GROWTH_SETTERS.items():
            if name in kwargs:
                getattr(new, setter)(kwargs[name])
    # Nothing in a fresh GradScaler refers back to the object itself, so its attributes can move.
    old.__dict__.clear()
    old.__dict__.update(new.__dict__)
    old.__class__ = GradScaler
    return cast(GradScaler, old)
