"""Shared pieces of the scaler tests: tiny models, a training step, sync counting."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from scaler import SyncCounter

OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": lambda params, **kw: torch.optim.SGD(params, lr=0.05, momentum=0.9, **kw),
    "adam": lambda params, **kw: torch.optim.Adam(params, lr=1e-2, **kw),
    "adamw": lambda params, **kw: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, **kw),
}
#: Keyword arguments selecting the for-loop, foreach and fused implementations.
MODES: dict[str, dict[str, bool]] = {
    "forloop": {"foreach": False},
    "foreach": {"foreach": True},
    "fused": {"fused": True},
}


def make_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def twin(model: torch.nn.Module) -> torch.nn.Module:
    return copy.deepcopy(model)


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1000 + step)
    return torch.randn(32, 8, generator=generator), torch.randn(32, 4, generator=generator)


def forward_backward(model: torch.nn.Module, scaler, step: int) -> None:
    """One fp16-autocast forward and a scaled backward on CPU."""
    inputs, target = batch(step)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = torch.nn.functional.mse_loss(model(inputs).float(), target)
    scaler.scale(loss).backward()


def poison_grads(model: torch.nn.Module, value: float) -> None:
    """Write an inf or NaN into one gradient element, as an fp16 overflow would."""
    grad = next(p for p in model.parameters() if p.grad is not None).grad
    grad.view(-1)[3] = value


def scale_to_overflow(model: torch.nn.Module) -> None:
    """Set every gradient to inf, the way a model that overflows at any scale behaves."""
    for param in model.parameters():
        param.grad = torch.full_like(param, float("inf"))


def run_pattern(
    scaler, pattern: str, read_scale: Callable[[object], float] | None = None
) -> list[float]:
    """Steps with ``pattern`` ("x" = overflow, "." = clean); the scale after each, read with
    ``read_scale`` (default ``get_scale()``)."""
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([param], lr=0.1)
    history = []
    for char in pattern:
        scaler.scale(torch.ones(()))
        param.grad = torch.full((2,), float("inf") if char == "x" else 1.0)
        scaler.step(optimizer)
        scaler.update()
        history.append(read_scale(scaler) if read_scale else scaler.get_scale())
    return history


@contextmanager
def count_syncs() -> Iterator[SyncCounter]:
    with SyncCounter() as counter:
        yield counter


def assert_state_close(ours: torch.optim.Optimizer, theirs: torch.optim.Optimizer) -> None:
    """Parameters and every tensor of optimizer state equal within the parity tolerance."""
    for our_group, their_group in zip(ours.param_groups, theirs.param_groups, strict=True):
        for our_param, their_param in zip(our_group["params"], their_group["params"], strict=True):
            torch.testing.assert_close(our_param, their_param, atol=1e-7, rtol=1e-5)
            our_state, their_state = ours.state[our_param], theirs.state[their_param]
            assert our_state.keys() == their_state.keys()
            for key, value in our_state.items():
                if isinstance(value, torch.Tensor):
                    torch.testing.assert_close(value, their_state[key], atol=1e-7, rtol=1e-5)
                else:
                    assert value == their_state[key], key
