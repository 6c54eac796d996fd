"""The "Which layer overflows?" figure, drawn at build time from a real CPU run.

A small residual model trains under fp16 autocast with ``GradScaler(track_overflows=True)``;
at ``RESCALE_AT`` one block is rescaled without changing what the model computes (its first
layer times ``FACTOR``, its second divided by it), so its hidden activations are ``FACTOR``
times larger, as in a feed-forward block pretrained in bf16, and the gradient of its second
layer's weight overflows fp16 at the default loss scale. Everything plotted comes from the
scaler: ``overflow_report()`` at the end, and the scale and ``step_skipped()`` of each step.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch

from scaler import GradScaler, OverflowReport

#: Steps of the run; the block is rescaled at RESCALE_AT.
STEPS = 60
RESCALE_AT = 10
#: How much larger the rescaled block's hidden activations become.
FACTOR = 1000.0
#: Growth interval: short, so that the scale grows back into the overflow a few times.
GROWTH_INTERVAL = 8


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x)))


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(8, 16)
        self.blocks = torch.nn.ModuleList(_Block() for _ in range(3))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def tracked_run() -> tuple[list[str], OverflowReport, list[float], list[bool]]:
    """The parameter names, the final report (every row), and each step's scale and skip."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors; the docs build shares the CPU with others
    try:
        model = _Net()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        scaler = GradScaler("cpu", growth_interval=GROWTH_INTERVAL, track_overflows=True)
        scaler.watch(model)
        inputs, targets = torch.randn(64, 8), torch.randn(64, 4)
        scales, skipped = [], []
        for step in range(STEPS):
            if step == RESCALE_AT:
                block = model.blocks[1]
                with torch.no_grad():
                    block.up.weight.mul_(FACTOR)
                    block.up.bias.mul_(FACTOR)
                    block.down.weight.div_(FACTOR)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(model(inputs).float(), targets)
            scales.append(scaler.get_scale())  # the scale this step ran at
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            skipped.append(bool(scaler.step_skipped(optimizer)))
            scaler.update()
        names = [name for name, _ in model.named_parameters()]
        return names, scaler.overflow_report(top=None), scales, skipped
    finally:
        torch.set_num_threads(threads)


def plot_overflow_report() -> None:
    """Left: the report, as non-finite steps per gradient tensor. Right: the scale of each step
    and the steps skipped because a gradient overflowed."""
    names, report, scales, skipped = tracked_run()
    counts = {row.name: row.nonfinite_steps for row in report.rows}
    _, (bars, timeline) = plt.subplots(
        1, 2, figsize=(9.5, 4.2), layout="constrained", width_ratios=(1, 1.3)
    )
    positions = range(len(names))
    bars.barh(
        positions,
        [counts.get(name, 0) for name in names],
        color=["tab:red" if name in counts else "tab:blue" for name in names],
    )
    bars.set_yticks(positions, names, fontsize=7)
    bars.invert_yaxis()
    bars.set_xlabel("steps with a non-finite gradient")
    bars.set_title("overflow_report(): per gradient tensor", fontsize=9)
    for row in report.rows:
        bars.annotate(
            f"{row.nonfinite_steps} steps: first {row.first_step}, last {row.last_step}",
            (row.nonfinite_steps, names.index(row.name)),
            xytext=(4, -3),
            textcoords="offset points",
            fontsize=7,
        )
    bars.set_xlim(0, max(counts.values(), default=1) * 2.2)

    steps = range(len(scales))
    timeline.plot(steps, [math.log2(s) for s in scales], color="tab:blue", label="loss scale")
    timeline.plot(
        [s for s in steps if skipped[s]],
        [math.log2(scales[s]) for s in steps if skipped[s]],
        "x",
        color="tab:red",
        label="step skipped: the gradient overflowed",
    )
    timeline.axvline(RESCALE_AT, color="grey", lw=0.8, ls=":")
    timeline.text(RESCALE_AT + 0.7, math.log2(max(scales)) - 0.2, "block rescaled", fontsize=7)
    timeline.set_xlabel("step")
    timeline.set_ylabel("log2(scale)")
    timeline.set_title("the loss scale, step by step", fontsize=9)
    timeline.legend(loc="upper right", fontsize=7)
