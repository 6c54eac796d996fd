"""The same fp16 AMP training, with one GradScaler created before the loop and reused.

What to notice: the scaler lives as long as the training run. The initial scale (2**24)
overflows fp16 at first; `update()` halves it after each overflow, the same scaler carries the
smaller scale into the next step, and after a few skipped steps the model trains. amp-lint reports
nothing here. Compare with grad_scaler_per_step.py. Runs on the CPU.
"""

import torch
from torch import nn


def make_batch(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(64, 32, generator=generator)
    return x, x.sum(dim=1, keepdim=True)


def train_step(model, optimizer, scaler: torch.amp.GradScaler, x, y) -> float:
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
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**24)
    before = [p.detach().clone() for p in model.parameters()]
    losses = []
    for _ in range(steps):
        x, y = make_batch(generator)
        losses.append(train_step(model, optimizer, scaler, x, y))
    trained = any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
    return losses[0], losses[-1], trained


if __name__ == "__main__":
    first, last, trained = train()
    print(f"first loss {first:.3f} last loss {last:.3f} weights changed: {trained}")
