"""fp16 AMP with a resume checkpoint that holds the GradScaler's state, and a resume that loads it.

The same training as resume_without_scaler_state.py, but `save()` writes `scaler.state_dict()`
beside the model's and the optimizer's state, and `resume()` loads it into the new scaler: the
resumed run continues at the scale the first run had learned instead of starting over from
`init_scale` and skipping steps until it is back. amp-lint reports nothing. Runs on the CPU.
"""

import io

import torch
from torch import nn


def make_batch(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(64, 32, generator=generator)
    return x, x.sum(dim=1, keepdim=True)


def run(model, optimizer, scaler, generator, steps: int) -> int:
    """Train ``steps`` steps; return how many the scaler skipped."""
    applied = []
    hook = optimizer.register_step_post_hook(lambda *_: applied.append(1))
    for _ in range(steps):
        x, y = make_batch(generator)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    hook.remove()
    return steps - len(applied)


def save(model, optimizer, scaler, file) -> None:
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict(),
        },
        file,
    )


def resume(file):
    checkpoint = torch.load(file)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    model.load_state_dict(checkpoint["model"])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    optimizer.load_state_dict(checkpoint["optimizer"])
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**24)
    scaler.load_state_dict(checkpoint["scaler"])
    return model, optimizer, scaler


def main(steps: int = 30) -> tuple[float, float, int]:
    """Train, save, resume; return (scale saved, scale resumed with, steps skipped after)."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**24)
    run(model, optimizer, scaler, generator, steps)
    file = io.BytesIO()
    save(model, optimizer, scaler, file)
    file.seek(0)
    model, optimizer, resumed = resume(file)
    resumed_at = resumed.get_scale()
    return scaler.get_scale(), resumed_at, run(model, optimizer, resumed, generator, steps)


if __name__ == "__main__":
    saved, resumed_at, skipped = main()
    print(f"saved at scale {saved:g}, resumed at {resumed_at:g}: {skipped} steps skipped after")
