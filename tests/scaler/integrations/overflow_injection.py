"""Make a module's output overflow, as a layer of a bf16-pretrained model does under fp16."""

from __future__ import annotations

import math
from typing import Any

import torch


class Overflow:
    """A forward hook that turns a module's output into inf for its next ``times`` training
    forwards (``times=-1``: forever), so the loss and every gradient are inf/NaN and the scaler
    must skip the step and back off, whatever the scale."""

    def __init__(self, module: torch.nn.Module, times: int = -1) -> None:
        self.remaining = times
        self.handle = module.register_forward_hook(self._hook)

    def _hook(self, module: torch.nn.Module, args: Any, output: Any) -> Any:
        if not module.training or self.remaining == 0:
            return None
        self.remaining -= 1
        return output * math.inf


class GradientOverflow:
    """A gradient hook that makes one parameter's gradient inf/NaN in the given steps (counted
    by its backward calls, from 0), as a backward pass that overflows fp16 in that layer does;
    the other parameters' gradients stay finite, so only this one can be named."""

    def __init__(self, param: torch.Tensor, steps: set[int]) -> None:
        self.steps = steps
        self.calls = 0
        self.handle = param.register_hook(self._hook)

    def _hook(self, grad: torch.Tensor) -> torch.Tensor | None:
        step, self.calls = self.calls, self.calls + 1
        return grad * math.inf if step in self.steps else None
