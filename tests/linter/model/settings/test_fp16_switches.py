"""Does a module ask for fp16 by any spelling (`linter.model.settings._fp16_switches`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.settings._fp16_switches import asks_for_fp16
from linter.model.syntax._dotted_names import ImportAliases
from linter.model.syntax._module_index import ModuleIndex, module_index
from linter.model.syntax._tree import walk


def _index(source: str) -> tuple[ModuleIndex, ImportAliases]:
    source = textwrap.dedent(source)
    index = module_index(ModuleContext("t.py", source, cst.parse_module(source)))
    return index, ImportAliases(index.nodes(cst.Import) + index.nodes(cst.ImportFrom))


@pytest.mark.parametrize(
    "source",
    [
        "import torch as T\nx = T.half\n",
        "model = model.half()\n",
        "args = TrainingArguments('out', fp16=use_fp16)\n",
        'trainer = Trainer(precision="16-mixed")\n',
        'MODE = "fp16"\n',
    ],
)
def test_each_spelling_of_fp16_is_a_request(source: str) -> None:
    assert asks_for_fp16(*_index(source), set()) is True


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nwith torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n",
        "args = TrainingArguments('out', fp16=False, bf16=True)\n",
        "x = batch.half(0)  # a look-alike with an argument\n",
        "# torch.float16 in a comment\n",
    ],
)
def test_bf16_code_and_look_alikes_are_no_request(source: str) -> None:
    assert asks_for_fp16(*_index(source), set()) is False


def test_a_ruled_out_alternative_is_no_request() -> None:
    index, aliases = _index(
        "import torch\nptdtype = {'bf16': torch.bfloat16, 'fp16': torch.float16}[cfg.dtype]\n"
    )
    (table,) = [node for node in walk(index.module) if isinstance(node, cst.Dict)]
    assert asks_for_fp16(index, aliases, set(walk(table))) is False
    assert asks_for_fp16(index, aliases, set()) is True
