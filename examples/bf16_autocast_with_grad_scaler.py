"""bf16 autocast with a GradScaler kept from an fp16 recipe: scaling that buys nothing.

What to notice: every autocast here runs in bf16, whose exponent range is fp32's, so gradients
cannot underflow and need no loss scale. The GradScaler still multiplies the loss, unscales and
checks every gradient, and — with this non-fused optimizer — reads the found-inf flag on the host
in every `scaler.step()`: one device sync per step on a GPU. amp-lint reports the constructor
(AMP010). Compare with bf16_autocast_no_scaler.py. Runs on the CPU.
"""

import torch
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))


def train_step(model, optimizer, scaler: torch.amp.GradScaler, x, y) -> torch.Tensor:
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.mse_loss(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()


def train(steps: int = 50) -> float:
    torch.manual_seed(0)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    loss = torch.zeros(())
    for _ in range(steps):
        x = torch.randn(64, 32)
        loss = train_step(model, optimizer, scaler, x, x.sum(dim=1, keepdim=True))
    return loss.item()


if __name__ == "__main__":
    print(f"final loss {train():.3f}")
