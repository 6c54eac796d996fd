"""A model cast to fp16 with `.half()`, then trained through a GradScaler.

What to notice: `.half()` makes the *parameters* fp16, so their gradients are fp16 too. A
GradScaler exists to unscale fp16-computed gradients of fp32 parameters, and refuses fp16 ones:
the first `scaler.step(optimizer)` raises `ValueError: Attempting to unscale FP16 gradients.`
amp-lint reports it at the cast (AMP008), with the scaler, the optimizer and the step as related
sites. The fix: keep the parameters in fp32 and let autocast compute in fp16
(fp32_params_fp16_autocast.py).

Runs on the CPU too (`python examples/fp16_params_under_grad_scaler.py`): it raises at step 1.
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
    model.half()  # "to save memory": the parameters the optimizer steps are now fp16
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in make_batches():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.float16):
            loss = loss_fn(model(x.to(device)), y.to(device))
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # ValueError: Attempting to unscale FP16 gradients.
        scaler.update()
    return loss.item()


if __name__ == "__main__":
    print(train())
