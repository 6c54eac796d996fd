"""Checks of constructor arguments and state dicts: clear errors, and nothing half-applied."""

from __future__ import annotations

import math
import numbers
from collections import abc
from typing import Any

import torch

from scaler import _scale_update
from scaler._errors import ScalerArgumentError
from scaler._scale_update import SAFETY_FLOOR

#: The keys of torch's state dict; ours adds underscore keys that torch's loader ignores.
TORCH_STATE_KEYS = (
    "scale",
    "growth_factor",
    "backoff_factor",
    "growth_interval",
    "_growth_tracker",
)
HYSTERESIS_KEY = "_hysteresis_tracker"
STATS_KEY = "_ampscale_stats"


def is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_growth_factor(value: object, name: str = "growth_factor") -> None:
    if not is_real(value) or not math.isfinite(value):
        raise ScalerArgumentError(f"{name} must be a finite float, got {value!r}")
    if value <= 1.0:
        raise ScalerArgumentError(f"The growth factor must be > 1.0. Got {name}={value!r}.")


def check_backoff_factor(value: object, name: str = "backoff_factor") -> None:
    if not is_real(value) or not math.isfinite(value):
        raise ScalerArgumentError(f"{name} must be a finite float, got {value!r}")
    if value >= 1.0:
        raise ScalerArgumentError(f"The backoff factor must be < 1.0. Got {name}={value!r}.")
    if value <= 0.0:
        raise ScalerArgumentError(f"The backoff factor must be > 0.0 ({name}={value!r}).")


def check_growth_interval(value: object, name: str = "growth_interval") -> None:
    if not is_int(value) or value < 1:
        raise ScalerArgumentError(f"{name} must be an int >= 1, got {value!r}")


def check_scale(name: str, value: object, floor: float, cap: float) -> float:
    if not is_real(value) or not math.isfinite(value) or value <= 0:
        raise ScalerArgumentError(f"{name} must be a positive finite float, got {value!r}")
    if value < floor or value > cap:
        raise ScalerArgumentError(
            f"{name}={value!r} is outside [min_scale, max_scale] = [{floor!r}, {cap!r}]"
        )
    return float(value)


def check_bounds(min_scale: object, max_scale: object) -> tuple[float | None, float | None]:
    for name, value in (("min_scale", min_scale), ("max_scale", max_scale)):
        if value is not None and (not is_real(value) or not math.isfinite(value)):
            raise ScalerArgumentError(f"{name} must be None or a finite float, got {value!r}")
    if min_scale is not None and min_scale < SAFETY_FLOOR:
        raise ScalerArgumentError(
            f"min_scale must be >= 2**-126 (the smallest scale whose fp32 reciprocal is "
            f"finite), got {min_scale!r}"
        )
    if max_scale is not None and max_scale < max(min_scale or 0.0, SAFETY_FLOOR):
        raise ScalerArgumentError(
            f"max_scale must be >= min_scale and >= 2**-126, got max_scale={max_scale!r}"
        )
    return (
        None if min_scale is None else float(min_scale),
        None if max_scale is None else float(max_scale),
    )


def fresh_stats(scale: float) -> dict[str, list]:
    return {"counters": [0] * _scale_update.N_COUNTERS, "scale_range": [scale, scale]}


def validate_state_dict(state_dict: abc.Mapping, hysteresis: int) -> dict[str, Any]:
    """Check every entry first, so that a bad dict changes nothing; returns clean values."""
    missing = [key for key in TORCH_STATE_KEYS if key not in state_dict]
    if missing:
        raise ScalerArgumentError(
            f"state_dict is missing {', '.join(map(repr, missing))}; a GradScaler state dict "
            f"has {', '.join(map(repr, TORCH_STATE_KEYS))}"
        )
    scale = state_dict["scale"]
    if isinstance(scale, torch.Tensor) and scale.numel() == 1:
        scale = scale.item()
    # 0.0 is what torch's scale collapses to after ~166 overflows in a row: such a checkpoint
    # loads, and the caller raises the scale to the floor, so the run can recover.
    if not is_real(scale) or not math.isfinite(scale) or scale < 0:
        raise ScalerArgumentError(f"state_dict['scale'] must be a finite float >= 0, got {scale!r}")
    check_growth_factor(state_dict["growth_factor"], "state_dict['growth_factor']")
    check_backoff_factor(state_dict["backoff_factor"], "state_dict['backoff_factor']")
    check_growth_interval(state_dict["growth_interval"], "state_dict['growth_interval']")
    growth_tracker = state_dict["_growth_tracker"]
    if not is_int(growth_tracker) or growth_tracker < 0:
        raise ScalerArgumentError(
            f"state_dict['_growth_tracker'] must be an int >= 0, got {growth_tracker!r}"
        )
    hysteresis_tracker = state_dict.get(HYSTERESIS_KEY, hysteresis)
    if not is_int(hysteresis_tracker) or hysteresis_tracker < 0:
        raise ScalerArgumentError(
            f"state_dict[{HYSTERESIS_KEY!r}] must be an int >= 0, got {hysteresis_tracker!r}"
        )
    stats = state_dict.get(STATS_KEY)
    if stats is not None:
        stats = validate_stats(stats)
    return {
        "scale": float(scale),
        "growth_factor": float(state_dict["growth_factor"]),
        "backoff_factor": float(state_dict["backoff_factor"]),
        "growth_interval": int(state_dict["growth_interval"]),
        "_growth_tracker": int(growth_tracker),
        HYSTERESIS_KEY: min(int(hysteresis_tracker), hysteresis),
        STATS_KEY: stats,
    }


def validate_stats(stats: object) -> dict[str, list]:
    where = f"state_dict[{STATS_KEY!r}]"
    if not isinstance(stats, abc.Mapping):
        raise ScalerArgumentError(f"{where} must be a dict, got {type(stats).__name__}")
    counters = stats.get("counters")
    scale_range = stats.get("scale_range")
    if (
        not isinstance(counters, (list, tuple))
        or len(counters) != _scale_update.N_COUNTERS
        or not all(is_int(v) and v >= 0 for v in counters)
    ):
        raise ScalerArgumentError(
            f"{where}['counters'] must be {_scale_update.N_COUNTERS} ints >= 0, got {counters!r}"
        )
    if (
        not isinstance(scale_range, (list, tuple))
        or len(scale_range) != 2
        or not all(is_real(v) and math.isfinite(v) and v > 0 for v in scale_range)
    ):
        raise ScalerArgumentError(
            f"{where}['scale_range'] must be 2 positive finite floats, got {scale_range!r}"
        )
    return {"counters": [int(v) for v in counters], "scale_range": [float(v) for v in scale_range]}
