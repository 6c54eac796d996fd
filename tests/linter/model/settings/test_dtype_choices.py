"""Run-time dtypes and the flags that pick them (`linter.model.settings._dtype_choices`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.settings._dtype_choices import DtypeOptions, dtype_choices, runs_choosing
from linter.model.syntax._dotted_names import dotted_name
from linter.model.syntax._module_index import ModuleIndex, module_index

FLAG = 'parser.add_argument("--dtype", default="{default}", choices=["bf16", "fp16", "fp32"])\n'


def _index(source: str) -> ModuleIndex:
    source = textwrap.dedent(source)
    return module_index(ModuleContext("t.py", source, cst.parse_module(source)))


def _options(source: str, name: str = "ptdtype") -> DtypeOptions | None:
    """The options of ``use(<name>)``, the module's last call."""
    index = _index(source)
    call = index.nodes(cst.Call)[-1]
    assert call.args[0].value.value == name  # type: ignore[attr-defined]  # a Name in these sources
    return dtype_choices(index).of(call.args[0].value)


def _runs(options: DtypeOptions | None) -> list[tuple[str, str | None]]:
    assert options is not None
    return [(choice.dtype, choice.when) for choice in options.choices]


@pytest.mark.parametrize(
    "binding",
    [
        'ptdtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}'
        "[args.dtype]",
        "ptdtype = getattr(torch, {'bf16': 'bfloat16', 'fp16': 'float16', 'fp32': 'float32'}"
        "[args.dtype])",
        "ptdtype = args.dtype",
    ],
    ids=["table", "getattr-of-a-table", "the-flag-itself"],
)
def test_a_flag_gives_its_default_first_then_each_other_choice_with_its_condition(
    binding: str,
) -> None:
    options = _options(f"import torch\n{FLAG.format(default='fp16')}{binding}\nuse(ptdtype)\n")
    assert _runs(options) == [
        ("fp16", None),
        ("bf16", "when run with --dtype bf16"),
        ("fp32", "when run with --dtype fp32"),
    ]
    assert options is not None
    assert options.default() == "fp16"
    first = options.first("bf16")
    assert first is not None
    assert first.when == "when run with --dtype bf16"


def test_a_conditional_on_the_flag_picks_an_arm_per_value() -> None:
    options = _options(
        "import torch\n"
        + FLAG.format(default="bf16")
        + 'ptdtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16\nuse(ptdtype)\n'
    )
    assert _runs(options) == [
        ("bf16", None),
        ("fp16", "when run with --dtype fp16"),
        ("bf16", "when run with --dtype fp32"),
    ]


def test_nanogpts_key_is_bf16_on_gpus_with_bf16_and_fp16_on_the_others() -> None:
    options = _options(
        "import torch\n"
        'dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported()'
        ' else "float16"\n'
        'ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16,'
        ' "float16": torch.float16}[dtype]\n'
        "use(ptdtype)\n"
    )
    assert _runs(options) == [("bf16", None), ("fp16", "on a GPU without bf16 support")]


@pytest.mark.parametrize(
    "binding",
    [
        "ptdtype = torch.bfloat16 if args.bf16 else torch.float16",  # a store_true switch
        "ptdtype = {'bf16': torch.bfloat16}[cfg.compute_dtype]",  # no declared flag
        "ptdtype = lookup(args.dtype)",
    ],
)
def test_what_no_declared_flag_or_gpu_check_decides_stays_unknown(binding: str) -> None:
    source = f"import torch\n{FLAG.format(default='bf16')}{binding}\nuse(ptdtype)\n"
    assert _options(source) is None


def test_the_evaluated_code_is_the_table_and_the_flag_declaration() -> None:
    options = _options(
        "import torch\n"
        + FLAG.format(default="bf16")
        + "ptdtype = {'bf16': torch.bfloat16, 'fp16': torch.float16}[args.dtype]\nuse(ptdtype)\n"
    )
    assert options is not None
    assert sorted(type(node).__name__ for node in options.evaluated) == ["Call", "Dict"]


def test_runs_choosing_needs_one_run_that_gives_every_call_the_dtype() -> None:
    index = _index(
        "import torch\n"
        + FLAG.format(default="fp16")
        + 'parser.add_argument("--eval-dtype", default="fp16", choices=["bf16", "fp16"])\n'
        "a = torch.autocast('cuda', dtype=getattr(torch, {'bf16': 'bfloat16', 'fp16': 'float16'}"
        "[args.dtype]))\n"
        "b = torch.autocast('cuda', dtype=args.eval_dtype)\n"
        "c = torch.autocast('cuda', dtype=some_dtype)\n"
    )
    a, b, c = (call for call in index.nodes(cst.Call) if dotted_name(call.func) == "torch.autocast")
    found = runs_choosing(index, [a], "bf16")
    assert found is not None
    assert found[0] is not None
    assert found[0].when == "when run with --dtype bf16"
    assert runs_choosing(index, [a, b], "bf16") is None  # two flags, two conditions
    assert runs_choosing(index, [a, c], "bf16") is None  # one unknown
    assert runs_choosing(index, [], "bf16") == (None, ())


_BRANCHES = (
    "import torch\n"
    + FLAG.format(default="bf16")
    + "ptdtype = torch.float32\n"
    + 'if args.dtype == "fp16":\n'
    + "    ptdtype = torch.float16\n"
    + 'elif args.dtype == "bf16":\n'
    + "    ptdtype = torch.bfloat16\n"
    + "{extra}use(ptdtype)\n"
)


def test_a_dtype_bound_by_if_statements_on_the_flag_is_the_same_chain_of_choices() -> None:
    # diffusers' `weight_dtype`: a default, then one binding per `==` test of one setting.
    assert _runs(_options(_BRANCHES.format(extra=""))) == [
        ("bf16", None),
        ("fp16", "when run with --dtype fp16"),
        ("fp32", "when run with --dtype fp32"),
    ]


@pytest.mark.parametrize(
    "extra",
    [
        "ptdtype = torch.float16\n",  # a second binding outside the chain
        "if other == 'x':\n    ptdtype = torch.float16\n",  # an arm that tests something else
        "if args.dtype:\n    ptdtype = torch.float16\n",  # not an `==` test
        "if args.dtype == 'fp16':\n    ptdtype = torch.float16\n",  # a key bound twice
        "if args.dtype == 'fp32':\n    ptdtype = compute_dtype()\n",  # not a literal dtype
    ],
    ids=["rebound", "other-subject", "truthiness", "repeated-key", "not-a-literal"],
)
def test_any_other_shape_of_if_statement_bindings_stays_unknown(extra: str) -> None:
    assert _options(_BRANCHES.format(extra=extra)) is None


def test_a_binding_after_the_use_is_not_a_choice_of_it() -> None:
    source = _BRANCHES.format(extra="") + 'if args.dtype == "fp32":\n    ptdtype = torch.half\n'
    index = _index(source)
    use = next(c for c in index.nodes(cst.Call) if dotted_name(c.func) == "use")
    options = dtype_choices(index).of(use.args[0].value)
    assert options is None
