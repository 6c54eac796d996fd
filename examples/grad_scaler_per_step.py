"""fp16 AMP where the GradScaler is created inside the step function, so it restarts every step.

What to notice: `train_step()` builds a new `GradScaler` for every batch. A scaler's whole job is
to remember: it halves the scale after an overflow and grows it after a run of clean steps. A new
one every step always starts from `init_scale` with no history. Here the initial scale (2**24)
overflows fp16 in the backward pass, so every step finds inf gradients and skips the optimizer
step: the model never trains, and nothing says so. amp-lint reports the constructor (AMP009).
Compare with grad_scaler_once.py, which creates the scaler once and trains. Runs on the CPU.
"""

import torch
from torch import nn


def make_batch(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(64, 32, generator=generator)
    return x, x.sum(dim=1, keepdim=True)


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x, y) -> float:
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**24)
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = nn.functional.mse_loss(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def train(steps: int = 40) -> tuple[float, float, bool]:
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    before = [p.detach().clone() for p in model.parameters()]
    losses = []
    for _ in range(steps):
        x, y = make_batch(generator)
        losses.append(train_step(model, optimizer, x, y))
    trained = any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
    return losses[0], losses[-1], trained


if __name__ == "__main__":
    first, last, trained = train()
    print(f"first loss {first:.3f} last loss {last:.3f} weights changed: {trained}")
