"""Run one scenario through ``torch.amp.GradScaler`` and through ours; compare what is seen."""

from __future__ import annotations

from collections import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from scaler import GradScaler

TorchScaler = torch.amp.GradScaler
TORCH_STATE_KEYS = (
    "scale",
    "growth_factor",
    "backoff_factor",
    "growth_interval",
    "_growth_tracker",
)
#: Our extra state-dict keys, which torch's loader ignores (a documented addition).
OUR_EXTRA_KEYS = {"_hysteresis_tracker", "_ampscale_stats"}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one scenario did with one scaler class: a value, or the exception it raised."""

    #: The scenario's return value (None when it raised).
    value: Any
    #: The exception raised, or None.
    error: BaseException | None


def outcome(scenario: Callable[[type], Any], scaler_class: type) -> Outcome:
    try:
        return Outcome(scenario(scaler_class), None)
    except Exception as error:  # the exception is the observation
        return Outcome(None, error)


def assert_same(ours: Any, theirs: Any, where: str = "result") -> None:
    """Equal values, recursively; tensors equal bit for bit (NaN equal to NaN), same dtype,
    device and shape; lazy iterables compared by their items."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, torch.Tensor), f"{where}: {type(ours).__name__} is not a tensor"
        mine = (ours.dtype, ours.device, ours.shape)
        other = (theirs.dtype, theirs.device, theirs.shape)
        assert mine == other, f"{where}: {mine} vs {other}"
        if theirs.device.type != "meta":
            torch.testing.assert_close(
                ours, theirs, rtol=0, atol=0, equal_nan=True, msg=f"{where} differs"
            )
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict), where
        assert list(ours) == list(theirs), f"{where}: keys {list(ours)} vs {list(theirs)}"
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs), f"{where}: {type(ours)} vs {type(theirs)}"
        assert len(ours) == len(theirs), f"{where}: length {len(ours)} vs {len(theirs)}"
        for i, (mine, other) in enumerate(zip(ours, theirs, strict=True)):
            assert_same(mine, other, f"{where}[{i}]")
    elif isinstance(theirs, abc.Iterator):
        assert type(ours) is type(theirs), f"{where}: {type(ours)} vs {type(theirs)}"
        assert_same(list(ours), list(theirs), where)
    else:
        assert type(ours) is type(theirs), f"{where}: {type(ours)} vs {type(theirs)}"
        assert ours == theirs, f"{where}: {ours!r} vs {theirs!r}"


def same_words(ours: str, theirs: str) -> bool:
    """The same message up to runs of whitespace, which some torch versions leave in.

    torch 2.4 builds ``update(new_scale)``'s message from a backslash-continued string literal,
    which keeps the next line's indentation: "...torch.cuda.FloatTensor or" and
    "torch.FloatTensor with requires_grad=False." are 21 spaces apart (torch/amp/grad_scaler.py,
    line 496 in 2.4.1); 2.13 has one space there. Only whitespace may differ.
    """
    return ours == theirs or ours.split() == theirs.split()


def assert_same_outcome(scenario: Callable[[type], Any]) -> Any:
    """Both scalers return equal values, or both raise: ours an instance of torch's exception
    type (ours may be a subclass that also says more precisely what went wrong) with the very
    same message. Returns torch's value."""
    theirs = outcome(scenario, TorchScaler)
    ours = outcome(scenario, GradScaler)
    if theirs.error is not None:
        assert ours.error is not None, f"torch raised {theirs.error!r}; ours gave {ours.value!r}"
        assert isinstance(ours.error, type(theirs.error)), (ours.error, theirs.error)
        assert same_words(str(ours.error), str(theirs.error)), (ours.error, theirs.error)
        return None
    assert ours.error is None, f"ours raised {ours.error!r}, torch returned {theirs.value!r}"
    assert_same(ours.value, theirs.value)
    return theirs.value


def torch_keys(state_dict: dict[str, Any]) -> dict[str, Any]:
    """Our state dict without our documented extra keys (checked to be only those)."""
    assert set(state_dict) - set(TORCH_STATE_KEYS) <= OUR_EXTRA_KEYS
    return {key: state_dict[key] for key in state_dict if key not in OUR_EXTRA_KEYS}


def linear(seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(3, 2).to(dtype)


def sgd(model: torch.nn.Module, **kwargs: Any) -> torch.optim.SGD:
    return torch.optim.SGD(model.parameters(), lr=0.1, **kwargs)


def backward(scaler, model: torch.nn.Module, step: int = 0) -> None:
    """A deterministic scaled backward through ``model``."""
    inputs = torch.arange(12, dtype=torch.float32).reshape(4, 3) / (3.0 + step)
    scaler.scale(model(inputs.to(model.weight.dtype)).float().pow(2).sum()).backward()
