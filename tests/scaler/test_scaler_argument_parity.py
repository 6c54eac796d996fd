"""Constructor arguments: what torch accepts, ours accepts; what ours rejects, it rejects anywhere.

Issue 15: ``growth_interval=2.0`` and ``init_scale=torch.tensor(4.)`` raised in ours where torch
trains with them, and ``GradScaler("cuda", init_scale=-1)`` passed on a CPU-only machine because
the scaler disabled itself before checking its arguments.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from scaler_harness import run_pattern

import scaler._grad_scaler as grad_scaler_module
from scaler import GradScaler

PATTERN = "..x...x.."

#: Values torch 2.13's constructor takes and trains with, and the plain value they stand for.
ACCEPTED_LIKE_TORCH = [
    ("init_scale", torch.tensor(4.0), 4.0),
    ("init_scale", torch.tensor(4, dtype=torch.int64), 4.0),
    ("init_scale", np.float32(4.0), 4.0),
    ("init_scale", 4, 4.0),
    ("growth_factor", torch.tensor(3.0), 3.0),
    ("growth_factor", np.float64(3.0), 3.0),
    ("growth_factor", 3, 3.0),
    ("backoff_factor", torch.tensor(0.25), 0.25),
    ("growth_interval", torch.tensor(2), 2),
    ("growth_interval", np.int64(2), 2),
    # torch accepts this one in the constructor and then fails in update() ("argument
    # 'growth_interval' must be int, not float"): a whole float from a YAML/JSON config is an
    # int to the user, so ours takes it as one.
    ("growth_interval", 2.0, 2),
]


@pytest.mark.parametrize(
    ("name", "value", "plain"),
    ACCEPTED_LIKE_TORCH,
    ids=[f"{name}={type(value).__name__}" for name, value, _ in ACCEPTED_LIKE_TORCH],
)
def test_values_torch_accepts_train_like_torch_with_the_plain_value(name, value, plain) -> None:
    expected = run_pattern(
        torch.amp.GradScaler("cpu", **{"growth_interval": 3, name: plain}), PATTERN
    )
    kwargs = {"growth_interval": 3, name: value}
    assert run_pattern(GradScaler("cpu", **kwargs), PATTERN) == expected
    if not (name == "growth_interval" and isinstance(value, float)):  # see the table
        assert run_pattern(torch.amp.GradScaler("cpu", **kwargs), PATTERN) == expected


def test_state_dict_of_a_torch_scaler_built_with_tensors_loads_into_ours() -> None:
    theirs = torch.amp.GradScaler("cpu", growth_factor=torch.tensor(3.0), growth_interval=2)
    run_pattern(theirs, PATTERN)
    ours = GradScaler("cpu")
    ours.load_state_dict(theirs.state_dict())
    assert ours.get_growth_factor() == 3.0
    assert type(ours.get_growth_factor()) is float
    assert ours.get_scale() == theirs.get_scale()


@pytest.mark.parametrize(
    ("setter", "value", "getter", "plain"),
    [
        ("set_growth_interval", 2.0, "get_growth_interval", 2),
        ("set_growth_interval", torch.tensor(7), "get_growth_interval", 7),
        ("set_growth_factor", torch.tensor(4.0), "get_growth_factor", 4.0),
        ("set_backoff_factor", np.float32(0.25), "get_backoff_factor", 0.25),
    ],
)
def test_setters_take_what_torch_takes_as_plain_numbers(setter, value, getter, plain) -> None:
    scaler = GradScaler("cpu")
    getattr(scaler, setter)(value)
    assert getattr(scaler, getter)() == plain
    assert type(getattr(scaler, getter)()) is type(plain)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"init_scale": -1.0}, "init_scale must be a positive finite float"),
        ({"growth_factor": 0.5}, "The growth factor must be > 1.0"),
        ({"backoff_factor": 1.5}, "The backoff factor must be < 1.0"),
        ({"growth_interval": 0}, "growth_interval must be an int >= 1"),
        ({"growth_interval": 2.5}, "growth_interval must be an int >= 1"),
        ({"min_scale": 0.0}, "min_scale must be >= 2"),
        ({"hysteresis": 0}, "hysteresis must be an int >= 1"),
    ],
)
@pytest.mark.parametrize("disabled_by", ["cuda-unavailable", "enabled=False"])
def test_arguments_are_checked_before_the_scaler_disables_itself(
    monkeypatch, kwargs, message, disabled_by
) -> None:
    # The same answer on a GPU machine and on a CPU-only CI runner.
    monkeypatch.setattr(grad_scaler_module, "_cuda_definitely_unavailable", lambda: True)
    device, enabled = ("cuda", True) if disabled_by == "cuda-unavailable" else ("cpu", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rejected before any "CUDA is not available" warning
        with pytest.raises(ValueError, match=message):
            GradScaler(device, enabled=enabled, **kwargs)


def test_a_valid_cuda_scaler_without_cuda_still_warns_and_disables(monkeypatch) -> None:
    monkeypatch.setattr(grad_scaler_module, "_cuda_definitely_unavailable", lambda: True)
    with pytest.warns(UserWarning, match="CUDA is not available.  Disabling."):
        scaler = GradScaler("cuda", init_scale=2.0**10, growth_interval=2.0)
    assert not scaler.is_enabled()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"init_scale": 10**400}, "init_scale must be a positive finite float"),
        ({"growth_factor": 10**400}, "growth_factor must be a finite float"),
        ({"growth_interval": 2**63}, r"growth_interval must be an int <= 2\*\*63 - 1"),
        ({"hysteresis": 2**31}, r"hysteresis must be an int <= 2\*\*31 - 1"),
        ({"init_scale": torch.tensor([4.0, 4.0])}, "init_scale must be a positive finite float"),
        ({"init_scale": torch.tensor(True)}, "init_scale must be a positive finite float"),
        ({"growth_interval": torch.tensor(2.5)}, "growth_interval must be an int >= 1"),
    ],
)
def test_huge_numbers_and_odd_tensors_name_the_argument(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        GradScaler("cpu", **kwargs)
