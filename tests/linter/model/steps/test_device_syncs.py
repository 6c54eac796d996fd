"""Has the host waited for the device before a node (`linter.model.steps._device_syncs`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.steps._device_syncs import DeviceSyncs
from linter.model.syntax._dotted_names import ImportAliases
from linter.model.syntax._module_index import module_index


def _verdict(source: str) -> bool:
    source = textwrap.dedent(source)
    index = module_index(ModuleContext("t.py", source, cst.parse_module(source)))
    aliases = ImportAliases(index.nodes(cst.Import) + index.nodes(cst.ImportFrom))
    (read,) = [
        c
        for c in index.nodes(cst.Call)
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == "get_scale"
    ]
    return DeviceSyncs(index, aliases).follows(read)


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nfor b in xs:\n    torch.cuda.synchronize()\n    s = scaler.get_scale()\n",
        "import torch as T\nfor b in xs:\n    T.xpu.synchronize()\n"
        "    if log:\n        s = scaler.get_scale()\n",
        "from torch import cuda\nwhile True:\n"
        "    cuda.synchronize()\n    print(scaler.get_scale())\n",
    ],
)
def test_read_after_an_unconditional_sync(source: str) -> None:
    assert _verdict(source)


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nfor b in xs:\n    if t:\n        torch.cuda.synchronize()\n"
        "    s = scaler.get_scale()\n",
        "import torch\nfor b in xs:\n    s = scaler.get_scale()\n    torch.cuda.synchronize()\n",
        "import torch\ntorch.cuda.synchronize()\nfor b in xs:\n    s = scaler.get_scale()\n",
        "for b in xs:\n    loss.item()\n    s = scaler.get_scale()\n",
        "import torch\nfor b in xs:\n    torch.cuda.synchronize\n    s = scaler.get_scale()\n",
        "for b in xs:\n    stream.synchronize()\n    s = scaler.get_scale()\n",
    ],
)
def test_no_unconditional_sync_before_the_read(source: str) -> None:
    assert not _verdict(source)
