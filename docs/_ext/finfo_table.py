"""The ``finfo-table`` directive: fp16/bf16/fp32 limits read from ``torch.finfo`` at build time.

Hand-typed limits go stale or get mistyped; these come from the torch that builds the docs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from table_nodes import build_table

#: (label, dtype) in the order the table lists them.
FORMATS: tuple[tuple[str, torch.dtype], ...] = (
    ("fp16 (torch.float16)", torch.float16),
    ("bf16 (torch.bfloat16)", torch.bfloat16),
    ("fp32 (torch.float32)", torch.float32),
)


@dataclass(frozen=True, slots=True)
class FormatLimits:
    """The numbers the docs quote for one floating-point format."""

    #: Total bits.
    bits: int
    #: Stored significand (mantissa) bits; eps is 2**-significand_bits.
    significand_bits: int
    #: Exponent bits.
    exponent_bits: int
    #: Largest finite value.
    max: float
    #: Smallest positive normal value.
    min_normal: float
    #: Smallest positive subnormal value (min normal times eps).
    min_subnormal: float
    #: Gap between 1 and the next representable value.
    eps: float


def format_limits(dtype: torch.dtype) -> FormatLimits:
    """Read one dtype's limits from ``torch.finfo``."""
    info = torch.finfo(dtype)
    significand_bits = round(-math.log2(info.eps))
    return FormatLimits(
        bits=info.bits,
        significand_bits=significand_bits,
        exponent_bits=info.bits - 1 - significand_bits,
        max=info.max,
        min_normal=info.tiny,
        min_subnormal=info.tiny * info.eps,
        eps=info.eps,
    )


def describe(value: float) -> str:
    """Decimal value, plus the power of two when it is one (2**-14 reads better than 6e-5)."""
    exponent = math.log2(value)
    decimal = f"{value:.6g}" if value >= 1 else f"{value:.4g}"
    if exponent == int(exponent):
        return f"{decimal} (2**{int(exponent)})"
    return decimal


class FinfoTable(SphinxDirective):
    """Render the limits of fp16, bf16 and fp32 as a table."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        header = ["format", "bits (sign/exp/sig)", "max", "min normal", "min subnormal", "eps"]
        rows = []
        for label, dtype in FORMATS:
            limits = format_limits(dtype)
            rows.append(
                [
                    label,
                    f"{limits.bits} (1/{limits.exponent_bits}/{limits.significand_bits})",
                    describe(limits.max),
                    describe(limits.min_normal),
                    describe(limits.min_subnormal),
                    describe(limits.eps),
                ]
            )
        table = build_table(header, rows, widths=[18, 12, 12, 14, 14, 14], classes=["finfo-table"])
        caption = nodes.paragraph(
            text=f"Generated at build time from torch.finfo (torch {torch.__version__})."
        )
        return [table, caption]


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("finfo-table", FinfoTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
