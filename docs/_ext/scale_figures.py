"""Figures drawn at build time (through matplotlib's plot directive) from real CPU runs.

Nothing here is sketched by hand: the trajectories are the scales that ``GradScaler.get_scale()``
returned while training a small model on CPU under fp16 autocast, and the range diagram reads
``torch.finfo``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import matplotlib.pyplot as plt
import torch

from scaler import GradScaler

#: Steps of the healthy run; with growth_interval=50 the growth/back-off cycle shows several times.
HEALTHY_STEPS = 700
#: Growth interval of the healthy run (torch's default is 2000, which would need ~40x the steps).
HEALTHY_GROWTH_INTERVAL = 50
#: Steps of the always-overflowing run: enough for torch's scale to reach exactly 0 (step 166).
OVERFLOW_STEPS = 200

ScalerFactory = Callable[..., object]


def _scaler_factories() -> list[tuple[str, ScalerFactory, dict[str, str]]]:
    # Ours first and solid, torch's dashed on top: where they agree the dashes show both.
    return [
        ("ampscale GradScaler", GradScaler, {"ls": "-", "color": "tab:blue", "lw": 2.5}),
        ("torch.amp.GradScaler", torch.amp.GradScaler, {"ls": "--", "color": "tab:red"}),
    ]


def _train(
    make_scaler: ScalerFactory, steps: int, inputs_scale: float, **kwargs: object
) -> list[float]:
    """Scale after each step of a small regression trained under CPU fp16 autocast."""
    torch.manual_seed(0)
    # Tiny tensors: one thread is faster than many, and the docs build shares the CPU with others.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_steps(make_scaler("cpu", **kwargs), steps, inputs_scale)
    finally:
        torch.set_num_threads(threads)


def _train_steps(scaler: object, steps: int, inputs_scale: float) -> list[float]:
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    inputs = torch.randn(256, 16)
    targets = inputs.sum(dim=1, keepdim=True) * 8
    scales = []
    for _ in range(steps):
        batch = torch.randint(0, 256, (32,))
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.float16):
            # inputs_scale=1e5 pushes the first layer past 65504 in fp16: every step overflows.
            prediction = model(inputs[batch] * inputs_scale)
            loss = torch.nn.functional.mse_loss(prediction, targets[batch])
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales


def _log2(values: list[float]) -> list[float]:
    return [math.log2(v) if v > 0 else math.nan for v in values]


def plot_scale_trajectories() -> None:
    """Left: a healthy run. Right: a run whose forward pass overflows fp16 on every step."""
    _, (healthy, collapsing) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
    for label, make_scaler, style in _scaler_factories():
        scales = _train(make_scaler, HEALTHY_STEPS, 1.0, growth_interval=HEALTHY_GROWTH_INTERVAL)
        healthy.plot(_log2(scales), label=label, **style)
        scales = _train(make_scaler, OVERFLOW_STEPS, 1e5)
        collapsing.plot(range(1, len(scales) + 1), _log2(scales), label=label, **style)
        if scales[-1] > 0:
            collapsing.annotate(
                f"stays at 2**{math.log2(scales[-1]):g}",
                (len(scales), math.log2(scales[-1])),
                xytext=(-95, 8),
                textcoords="offset points",
                color=style["color"],
            )
        if 0.0 in scales:
            first_zero = scales.index(0.0) + 1
            collapsing.plot([first_zero], [-152], marker="x", color=style["color"])
            collapsing.annotate(
                f"exactly 0 from step {first_zero}",
                (first_zero, -152),
                xytext=(-150, 8),
                textcoords="offset points",
                color=style["color"],
            )
    healthy.set_title(f"healthy run (growth_interval={HEALTHY_GROWTH_INTERVAL})")
    collapsing.set_title("every step overflows (fp16 forward > 65504)")
    for axes in (healthy, collapsing):
        axes.set_xlabel("step")
        axes.set_ylabel("log2(scale)")
        axes.axhline(0, color="grey", lw=0.8)
        axes.legend(loc="best", fontsize=8)
    collapsing.axhline(-128, color="black", lw=0.8, ls=":")
    collapsing.text(2, -124, "2**-128: 1/scale overflows fp32", fontsize=8)
    collapsing.text(2, 3, "scale = 1", fontsize=8)
    collapsing.set_ylim(-160, 20)


def plot_number_ranges() -> None:
    """Positive range of fp16, bf16 and fp32 on a log2 axis: subnormal, normal, and max."""
    formats = [("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp32", torch.float32)]
    _, axes = plt.subplots(figsize=(9, 2.6), layout="constrained")
    for row, (_, dtype) in enumerate(formats):
        info = torch.finfo(dtype)
        smallest = math.log2(info.tiny * info.eps)
        tiny, largest = math.log2(info.tiny), math.log2(info.max)
        axes.barh(row, tiny - smallest, left=smallest, color="tab:orange", alpha=0.5)
        axes.barh(row, largest - tiny, left=tiny, color="tab:blue", alpha=0.7)
        axes.text(largest + 2, row, f"max {info.max:.6g}", va="center", fontsize=8)
        smallest_text = f"{info.tiny * info.eps:.3g}"
        axes.text(smallest - 2, row, smallest_text, va="center", ha="right", fontsize=8)
    axes.set_yticks(range(len(formats)), [label for label, _ in formats])
    axes.set_xlabel("log2 of the magnitude (orange: subnormal, blue: normal)")
    axes.axvline(0, color="grey", lw=0.8)
    axes.set_xlim(-185, 165)
