"""``OverflowReport``: which gradient tensors overflowed, since when and how often.

The report is what ``GradScaler.overflow_report()`` returns after its one host read: plain Python
values, frozen, printable as a table and flattened for metric loggers, which take scalars only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The largest finite fp16 value.
FP16_MAX = 65504.0

#: Prefix of the per-tensor keys of ``OverflowReport.to_dict()``.
LOG_PREFIX = "overflow/"


@dataclass(frozen=True, slots=True)
class OverflowRow:
    """One gradient tensor that held an inf or NaN in at least one step.

    Steps are numbered as ``ScalerStats.steps`` counts them: a step's number is the number of
    ``update()`` calls before it, so the first step of a run is step 0 and, in a loop
    ``for step in range(n)`` that calls ``update()`` once per iteration, the numbers are ``step``.
    """

    #: The parameter's name from ``GradScaler.watch()``; without it, its position in the
    #: optimizer, ``param_groups[0][57]`` (``optimizers[1].param_groups[0][3]`` for the second of
    #: several optimizers, counted in the order they first stepped through the scaler).
    name: str
    #: Steps in which this gradient held an inf or NaN.
    nonfinite_steps: int
    #: The first such step.
    first_step: int
    #: The latest such step.
    last_step: int
    #: The largest gradient magnitude seen in the steps where this gradient was finite, after
    #: unscaling (the true gradient, whatever the loss scale); 0.0 if it was never finite.
    max_abs: float

    @property
    def headroom(self) -> float:
        """``65504 / max_abs``: the largest loss scale at which the largest finite gradient seen
        still fits fp16 (inf while ``max_abs`` is 0). Above it, that gradient scaled overflows
        wherever it is computed in fp16."""
        return FP16_MAX / self.max_abs if self.max_abs > 0 else math.inf


@dataclass(frozen=True, slots=True)
class OverflowReport:
    """What ``GradScaler(track_overflows=True)`` saw, per gradient tensor, up to now.

    ``rows`` lists the tensors that were non-finite in at least one step — the first to overflow
    first, then those that overflowed most often — up to the ``top`` asked for. An overflow in
    the forward pass (an activation above 65504) makes the loss, and so every gradient,
    non-finite: then every tensor overflows at the same steps and the report cannot single one
    out (``check_fp16_compat`` finds the module). An overflow that starts in the backward pass
    reaches the gradient where it starts and those computed after it, the layers nearer the
    input; the tensors that overflow alone, or the one nearest the output among those that
    overflow together, are where to look.

    Example::

        report = scaler.overflow_report(top=5)
        print(report)                 # a table
        logger.log(report.to_dict())  # scalars, for TensorBoard, W&B, CSV...
    """

    #: The tensors that overflowed, sorted by first step, then by count (most first), then by
    #: their position in the optimizers; at most ``top`` of them.
    rows: tuple[OverflowRow, ...]
    #: Gradient tensors seen so far (those that had a gradient in at least one step).
    tracked_tensors: int
    #: Of those, the tensors that were non-finite in at least one step (``len(rows)`` or more).
    overflowed_tensors: int
    #: The number the next step will have: the steps counted so far.
    steps: int

    def __str__(self) -> str:
        if not self.rows:
            return (
                f"No gradient overflowed: {self.tracked_tensors} tensors tracked over "
                f"{self.steps} steps."
            )
        shown = (
            f"all {self.overflowed_tensors}"
            if len(self.rows) == self.overflowed_tensors
            else f"the first {len(self.rows)} of {self.overflowed_tensors}"
        )
        headers = ("tensor", "non-finite steps", "first step", "last step", "max |grad|")
        cells = [
            (
                row.name,
                str(row.nonfinite_steps),
                str(row.first_step),
                str(row.last_step),
                f"{row.max_abs:.4g}",
            )
            for row in self.rows
        ]
        widths = [max(len(text) for text in column) for column in zip(headers, *cells, strict=True)]

        def line(texts: tuple[str, ...]) -> str:
            name, *numbers = texts
            return "  ".join(
                [name.ljust(widths[0])]
                + [t.rjust(w) for t, w in zip(numbers, widths[1:], strict=True)]
            )

        return "\n".join(
            [
                f"Gradients that overflowed ({shown}; {self.tracked_tensors} tensors tracked "
                f"over {self.steps} steps):",
                line(headers),
                line(tuple("-" * w for w in widths)),
                *(line(row) for row in cells),
            ]
        )

    def to_dict(self) -> dict[str, int | float]:
        """Scalars for a metrics logger: the counts, and four keys per row,
        ``overflow/<name>/nonfinite_steps``, ``.../first_step``, ``.../last_step`` and
        ``.../max_abs`` (``dataclasses.asdict(report)`` gives the nested form instead)."""
        fields: dict[str, int | float] = {
            "tracked_tensors": self.tracked_tensors,
            "overflowed_tensors": self.overflowed_tensors,
        }
        for row in self.rows:
            key = f"{LOG_PREFIX}{row.name}/"
            fields[key + "nonfinite_steps"] = row.nonfinite_steps
            fields[key + "first_step"] = row.first_step
            fields[key + "last_step"] = row.last_step
            fields[key + "max_abs"] = row.max_abs
        return fields
