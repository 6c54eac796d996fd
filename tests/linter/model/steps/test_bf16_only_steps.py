"""Does a scaler's step run only beside bf16 autocasts (`linter.model.steps._bf16_only_steps`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.steps._bf16_only_steps import Bf16OnlySteps
from linter.model.syntax._dotted_names import ImportAliases, dotted_name
from linter.model.syntax._module_index import module_index
from linter.model.syntax._path_facts import path_facts
from linter.model.values._scaler_receivers import scaler_receivers


def _verdict(source: str) -> bool:
    source = "import torch\n" + textwrap.dedent(source)
    index = module_index(ModuleContext("t.py", source, cst.parse_module(source)))
    aliases = ImportAliases(index.nodes(cst.Import) + index.nodes(cst.ImportFrom))
    steps = Bf16OnlySteps(index, aliases, path_facts(index), scaler_receivers(index))
    (step,) = [
        c
        for c in index.nodes(cst.Call)
        if isinstance(c.func, cst.Attribute)
        and c.func.attr.value == "step"
        and "scaler" in (dotted_name(c.func.value) or "")
    ]
    return steps.only_bf16(step, dotted_name(step.func.value))  # type: ignore[attr-defined]


BRANCH = """\
with torch.autocast("cuda", dtype={dtype}):
    loss = model(x)
if {test}:
    scaler.scale(loss).backward()
    scaler.step(optimizer)
"""

ENABLED = """\
scaler = torch.amp.GradScaler(enabled={enabled})
with torch.autocast("cuda", dtype={dtype}):
    loss = model(x)
scaler.scale(loss).backward()
scaler.step(optimizer)
"""


@pytest.mark.parametrize(
    "source",
    [
        BRANCH.format(dtype="torch.bfloat16", test="use_bfloat16"),
        BRANCH.format(dtype="torch.bfloat16", test="cfg.bf16 and world_size > 1"),
        ENABLED.format(enabled="cfg.bf16", dtype="torch.bfloat16"),
        ENABLED.format(
            enabled="cfg.bf16", dtype="torch.float16 if not cfg.bf16 else torch.bfloat16"
        ),
        ENABLED.format(
            enabled="cfg.bf16 and cuda", dtype="torch.bfloat16 if self.cfg.bf16 else 'float16'"
        ),
        "scaler = torch.amp.GradScaler() if use_bf16 else None\n"
        + ENABLED.format(enabled="True", dtype="torch.bfloat16").split("\n", 1)[1],
    ],
)
def test_scaler_on_only_with_bf16_autocasts(source: str) -> None:
    assert _verdict(source)


@pytest.mark.parametrize(
    "source",
    [
        BRANCH.format(dtype="torch.float16", test="use_bfloat16"),
        BRANCH.format(dtype="amp_dtype", test="use_bfloat16"),
        BRANCH.format(dtype="torch.bfloat16", test="not use_bfloat16"),
        BRANCH.format(dtype="torch.bfloat16", test="use_amp"),
        ENABLED.format(
            enabled="not cfg.bf16", dtype="torch.bfloat16 if cfg.bf16 else torch.float16"
        ),
        ENABLED.format(enabled="cfg.bf16", dtype="torch.bfloat16 if cfg.fp16 else torch.float16"),
        ENABLED.format(enabled="True", dtype="torch.bfloat16"),
        "scaler = torch.amp.GradScaler()\nscaler.step(optimizer)\nif use_bf16:\n    pass\n",
    ],
)
def test_scaler_that_may_meet_fp16_or_unknown_dtypes(source: str) -> None:
    assert not _verdict(source)
