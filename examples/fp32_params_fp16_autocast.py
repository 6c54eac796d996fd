"""The same loop done right: fp32 parameters, fp16 compute under autocast, a GradScaler.

What to notice: the model stays fp32 (no `.half()`); autocast runs the matmuls in fp16 and the
GradScaler unscales the fp32 gradients before the optimizer steps fp32 weights. amp-lint reports
nothing here. Runs on the CPU (`python examples/fp32_params_fp16_autocast.py`).
"""

import torch
from torch import nn


def make_batches(count: int = 8, batch_size: int = 32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        (torch.randn(batch_size, 64, generator=generator), torch.randint(0, 4, (batch_size,)))
        for _ in range(count)
    ]


def train(device: str = "cpu") -> float:
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in make_batches():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.float16):
            loss = loss_fn(model(x.to(device)), y.to(device))
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return loss.item()


if __name__ == "__main__":
    print(train())
