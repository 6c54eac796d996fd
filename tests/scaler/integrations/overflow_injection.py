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
