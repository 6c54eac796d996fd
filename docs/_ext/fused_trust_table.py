"""The ``fused-trust-table`` directive: the support matrix, read from the scaler's trust table.

A hand-written matrix would drift from ``scaler._fused_support.TRUST_TABLE``, which is what the
scaler consults on every fused step; this renders that table itself at build time.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from table_nodes import build_table

from scaler._fused_support import NO_ROW, TRUST_TABLE, TrustRow

#: How each verdict reads in the matrix, and what the scaler then does.
VERDICT_WORDS: dict[str, str] = {
    "trusted": "trusted (no sync)",
    "trusted-once-state-exists": "trusted once momentum exists (host fallback before)",
    "host": "host fallback (1 sync per step)",
    "unverified": "unverified: host fallback (1 sync per step)",
}
#: What each row's verdict rests on, as the matrix says it.
BASIS_WORDS: dict[str, str] = {
    "measured": "measured here",
    "torch-source": "torch's source and tests (not measured here)",
    "none": "nothing",
}
#: Device types in the order the matrix lists them.
DEVICE_ORDER = ("cpu", "cuda", "mps", "xpu")


def _sort_key(row: TrustRow) -> tuple:
    return (DEVICE_ORDER.index(row.device), row.optimizer, row.state_dtype, row.torch_from)


class FusedTrustTable(SphinxDirective):
    """Render every row of the trust table: device × optimizer × state dtype → verdict, and
    what the verdict rests on."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        header = ["device", "torch", "optimizer", "state dtype", "verdict", "basis", "evidence"]
        rows = [
            [
                row.device,
                f">={row.torch_from}, <{row.torch_before}",
                f"{row.optimizer}(fused=True)",
                row.state_dtype,
                VERDICT_WORDS[row.verdict],
                BASIS_WORDS[row.basis],
                row.evidence,
            ]
            for row in sorted(TRUST_TABLE, key=_sort_key)
        ]
        table = build_table(
            header, rows, widths=[6, 11, 13, 8, 15, 11, 36], classes=["fused-trust-table"]
        )
        caption = nodes.paragraph(
            text=(
                "Generated at build time from scaler._fused_support.TRUST_TABLE. Any combination "
                f"not listed is {VERDICT_WORDS[NO_ROW]}."
            )
        )
        return [table, caption]


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("fused-trust-table", FusedTrustTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
