"""Cost per finding and per event: does amp-lint stay linear when one function holds thousands?

Generated code and long notebooks put thousands of findings, or of training-recipe events, in
one loop body. A rule that walks the function once per finding, or an analysis that compares
every event with every other, turns that into minutes: 20,000 per-step ``get_scale()`` reads
took 129 s before issue 43 (2,500 took 2.7 s).

Each shape is one generated module, linted with every rule through the API in one process
(no cache, one job, process start not counted) at a small and at an eight times larger size.
The table gives seconds, milliseconds per finding (or per event when the shape has no finding)
and the ratio of the two: 1.0 is linear, 8.0 quadratic. The per-step reads are the gate of issue
43 (ratio under 1.5); the others are figures:

- per-step scale reads: AMP001 findings, one per line;
- resume checkpoints in an epoch loop: AMP011 findings (a scaler, no scaler state);
- backward and optimizer step: two events a line pair, no finding;
- scaler step and update pairs in one iteration: AMP005 asks, for every pair of updates, whether
  a step may run between them. Every pair of events is one question of the path facts, so this
  one grows with the pairs (quadratic in updates per iteration; real loops hold one to three).

``--smoke`` runs a twentieth of each size: a CI check that the script runs, not data.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from linter import lint_paths

#: The cost per finding may grow this much from the small file to the large one.
LINEAR_LIMIT = 1.5

_HEAD = (
    "import torch\n\n"
    "scaler = torch.amp.GradScaler('cuda')\n"
    "model = Net().cuda()\n"
    "optimizer = torch.optim.AdamW(model.parameters())\n"
)


@dataclass(frozen=True)
class Shape:
    """One generated module: ``head`` then ``body`` repeated ``count`` times."""

    name: str
    head: str
    body: str
    #: Events the body adds each time (for shapes without findings).
    events_per_body: int
    sizes: tuple[int, int]
    gate: bool = False

    def source(self, count: int) -> str:
        return _HEAD + self.head + self.body * count


SHAPES = (
    Shape(
        "per-step scale reads (AMP001)",
        "for batch in loader:\n    scaler.update()\n",
        "    print(scaler.get_scale())\n",
        0,
        (2_500, 20_000),
        gate=True,
    ),
    Shape(
        "resume checkpoints (AMP011)",
        "for epoch in range(9):\n    scaler.step(optimizer)\n    scaler.update()\n",
        "    torch.save({'model': model.state_dict(), 'opt': optimizer.state_dict()}, 'c.pt')\n",
        0,
        (2_500, 20_000),
    ),
    Shape(
        "backward + optimizer step (events)",
        "for batch in loader:\n",
        "    model(batch).backward()\n    optimizer.step()\n",
        2,
        (2_500, 20_000),
    ),
    Shape(
        "scaler step + update pairs (AMP005)",
        "for batch in loader:\n    scaler.scale(model(batch)).backward()\n",
        "    scaler.step(optimizer)\n    scaler.update()\n",
        2,
        (100, 800),
    ),
)


def measure(shape: Shape, count: int, folder: Path) -> tuple[float, int]:
    """Seconds to lint the module of ``count`` bodies, and its number of findings."""
    path = folder / f"{shape.name.split()[0]}_{count}.py"
    path.write_text(shape.source(count))
    start = time.perf_counter()
    found = len(lint_paths([str(path)], jobs=1).diagnostics)
    return time.perf_counter() - start, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a twentieth of each size, for CI")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="amp-lint-scaling-"))
    failed = False
    print("one module, every rule, API, one process, no cache")
    print(f"{'shape':<38} {'size':>7} {'findings':>9} {'s':>8} {'ms/unit':>8} {'large/small':>11}")
    try:
        for shape in SHAPES:
            per_unit = []
            for size in shape.sizes:
                count = max(size // 20, 5) if args.smoke else size
                seconds, found = measure(shape, count, folder)
                units = found or count * shape.events_per_body or 1
                per_unit.append(seconds / units * 1000)
                print(
                    f"{shape.name:<38} {count:>7,} {found:>9,} {seconds:>8.2f} "
                    f"{per_unit[-1]:>8.3f}",
                    end="" if size == shape.sizes[-1] else "\n",
                )
            ratio = per_unit[-1] / per_unit[0]
            verdict = ""
            if shape.gate:
                linear = ratio < LINEAR_LIMIT
                verdict = " linear" if linear else f" NOT LINEAR (limit {LINEAR_LIMIT})"
                failed |= not linear and not args.smoke
            print(f" {ratio:>11.2f}{verdict}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
