"""fp16 AMP where the loss is scaled but the optimizer is stepped directly.

What to notice: `scaler.scale(loss).backward()` multiplies every gradient by the loss scale
(65536 at the start), and `optimizer.step()` applies them as they are (AMP007): no unscaling,
no inf/NaN check. Run it on CPU: the weights jump by thousands and the loss explodes.
`amp-lint --unsafe-fixes --fix` turns the step into `scaler.step(optimizer)` followed by
`scaler.update()`, which trains normally.
"""

import torch
from torch import nn


def train(model: nn.Module, loader, device: str = "cpu") -> float:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device)
    for x, y in loader:
        with torch.autocast(device, dtype=torch.float16):
            loss = nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
    print(f"final loss {train(nn.Linear(4, 1), batches):.4g}")
