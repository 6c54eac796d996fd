"""The same training loop, with every loss that reaches `scaler.step` passed through the scaler.

What to notice: `scaler.scale(penalty).backward()` gives the penalty's gradients the same loss
scale as the main loss's, so `scaler.step(optimizer)` unscales both correctly and the penalty
shrinks the weights as intended: the weight norm ends near 0.4, against 0.8 without it. amp-lint
reports nothing here. Runs on CPU (`python examples/fp16_penalty_backward_scaled.py`).
"""

import torch
from torch import nn


def train(steps: int = 100, penalty_weight: float = 1.0, seed: int = 0) -> float:
    """Fit a linear model (true weights of norm 0.8) with an L2 penalty that should halve
    them; returns the final weight norm."""
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Linear(64, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device)
    for _ in range(steps):
        x = torch.randn(32, 64, device=device)
        y = 0.1 * x.sum(dim=1, keepdim=True) + 0.01 * torch.randn(32, 1, device=device)
        with torch.autocast(device, dtype=torch.float16):
            loss = nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        penalty = penalty_weight * model.weight.float().square().sum()
        scaler.scale(penalty).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
    return model.weight.norm().item()


if __name__ == "__main__":
    print(f"weight norm {train():.4f}")
