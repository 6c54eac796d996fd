"""Checks of constructor arguments and state dicts: clear errors, and nothing half-applied."""

from __future__ import annotations

import math
import numbers
from collections import abc
from typing import Any

import torch

from scaler import _scale_update
from scaler._errors import ScalerArgumentError, ScalerTypeError
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


#: The growth and hysteresis trackers are int32 tensors (as torch's growth tracker); the interval
#: is passed to torch's ``_amp_update_scale_`` as an int64.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def as_number(value: object) -> object:
    """A 1-element real tensor as a Python number (torch's constructor and setters take them:
    ``init_scale=torch.tensor(4.)`` works there); anything else unchanged. One read of the
    value, at configuration time only."""
    if (
        isinstance(value, torch.Tensor)
        and value.numel() == 1
        and value.device.type != "meta"
        and not value.dtype.is_complex
        and value.dtype is not torch.bool
    ):
        return value.item()
    return value


def finite_float(value: object) -> float | None:
    """``value`` as a finite float, or None (also for ints too large for a float)."""
    value = as_number(value)
    if not is_real(value):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def check_growth_factor(value: object, name: str = "growth_factor") -> float:
    number = finite_float(value)
    if number is None:
        raise ScalerArgumentError(f"{name} must be a finite float, got {value!r}")
    if number <= 1.0:
        raise ScalerArgumentError(f"The growth factor must be > 1.0. Got {name}={value!r}.")
    return number


def check_backoff_factor(value: object, name: str = "backoff_factor") -> float:
    number = finite_float(value)
    if number is None:
        raise ScalerArgumentError(f"{name} must be a finite float, got {value!r}")
    if number >= 1.0:
        raise ScalerArgumentError(f"The backoff factor must be < 1.0. Got {name}={value!r}.")
    if number <= 0.0:
        raise ScalerArgumentError(f"The backoff factor must be > 0.0 ({name}={value!r}).")
    return number


def check_count(value: object, name: str, low: int, high: int) -> int:
    """An int in [low, high]; a whole float (``2.0``, as from a config file) counts as one."""
    value_ = as_number(value)
    if isinstance(value_, float) and value_.is_integer():
        value_ = int(value_)
    if not is_int(value_) or value_ < low:
        raise ScalerArgumentError(f"{name} must be an int >= {low}, got {value!r}")
    if value_ > high:
        limit = "2**31 - 1" if high == INT32_MAX else "2**63 - 1"
        raise ScalerArgumentError(f"{name} must be an int <= {limit}, got {value!r}")
    return int(value_)


def check_growth_interval(value: object, name: str = "growth_interval") -> int:
    return check_count(value, name, 1, INT64_MAX)


def check_scale(name: str, value: object, floor: float, cap: float) -> float:
    number = finite_float(value)
    if number is None or number <= 0:
        raise ScalerArgumentError(f"{name} must be a positive finite float, got {value!r}")
    if number < floor or number > cap:
        raise ScalerArgumentError(
            f"{name}={value!r} is outside [min_scale, max_scale] = [{floor!r}, {cap!r}]"
        )
    return number


def check_optimizer(optimizer: object, method: str) -> None:
    """Before any bookkeeping, so that a wrong argument leaves no per-optimizer state behind
    (torch's scaler records one for ``id(optimizer)`` and then fails on ``param_groups``)."""
    if not hasattr(optimizer, "param_groups"):
        raise ScalerTypeError(
            f"{method}(optimizer): optimizer must be a torch.optim.Optimizer, got "
            f"{type(optimizer).__name__}"
        )


def check_report_top(top: object) -> int | None:
    """``overflow_report(top=...)``: how many rows, an int >= 1, or None for all of them."""
    if top is None:
        return None
    if not is_int(top) or top < 1:
        raise ScalerArgumentError(
            f"top must be an int >= 1 (the number of rows), or None for all, got {top!r}"
        )
    return int(top)


def check_bounds(min_scale: object, max_scale: object) -> tuple[float | None, float | None]:
    given = {"min_scale": min_scale, "max_scale": max_scale}
    for name, value in given.items():
        if value is not None and finite_float(value) is None:
            raise ScalerArgumentError(f"{name} must be None or a finite float, got {value!r}")
    min_scale, max_scale = (None if v is None else finite_float(v) for v in given.values())
    if min_scale is not None and min_scale < SAFETY_FLOOR:
        raise ScalerArgumentError(
            f"min_scale must be >= 2**-126 (the smallest scale whose fp32 reciprocal is "
            f"finite), got {min_scale!r}"
        )
    if max_scale is not None and max_scale < max(min_scale or 0.0, SAFETY_FLOOR):
        raise ScalerArgumentError(
            f"max_scale must be >= min_scale and >= 2**-126, got max_scale={max_scale!r}"
        )
    return min_scale, max_scale


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
    scale = as_number(state_dict["scale"])
    # 0.0 is what torch's scale collapses to after ~166 overflows in a row: such a checkpoint
    # loads, and the caller raises the scale to the floor, so the run can recover.
    if finite_float(scale) is None or scale < 0:
        raise ScalerArgumentError(f"state_dict['scale'] must be a finite float >= 0, got {scale!r}")
    hysteresis_tracker = state_dict.get(HYSTERESIS_KEY, hysteresis)
    stats = state_dict.get(STATS_KEY)
    return {
        "scale": float(scale),
        "growth_factor": check_growth_factor(
            state_dict["growth_factor"], "state_dict['growth_factor']"
        ),
        "backoff_factor": check_backoff_factor(
            state_dict["backoff_factor"], "state_dict['backoff_factor']"
        ),
        "growth_interval": check_growth_interval(
            state_dict["growth_interval"], "state_dict['growth_interval']"
        ),
        "_growth_tracker": check_count(
            state_dict["_growth_tracker"], "state_dict['_growth_tracker']", 0, INT32_MAX
        ),
        HYSTERESIS_KEY: min(
            check_count(hysteresis_tracker, f"state_dict[{HYSTERESIS_KEY!r}]", 0, INT32_MAX),
            hysteresis,
        ),
        STATS_KEY: None if stats is None else validate_stats(stats),
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
        or not all(is_int(v) and 0 <= v <= INT64_MAX for v in counters)
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
