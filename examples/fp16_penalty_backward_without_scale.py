"""fp16 AMP training with a regularization penalty backpropagated on its own, unscaled.

What to notice: the penalty is computed in fp32, outside autocast, so its author saw no reason to
scale it and called `penalty.backward()`. But `scaler.step(optimizer)` divides every gradient of
the optimizer by the loss scale (65536 at the start), the penalty's gradients included: they
arrive 65536 times too small and the regularizer silently does nothing (the weight norm ends near
0.8, the unregularized fit, instead of 0.4). amp-lint reports the plain backward (AMP006); its
unsafe fix backpropagates `scaler.scale(penalty)` instead, which is
fp16_penalty_backward_scaled.py. Runs on CPU: `python fp16_penalty_backward_without_scale.py`.
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
        penalty.backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
    return model.weight.norm().item()


if __name__ == "__main__":
    print(f"weight norm {train():.4f}")
