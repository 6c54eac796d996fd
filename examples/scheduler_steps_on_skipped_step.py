"""fp16 AMP with a warmup schedule stepped on every iteration, also on the steps that were skipped.

What to notice: the initial scale (2**24) overflows fp16 in the backward pass, so the first steps
find inf gradients: `scaler.step(optimizer)` skips the optimizer step and `update()` halves the
scale, until the scale fits. `scheduler.step()` runs anyway, so the learning-rate schedule counts
iterations, not optimizer steps: by the end, warmup has advanced for steps the model never took.
amp-lint reports the scheduler's step (AMP015) when asked, `amp-lint --extend-select AMP015
examples/`: the rule is off by default, as it fires on most AMP loops. Wrapping the scheduler in
`scaler.SkipAwareScheduler(scheduler, scaler)` keeps it in step with the optimizer. Runs on the CPU.
"""

import torch
from torch import nn


def make_batch(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(64, 32, generator=generator)
    return x, x.sum(dim=1, keepdim=True)


def train(steps: int = 40, warmup: int = 20) -> tuple[int, int]:
    """Train for ``steps`` iterations; return (scheduler steps, optimizer steps applied)."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**24)
    applied = []
    optimizer.register_step_post_hook(lambda *_: applied.append(1))
    for _ in range(steps):
        x, y = make_batch(generator)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    return scheduler.last_epoch, len(applied)


if __name__ == "__main__":
    scheduled, applied = train()
    print(f"the schedule advanced {scheduled} steps; the optimizer took {applied}")
