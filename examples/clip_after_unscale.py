"""fp16 AMP with gradient clipping done right: unscale_ first, then clip, then step.

What to notice: `scaler.unscale_(optimizer)` divides the gradients by the loss scale in place,
so `clip_grad_norm_` sees (and clips) their true norm; `scaler.step()` knows they are unscaled
and does not divide again. Compare with clip_before_unscale.py: same data, same seed, and the
loss here falls far lower. Runs on the CPU.
"""

import torch
from torch import nn


def train(steps: int = 60, device: str = "cpu", max_norm: float = 1.0) -> float:
    torch.manual_seed(0)
    x = torch.randn(512, 16, device=device)
    y = x @ torch.randn(16, 1, device=device) + 0.1 * torch.randn(512, 1, device=device)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler(device)
    for step in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.float16):
            loss = nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()
    print(f"gradient norm the clip saw at the last step: {norm.item():.3g}")
    final = nn.functional.mse_loss(model(x), y).item()
    print(f"final loss {final:.4f}")
    return final


if __name__ == "__main__":
    train()
