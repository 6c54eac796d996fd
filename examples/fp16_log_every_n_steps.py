"""The same fp16 AMP loop, reading the loss scale only at a log interval.

What to notice: the scale is read (a device sync) once every `log_every` steps, under a periodic
guard, so the training loop runs without stalls in between. amp-lint reports nothing here.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader(batch_size: int = 32) -> DataLoader:
    features = torch.randn(4096, 128)
    labels = torch.randint(0, 10, (4096,))
    return DataLoader(TensorDataset(features, labels), batch_size=batch_size, shuffle=True)


def train(epochs: int = 3, log_every: int = 100, device: str = "cuda") -> None:
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler("cuda")
    loss_fn = nn.CrossEntropyLoss()

    global_step = 0
    for _epoch in range(epochs):
        for x, y in make_loader():
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            global_step += 1

            if global_step % log_every == 0:
                print(f"step {global_step} loss {loss.item():.4f} scale {scaler.get_scale():.1f}")


if __name__ == "__main__":
    train()
