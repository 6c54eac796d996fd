"""fp16 AMP that logs the gradient norm before the gradients are unscaled.

What to notice: after `scaler.scale(loss).backward()` every gradient is multiplied by the loss
scale, so the norm this script logs as "grad_norm" is the scale times the norm the optimizer
applies: inf at the first step (65536 overflows; the scaler skips the step and halves), then
32768 times too large, and the logged curve jumps whenever the scale moves.
amp-lint reports the read (AMP012). Calling `scaler.unscale_(optimizer)` before the read fixes
it; the norm read after `scaler.step(optimizer)` (which unscales in place) is the true one and is
not reported. Runs on the CPU.
"""

import torch
from torch import nn


def train(steps: int = 5, device: str = "cpu") -> tuple[list[tuple[float, float]], float]:
    """(logged norm, applied norm) per step, and the scale at the end."""
    torch.manual_seed(0)
    x = torch.randn(256, 16, device=device)
    y = x @ torch.randn(16, 1, device=device)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler(device)
    history = []
    for step in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.float16):
            loss = nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
        print(f"step {step} grad_norm {grad_norm.item():.4g}")
        scaler.step(optimizer)
        applied = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
        scaler.update()
        history.append((grad_norm.item(), applied.item()))
    return history, scaler.get_scale()


if __name__ == "__main__":
    history, scale = train()
    for logged, applied in history:
        print(f"logged {logged:.4g}, applied {applied:.4g}, ratio {logged / applied:.0f}")
    print(f"final scale {scale:.0f}")
