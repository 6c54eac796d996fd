"""fp16 AMP with a resume checkpoint that leaves out the GradScaler's state.

What to notice: `save()` writes the model's and the optimizer's state, but not the scaler's. The
scaler learned a scale that fits this model's gradients during the first run; the resumed run
builds a new scaler, which starts again from `init_scale` (here 2**24, too large for fp16): its
first steps overflow and are skipped until the scale has come back down, and the growth
schedule starts over. amp-lint reports the save (AMP011) and the resume that never loads the
scaler's state; its unsafe fix (`--fix --unsafe-fixes`) adds `"scaler": scaler.state_dict()` to
the checkpoint. Compare with resume_with_scaler_state.py, which saves and restores the scaler and
resumes at the learned scale. Runs on the CPU.
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
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, file)


def resume(file):
    checkpoint = torch.load(file)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    model.load_state_dict(checkpoint["model"])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    optimizer.load_state_dict(checkpoint["optimizer"])
    return model, optimizer, torch.amp.GradScaler("cpu", init_scale=2.0**24)


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
    print(f"saved at scale {saved:g}, resumed at {resumed_at:g}: {skipped} steps skipped again")
