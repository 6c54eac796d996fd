"""An optimizer wrapper that hides AMP from the training loop, and reads the scale in `step()`.

What to notice: the loop below only calls `optimizer.step()`; the sync is inside the wrapper.
After every update the wrapper asks `get_scale()` whether the step was skipped (the scale went
down), so every step stalls the GPU twice. amp-lint follows the wrapper's `step()` and reports
both reads (AMP001). ampscale's `GradScaler.step_skipped(optimizer)` answers the same question
with a device-side flag.
"""

import torch
from torch import nn


class AmpOptimizer:
    """Wraps an optimizer with fp16 loss scaling; counts skipped steps for the logs."""

    def __init__(self, optimizer: torch.optim.Optimizer, init_scale: float = 2.0**16) -> None:
        self.optimizer = optimizer
        self.scaler = torch.amp.GradScaler("cuda", init_scale=init_scale)
        self.skipped_steps = 0

    def backward(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()

    def step(self) -> None:
        self.scaler.unscale_(self.optimizer)
        nn.utils.clip_grad_norm_(
            (p for group in self.optimizer.param_groups for p in group["params"]), 1.0
        )
        scale_before = self.scaler.get_scale()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.scaler.get_scale() < scale_before:
            self.skipped_steps += 1
        self.optimizer.zero_grad(set_to_none=True)


def train(model: nn.Module, loader, epochs: int = 1) -> int:
    optimizer = AmpOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-4))
    for _epoch in range(epochs):
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            optimizer.backward(loss)
            optimizer.step()
    return optimizer.skipped_steps
