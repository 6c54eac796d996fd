"""AMP001's fix: ``get_scale()`` -> ``peek_scale()``, unsafe, and only on ampscale's scaler."""

from __future__ import annotations

import textwrap

import pytest

from linter import fix_source, lint_source

LOOP = """\
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()
    print(scaler.get_scale())
"""


def fixed(header: str) -> str:
    return lint_source(
        textwrap.dedent(header) + LOOP, select=["AMP001"], fix=True, unsafe_fixes=True
    )


def test_ampscale_scaler_read_becomes_peek_scale() -> None:
    result = fixed("from scaler import GradScaler\n\nscaler = GradScaler('cuda')\n")
    assert result.endswith("    print(scaler.peek_scale())\n")


def test_the_fix_is_unsafe() -> None:
    source = "from scaler import GradScaler\nscaler = GradScaler()\n" + LOOP
    (diagnostic,) = lint_source(source, select=["AMP001"])
    assert diagnostic.fix is not None
    assert diagnostic.fix.applicability == "unsafe"
    assert lint_source(source, select=["AMP001"], fix=True) == source


@pytest.mark.parametrize(
    "header",
    [
        "import torch\nscaler = torch.amp.GradScaler('cuda')\n",
        "from torch.cuda.amp import GradScaler\nscaler = GradScaler()\n",
        # ampscale's scaler, but the name is rebound to something else elsewhere in the module.
        "from scaler import GradScaler\nimport torch\nscaler = GradScaler()\n"
        "def reset():\n    global scaler\n    scaler = torch.amp.GradScaler()\n",
        "from scaler import GradScaler\nscaler = GradScaler()\nfor scaler in scalers:\n    pass\n",
        # Named like a scaler, nothing proves what it is.
        "",
    ],
)
def test_no_fix_unless_the_receiver_is_provably_ampscales(header: str) -> None:
    (diagnostic,) = lint_source(header + LOOP, select=["AMP001"])
    assert diagnostic.fix is None


def test_an_annotated_parameter_proves_the_scaler() -> None:
    source = textwrap.dedent(
        """\
        from scaler import GradScaler as AmpScaler


        def train(scaler: AmpScaler, loader):
            for batch in loader:
                scaler.step(optimizer)
                scaler.update()
                log(scaler.get_scale())
        """
    )
    result = fix_source(source, select=["AMP001"], unsafe_fixes=True)
    assert "log(scaler.peek_scale())" in result.text
    assert len(result.fixed) == 1
