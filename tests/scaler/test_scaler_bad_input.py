"""Invalid arguments, malformed state dicts, pickling mid-iteration: clear errors, no half-apply."""

from __future__ import annotations

import copy
import math
import pickle

import pytest
import torch

from scaler import GradScaler


def stepped(scaler: GradScaler, overflow: bool = False) -> torch.optim.Optimizer:
    """One iteration up to (not including) update(); returns the optimizer."""
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([param], lr=0.1)
    scaler.scale(torch.ones(()))
    param.grad = torch.full((2,), float("inf") if overflow else 1.0)
    scaler.step(optimizer)
    return optimizer


# --------------------------------------------------------------------------- constructor

BAD_ARGUMENTS = [
    ({"growth_factor": 1.0}, AssertionError, "growth_factor=1.0"),
    ({"growth_factor": 0.5}, ValueError, "The growth factor must be > 1.0"),
    ({"growth_factor": float("inf")}, ValueError, "growth_factor must be a finite float"),
    ({"growth_factor": "2"}, ValueError, "growth_factor must be a finite float"),
    ({"backoff_factor": 1.0}, AssertionError, "The backoff factor must be < 1.0"),
    ({"backoff_factor": 0.0}, ValueError, "backoff_factor=0.0"),
    ({"backoff_factor": -0.5}, ValueError, "The backoff factor must be > 0.0"),
    ({"growth_interval": 0}, ValueError, "growth_interval must be an int >= 1"),
    ({"growth_interval": 2.5}, ValueError, "growth_interval must be an int >= 1"),
    ({"init_scale": 0.0}, ValueError, "init_scale must be a positive finite float"),
    ({"init_scale": -1.0}, ValueError, "init_scale must be a positive finite float"),
    ({"init_scale": float("nan")}, ValueError, "init_scale must be a positive finite float"),
    ({"init_scale": True}, ValueError, "init_scale must be a positive finite float"),
    ({"init_scale": 0.5, "min_scale": 1.0}, ValueError, "init_scale=0.5 is outside"),
    ({"init_scale": 8.0, "max_scale": 4.0}, ValueError, "init_scale=8.0 is outside"),
    ({"min_scale": 0.0}, ValueError, "min_scale must be >= 2\\*\\*-126"),
    ({"min_scale": float("inf")}, ValueError, "min_scale must be None or a finite float"),
    ({"max_scale": "big"}, ValueError, "max_scale must be None or a finite float"),
    ({"min_scale": 4.0, "max_scale": 2.0}, ValueError, "max_scale must be >= min_scale"),
    ({"hysteresis": 0}, ValueError, "hysteresis must be an int >= 1"),
    ({"hysteresis": 1.5}, ValueError, "hysteresis must be an int >= 1"),
    ({"below_one": "loud"}, ValueError, "below_one must be one of 'ignore', 'warn', 'raise'"),
    ({"enabled": "yes"}, ValueError, "enabled must be a bool"),
    ({"device": 3}, ValueError, "device must be a device type string"),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"), BAD_ARGUMENTS, ids=[str(case[0]) for case in BAD_ARGUMENTS]
)
def test_invalid_constructor_arguments_name_the_argument(kwargs, error, message) -> None:
    kwargs = {"device": "cpu", **kwargs}
    with pytest.raises(error, match=message):
        GradScaler(**kwargs)


def test_new_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        GradScaler("cpu", 2.0**16, 2.0, 0.5, 2000, True, 1.0)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("setter", "value"),
    [("set_growth_factor", 0.9), ("set_backoff_factor", 1.5), ("set_growth_interval", 0)],
)
def test_setters_validate_too(setter: str, value: float) -> None:
    scaler = GradScaler("cpu")
    with pytest.raises(ValueError, match="new_"):
        getattr(scaler, setter)(value)


def test_update_rejects_a_non_finite_float_new_scale() -> None:
    scaler = GradScaler("cpu")
    stepped(scaler)
    with pytest.raises(ValueError, match="new_scale must be a positive finite float"):
        scaler.update(float("nan"))


def test_update_keeps_a_nan_tensor_new_scale_finite_on_the_device() -> None:
    # A tensor's value cannot be checked without a sync: it is sanitised on the device instead.
    scaler = GradScaler("cpu", min_scale=2.0)
    stepped(scaler)
    scaler.update(torch.tensor(float("nan")))
    assert scaler.get_scale() == 2.0
    scaler.update(torch.tensor(float("inf")))
    assert math.isfinite(scaler.get_scale())


