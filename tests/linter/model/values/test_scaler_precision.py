"""Is a GradScaler on only for a non-bf16 precision (`linter.model.values._scaler_precision`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.syntax._dotted_names import ImportAliases
from linter.model.syntax._module_index import module_index
from linter.model.syntax._path_facts import path_facts
from linter.model.values._scaler_precision import for_another_precision
from linter.model.values._scaler_receivers import scaler_receivers


def _verdict(source: str) -> bool:
    source = "import torch\n" + textwrap.dedent(source)
    index = module_index(ModuleContext("t.py", source, cst.parse_module(source)))
    aliases = ImportAliases(index.nodes(cst.Import) + index.nodes(cst.ImportFrom))
    receivers = scaler_receivers(index)
    (call,) = [c for c in index.nodes(cst.Call) if receivers.is_constructor_call(c)]
    return for_another_precision(index, aliases, path_facts(index), call)


@pytest.mark.parametrize(
    "source",
    [
        'scaler = torch.amp.GradScaler("cuda", enabled=precision != "bf16")\n',
        'scaler = torch.amp.GradScaler("cuda", enabled=args.fp16)\n',
        'scaler = torch.amp.GradScaler("cuda", enabled=not args.bf16)\n',
        'scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))\n',
        'scaler = torch.amp.GradScaler("cuda", enabled=cfg.use_grad_scaler)\n',
        'if amp_dtype == torch.float16:\n    scaler = torch.amp.GradScaler("cuda")\n',
        'scaler = torch.amp.GradScaler("cuda") if fp16 else None\n',
        'scaler = torch.amp.GradScaler("cuda")\nif args.precision == "fp16":\n'
        "    scaler.scale(loss).backward()\n",
        'if not args.bf16:\n    scaler = torch.amp.GradScaler("cuda")\n',
    ],
)
def test_a_scaler_tied_to_another_precision_is_for_another_precision(source: str) -> None:
    assert _verdict(source) is True


@pytest.mark.parametrize(
    "source",
    [
        'scaler = torch.amp.GradScaler("cuda")\n',
        'scaler = torch.amp.GradScaler("cuda", enabled=True)\n',
        'scaler = torch.amp.GradScaler("cuda", enabled=args.amp)\n',
        'scaler = torch.amp.GradScaler("cuda", enabled=use_bf16)\n',
        'if args.bf16:\n    scaler = torch.amp.GradScaler("cuda")\n',
        'if rank == 0:\n    scaler = torch.amp.GradScaler("cuda")\n',
    ],
)
def test_a_scaler_on_whenever_the_bf16_autocasts_run_is_not(source: str) -> None:
    assert _verdict(source) is False
