"""What a GradScaler rebuilt every epoch costs: skipped optimizer steps, side by side.

AMP009 leaves a scaler re-created once per epoch unreported (issue 20 asked for the evidence).
This runs torch's own ``torch.amp.GradScaler("cpu")`` on CPU through many steps whose gradients
overflow fp16 above a known scale, once with one scaler for the whole run and once with a new
scaler at every epoch, and counts the steps ``scaler.step`` skips (inf/nan gradients). The
gradients pass through fp16 (``grad.half().float()``), so a scaled gradient above 65504 is
inf exactly as on a GPU in fp16; their size varies from step to step (log-normal), so the
scale that fits them drifts as it does in training.

The table gives, per epoch length, the skipped steps of each scaler and the extra fraction of
steps the per-epoch rebuild loses. A new scaler starts at 2**16 and halves once per skipped
step down to the scale that fits, so it loses about log2(65536 / fitting scale) steps per
epoch, whatever the epoch's length.
"""

from __future__ import annotations

import argparse
import math

import torch

#: The gradient's typical size: the fitting scale is about 65504 / (GRADIENT * spread).
GRADIENT = 64.0


def run(epochs: int, steps: int, rebuild: bool, seed: int = 0) -> int:
    """Skipped steps over ``epochs`` x ``steps``; a new scaler each epoch when ``rebuild``."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.nn.Parameter(torch.zeros(256))
    optimizer = torch.optim.SGD([weight], lr=0.0)  # the scaler's behaviour is what is measured
    scaler = torch.amp.GradScaler("cpu")
    skipped = 0
    for _epoch in range(epochs):
        if rebuild:
            scaler = torch.amp.GradScaler("cpu")
        for _step in range(steps):
            size = GRADIENT * math.exp(0.5 * torch.randn((), generator=generator).item())
            direction = torch.randn(256, generator=generator)
            loss = (weight * direction).sum() * size
            scaler.scale(loss).backward()
            weight.grad = weight.grad.half().float()  # gradients live in fp16 on a GPU
            before = scaler.get_scale()
            scaler.step(optimizer)
            scaler.update()
            skipped += scaler.get_scale() < before
            optimizer.zero_grad()
    return skipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: a CI check, not data")
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    lengths = (50,) if args.smoke else (200, 1000, 5000)
    epochs = 2 if args.smoke else args.epochs
    print(f"{epochs} epochs, gradient size ~{GRADIENT:g} (log-normal), torch {torch.__version__}")
    print("| steps/epoch | skipped, one scaler | skipped, rebuilt per epoch | extra steps lost |")
    print("|---:|---:|---:|---:|")
    for steps in lengths:
        once = run(epochs, steps, rebuild=False)
        fresh = run(epochs, steps, rebuild=True)
        extra = (fresh - once) / (epochs * steps)
        print(f"| {steps} | {once} | {fresh} | {extra:.2%} ({(fresh - once) / epochs:.1f}/epoch) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
