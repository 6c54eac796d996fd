"""A small residual model in which one block can be made to overflow fp16 in the backward pass.

``make_block_overflow`` rescales one block without changing what the model computes: its first
linear layer's weights and bias times ``factor``, its second layer's weights divided by it (ReLU
commutes with a positive factor). Its hidden activations are then ``factor`` times larger, as in
the feed-forward blocks of a model pretrained in bf16, and so is the gradient of the second
layer's weight (``grad_output^T @ hidden``), which overflows fp16 under a large loss scale. The
activations' gradients flowing on to the layers nearer the input are unchanged (``grad @ W`` with
``W`` divided, the inputs multiplied), so that weight is the only gradient that overflows.
"""

from __future__ import annotations

import torch

#: The block made to overflow, and the name ``watch(model)`` gives its overflowing gradient.
OVERFLOWING_BLOCK = 1
OVERFLOWING_TENSOR = f"blocks.{OVERFLOWING_BLOCK}.down.weight"


class Block(torch.nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.up = torch.nn.Linear(width, hidden)
        self.down = torch.nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x)))


class BlockNet(torch.nn.Module):
    """embed -> three residual blocks -> head: 16 parameter tensors."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Linear(8, 16)
        self.blocks = torch.nn.ModuleList(Block(16, 32) for _ in range(3))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def make_block_overflow(model: BlockNet, factor: float = 1000.0) -> None:
    """Rescale ``blocks[OVERFLOWING_BLOCK]`` as the module docstring says (same function)."""
    block = model.blocks[OVERFLOWING_BLOCK]
    with torch.no_grad():
        block.up.weight.mul_(factor)
        block.up.bias.mul_(factor)
        block.down.weight.div_(factor)


def data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(64, 8, generator=generator), torch.randn(64, 4, generator=generator)


def train_step(model: torch.nn.Module, optimizer, scaler) -> torch.Tensor:
    """One fp16-autocast step on CPU; returns ``step_skipped`` (a device flag)."""
    inputs, targets = data()
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = torch.nn.functional.mse_loss(model(inputs).float(), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    skipped = scaler.step_skipped(optimizer)
    scaler.update()
    return skipped