# --------------------------------------------------------------------------- state dict

GOOD = {
    "scale": 1024.0,
    "growth_factor": 2.0,
    "backoff_factor": 0.5,
    "growth_interval": 100,
    "_growth_tracker": 3,
}
MALFORMED = [
    ({k: v for k, v in GOOD.items() if k != "scale"}, "missing 'scale'"),
    ({"scale": 1.0}, "missing 'growth_factor', 'backoff_factor'"),
    ({**GOOD, "scale": "1024"}, r"state_dict\['scale'\] must be a finite float >= 0"),
    ({**GOOD, "scale": -1.0}, r"state_dict\['scale'\] must be a finite float >= 0"),
    ({**GOOD, "scale": -0.5}, r"state_dict\['scale'\] must be a finite float >= 0"),
    ({**GOOD, "scale": float("nan")}, r"state_dict\['scale'\] must be a finite float >= 0"),
    ({**GOOD, "scale": float("inf")}, r"state_dict\['scale'\] must be a finite float >= 0"),
    ({**GOOD, "growth_factor": 1.0}, r"state_dict\['growth_factor'\]"),
    ({**GOOD, "backoff_factor": 2.0}, r"state_dict\['backoff_factor'\]"),
    ({**GOOD, "growth_interval": "100"}, r"state_dict\['growth_interval'\] must be an int"),
    ({**GOOD, "_growth_tracker": -1}, r"state_dict\['_growth_tracker'\] must be an int >= 0"),
    ({**GOOD, "_growth_tracker": 1.5}, r"state_dict\['_growth_tracker'\] must be an int >= 0"),
    ({**GOOD, "_hysteresis_tracker": -2}, r"state_dict\['_hysteresis_tracker'\]"),
    ({**GOOD, "_ampscale_stats": [1, 2]}, r"state_dict\['_ampscale_stats'\] must be a dict"),
    (
        {**GOOD, "_ampscale_stats": {"counters": [0], "scale_range": [1.0, 1.0]}},
        r"\['counters'\] must be 6 ints",
    ),
    (
        {**GOOD, "_ampscale_stats": {"counters": [0] * 6, "scale_range": [0.0, 1.0]}},
        r"\['scale_range'\] must be 2 positive finite floats",
    ),
]


@pytest.mark.parametrize("initialised", [False, True], ids=["before_scale", "after_scale"])
@pytest.mark.parametrize(("bad", "message"), MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_state_dict_is_rejected_and_nothing_is_applied(bad, message, initialised):
    scaler = GradScaler("cpu", init_scale=8.0, growth_interval=5)
    if initialised:
        stepped(scaler)
        scaler.update()
    before = scaler.state_dict()
    with pytest.raises(ValueError, match=message):
        scaler.load_state_dict(bad)
    assert scaler.state_dict() == before


def test_non_dict_and_empty_state_dicts() -> None:
    scaler = GradScaler("cpu")
    with pytest.raises(ValueError, match="state_dict must be a dict, got list"):
        scaler.load_state_dict([("scale", 1.0)])  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        scaler.load_state_dict({})


def test_a_collapsed_torch_scale_below_the_floor_is_raised_to_it() -> None:
    scaler = GradScaler("cpu")
    scaler.load_state_dict({**GOOD, "scale": 2.0**-130})
    assert scaler.get_scale() == 2.0**-126


# --------------------------------------------------------------------------- pickling


def test_pickling_mid_iteration_is_an_error() -> None:
    scaler = GradScaler("cpu")
    stepped(scaler)
    with pytest.raises(RuntimeError, match="may only be pickled at the beginning"):
        pickle.dumps(scaler)
    with pytest.raises(AssertionError, match="may only be pickled at the beginning"):
        copy.deepcopy(scaler)


def test_pickling_between_iterations_round_trips() -> None:
    scaler = GradScaler("cpu", growth_interval=3, hysteresis=2, min_scale=1.0)
    for overflow in (True, True, False):
        stepped(scaler, overflow)
        scaler.update()
    clone = pickle.loads(pickle.dumps(scaler))
    assert clone.state_dict() == scaler.state_dict()
    assert clone.get_scale() == 2.0**15
    for scaler_ in (scaler, clone):  # and both continue identically
        stepped(scaler_, overflow=True)
        scaler_.update()
    assert clone.state_dict() == scaler.state_dict()
