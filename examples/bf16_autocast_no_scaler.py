"""bf16 autocast without a GradScaler: backpropagate and step directly.

What to notice: bf16 has fp32's exponent range, so the loss needs no scaling: `loss.backward()`
and `optimizer.step()` are all it takes, and no step waits on the host. amp-lint reports nothing
here. Compare with bf16_autocast_with_grad_scaler.py. Runs on the CPU.
"""

import torch
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))


def train_step(model, optimizer, x, y) -> torch.Tensor:
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.mse_loss(model(x).float(), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


def train(steps: int = 50) -> float:
    torch.manual_seed(0)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = torch.zeros(())
    for _ in range(steps):
        x = torch.randn(64, 32)
        loss = train_step(model, optimizer, x, x.sum(dim=1, keepdim=True))
    return loss.item()


if __name__ == "__main__":
    print(f"final loss {train():.3f}")
