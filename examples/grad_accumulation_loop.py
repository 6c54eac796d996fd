"""Gradient accumulation with fp16 AMP: which guard makes a scale read periodic, which does not.

What to notice: the read under the accumulation guard `(step + 1) % accum_steps == 0` runs on
every optimizer step — the guard only skips micro-batches — so it syncs the GPU all run long
(AMP001). The read under `optimizer_steps % log_every == 0` runs once per `log_every` optimizer
steps and is fine: amp-lint tells the two guards apart by their names.
"""

import torch
from torch import nn


def train(
    model: nn.Module,
    loader,
    accum_steps: int = 8,
    log_every: int = 100,
    device: str = "cuda",
) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler(device)
    optimizer_steps = 0
    for step, (x, y) in enumerate(loader):
        with torch.autocast(device, dtype=torch.float16):
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device)) / accum_steps
        scaler.scale(loss).backward()
        if (step + 1) % accum_steps == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            optimizer_steps += 1
            scale = scaler.get_scale()
            if optimizer_steps % log_every == 0:
                print(f"update {optimizer_steps}: loss {loss.item() * accum_steps:.4f}")
                print(f"update {optimizer_steps}: scale {scaler.get_scale():.0f} (was {scale})")
