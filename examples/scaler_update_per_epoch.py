"""fp16 AMP with `scaler.update()` placed after the epoch's loop instead of after each step.

What to notice: `scaler.step(optimizer)` runs every step, but `scaler.update()` only once per
epoch (AMP005). torch's GradScaler ends an iteration at `update()`; the second `step()` on the
same optimizer raises "step() has already been called since the last update()". Run it on CPU
to see the error; `scaler_update_per_step.py` is the fixed version.
"""

import torch
from torch import nn


def train(model: nn.Module, loader, epochs: int = 2, device: str = "cpu") -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device)
    for epoch in range(epochs):
        for x, y in loader:
            with torch.autocast(device, dtype=torch.float16):
                loss = nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            optimizer.zero_grad(set_to_none=True)
        scaler.update()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
    train(nn.Linear(4, 1), batches)
