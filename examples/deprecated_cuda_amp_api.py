"""Mixed-precision training written against the deprecated `torch.cuda.amp` / `torch.cpu.amp` API.

What to notice: every name here still works, but since torch 2.4 each call prints a FutureWarning
("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use
`torch.amp.GradScaler('cuda', args...)` instead.") and the shims are slated for removal. amp-lint
reports the import of the deprecated names once, with their uses, and the spelled-out
`torch.cpu.amp.autocast()` where it is called (AMP004). `amp-lint --fix` rewrites both to
`torch.amp`, passing the device and turning positional arguments into keywords: `GradScaler(2.0**14,
...)` becomes `GradScaler("cuda", init_scale=2.0**14, ...)`, because `torch.amp.GradScaler` takes
the device first. The script runs on a CPU-only machine (CUDA AMP is then disabled), before and
after the fix.
"""

import torch
from torch import nn
from torch.cuda.amp import GradScaler, autocast


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))


def train(steps: int = 20) -> float:
    use_cuda = torch.cuda.is_available()
    device = "cuda" if use_cuda else "cpu"
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = GradScaler(2.0**14, enabled=use_cuda)

    for _step in range(steps):
        x = torch.randn(64, 32, device=device)
        y = x.sum(dim=1, keepdim=True)
        optimizer.zero_grad(set_to_none=True)
        with autocast(enabled=use_cuda):
            loss = nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    # Evaluate in bf16 on the CPU.
    model = model.cpu().eval()
    with torch.no_grad(), torch.cpu.amp.autocast():
        x = torch.randn(256, 32)
        return nn.functional.mse_loss(model(x).float(), x.sum(dim=1, keepdim=True)).item()


if __name__ == "__main__":
    print(f"eval loss {train():.4f}")
