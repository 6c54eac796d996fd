"""Plain fp16 AMP training loop that reads the loss scale on every step.

What to notice: `scaler.get_scale()` copies the scale from the GPU to the host, so the CPU waits
for every queued kernel to finish. It runs twice per step here — once to log, and once more to
find out whether `step()` was skipped — and each read stalls the pipeline. amp-lint reports both
reads (AMP001). Compare with fp16_log_every_n_steps.py.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader(batch_size: int = 32) -> DataLoader:
    features = torch.randn(4096, 128)
    labels = torch.randint(0, 10, (4096,))
    return DataLoader(TensorDataset(features, labels), batch_size=batch_size, shuffle=True)


def train(epochs: int = 3, device: str = "cuda") -> None:
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=1000)
    scaler = torch.amp.GradScaler("cuda")
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(epochs):
        for step, (x, y) in enumerate(make_loader()):
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()

            scale_before = scaler.get_scale()
            scaler.step(optimizer)
            scaler.update()
            # The usual way to detect a skipped step: compare the scale before and after update().
            if scaler.get_scale() >= scale_before:
                scheduler.step()

            print(f"epoch {epoch} step {step} loss {loss.item():.4f} scale {scale_before}")


if __name__ == "__main__":
    train()
