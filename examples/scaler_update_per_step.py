"""fp16 AMP with `scaler.update()` once per step: the fixed `scaler_update_per_epoch.py`.

What to notice: every iteration ends `scaler.step(optimizer)` with `scaler.update()`, so the
scale backs off after an overflow and grows after `growth_interval` clean steps, and the next
`step()` finds the optimizer ready. amp-lint reports nothing here.
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
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
    train(nn.Linear(4, 1), batches)
