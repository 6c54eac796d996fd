"""fp16 AMP with gradient accumulation and clipping, unscaling on every micro-batch.

What to notice: `scaler.unscale_(optimizer)` runs after every backward, but `scaler.step()` and
`scaler.update()` only every `accumulation_steps` batches. The first batch unscales; the second
unscales again before any `update()`, and torch raises `RuntimeError: unscale_() has already been
called on this optimizer since the last update()` (Swin-Transformer#311 in three lines). amp-lint
reports the unscale (AMP013). Moving the unscale and the clip under the accumulation boundary,
next to `step`, fixes it. Runs on the CPU.
"""

import torch
from torch import nn


def train(batches: int = 8, accumulation_steps: int = 4, device: str = "cpu") -> int:
    """The number of optimizer steps taken."""
    torch.manual_seed(0)
    data = [torch.randn(32, 16, device=device) for _ in range(batches)]
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler(device)
    steps = 0
    for index, x in enumerate(data):
        with torch.autocast(device, dtype=torch.float16):
            loss = model(x).float().pow(2).mean() / accumulation_steps
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if (index + 1) % accumulation_steps == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            steps += 1
    return steps


if __name__ == "__main__":
    print(f"{train()} optimizer steps")
