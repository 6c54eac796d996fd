"""AMP014 precision-managed-twice: torch AMP on top of DeepSpeed, Accelerate and Lightning
engines that already manage precision, from arguments, dict literals and config files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from rule_runner import run_rule, run_rule_related

from linter.api import lint_paths
from linter.rules import PrecisionManagedTwice


def lines(source: str) -> list[int]:
    return [line for line, _col, _msg in run_rule(PrecisionManagedTwice, textwrap.dedent(source))]


def deepspeed_program(config: str, scaler: str = 'torch.amp.GradScaler("cuda")') -> str:
    """The scaler on line 5, the autocast around the engine on line 7."""
    return (
        "import deepspeed\nimport torch\n"
        f"engine, optimizer, _, _ = deepspeed.initialize(model=model, config={config})\n"
        "\n"
        f"scaler = {scaler}\n"
        "for batch in loader:\n"
        '    with torch.autocast("cuda", dtype=torch.bfloat16):\n'
        "        loss = engine(batch)\n"
        "    engine.backward(loss)\n"
    )


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ('{"train_batch_size": 8, "bf16": {"enabled": True}}', [5, 7]),
        ('{"train_batch_size": 8, "fp16": {"enabled": True}}', [5, 7]),
        ('{"train_batch_size": 8, "bf16": {"enabled": False}}', []),
        ('{"train_batch_size": 8, "fp16": {"enabled": "auto"}}', []),
        ('{"train_batch_size": 8, "bf16": {"enabled": args.bf16}}', []),
        ('{**base, "bf16": {"enabled": True}}', []),
        ("load_config(args)", []),
        (
            '{"bf16": {"enabled": True}, "torch_autocast": {"enabled": True}}',
            [5],
        ),
    ],
    ids=[
        "bf16",
        "fp16",
        "off",
        "auto",
        "computed",
        "spread",
        "call",
        "torch-autocast-allows-the-autocast",
    ],
)
def test_deepspeed_dict_literal_configs(config: str, expected: list[int]) -> None:
    assert lines(deepspeed_program(config)) == expected


@pytest.mark.parametrize(
    "scaler",
    [
        'torch.amp.GradScaler("cuda", enabled=False)',
        'torch.amp.GradScaler("cuda", enabled=args.fp16)',
        'torch.amp.GradScaler("cuda", enabled=not args.deepspeed)',
        'torch.amp.GradScaler("cuda") if args.fp16 else None',
        'args.use_amp and torch.amp.GradScaler("cuda")',
    ],
)
def test_switched_scalers_are_left_alone(scaler: str) -> None:
    source = deepspeed_program('{"train_batch_size": 8, "bf16": {"enabled": True}}', scaler)
    assert lines(source) == [7]


def test_scaler_in_the_arm_without_the_engine() -> None:
    source = """\
    import deepspeed
    import torch

    def setup(args, model):
        if args.use_deepspeed:
            ds = {"train_batch_size": 8, "fp16": {"enabled": True}}
            engine, opt, _, _ = deepspeed.initialize(model=model, config=ds)
            return engine, opt, None
        scaler = torch.amp.GradScaler("cuda")
        return model, build_optimizer(model), scaler
    """
    assert lines(source) == []


def test_scaler_under_a_branch_that_names_the_engine() -> None:
    source = """\
    import deepspeed
    import torch

    engine, opt, _, _ = deepspeed.initialize(model=m, config={"bf16": {"enabled": True}})
    if not args.deepspeed:
        scaler = torch.amp.GradScaler("cuda")
    """
    assert lines(source) == []


def test_autocast_not_around_the_engine_is_left_alone() -> None:
    source = """\
    import deepspeed
    import torch

    engine, opt, _, _ = deepspeed.initialize(model=m, config={"bf16": {"enabled": True}})
    with torch.autocast("cuda", dtype=torch.bfloat16):
        reference = teacher(batch)
    with accelerator.autocast():
        loss = engine(batch)
    """
    assert lines(source) == []


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        ('Accelerator(mixed_precision="fp16")', [4]),
        ('Accelerator(mixed_precision="bf16")', []),
        ("Accelerator(mixed_precision=args.mixed_precision)", []),
        ("Accelerator(**accelerator_kwargs)", []),
        ('Accelerator(True, False, "fp16")', [4]),
    ],
)
def test_accelerator(engine: str, expected: list[int]) -> None:
    source = f"""\
    import torch
    from accelerate import Accelerator
    accelerator = {engine}
    scaler = torch.amp.GradScaler("cuda")
    """
    assert lines(source) == expected


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        ('Trainer(precision="16-mixed")', [4]),
        ("Trainer(precision=16)", [4]),
        ('Trainer(precision="bf16-mixed")', []),
        ('Trainer(precision="32-true")', []),
        ('Trainer(plugins=[MixedPrecision("16-mixed", "cuda")])', [4]),
        ('Trainer(plugins=[MixedPrecision("16-mixed", "cuda", scaler=scaler)])', []),
        ("Trainer(precision=cfg.precision)", []),
    ],
)
def test_lightning(engine: str, expected: list[int]) -> None:
    source = f"""\
    import torch
    from lightning.pytorch import Trainer
    from lightning.pytorch.plugins import MixedPrecision
    scaler = torch.amp.GradScaler("cuda")
    trainer = {engine}
    """
    assert lines(source) == expected


def test_message_names_the_engine_and_the_setting() -> None:
    (finding,) = run_rule(
        PrecisionManagedTwice,
        deepspeed_program(
            '{"train_batch_size": 8, "bf16": {"enabled": True}, '
            '"torch_autocast": {"enabled": True}}'
        ),
    )
    message = finding[2]
    assert "DeepSpeed engine of line 3" in message
    assert "runs bf16 (`bf16.enabled: true` in the config dict on line 3)" in message


def test_the_engine_is_the_related_location() -> None:
    source = deepspeed_program('{"train_batch_size": 8, "fp16": {"enabled": True}}')
    related = run_rule_related(PrecisionManagedTwice, source)
    assert related == [
        (5, [(3, "DeepSpeed runs fp16: `fp16.enabled: true` in the config dict on line 3")]),
        (7, [(3, "DeepSpeed runs fp16: `fp16.enabled: true` in the config dict on line 3")]),
    ]


def test_deepspeed_json_file_beside_the_module(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "zero2.json").write_text(
        '{\n  "train_batch_size": 16,\n  "fp16": {"enabled": true}\n}\n', encoding="utf-8"
    )
    module = tmp_path / "train.py"
    module.write_text(deepspeed_program('"zero2.json"'), encoding="utf-8")
    result = lint_paths([module], jobs=1, select=["AMP014"])
    assert [(d.line, d.code) for d in result.diagnostics] == [(5, "AMP014"), (7, "AMP014")]
    assert "`fp16.enabled: true` in zero2.json, line 3" in result.diagnostics[0].message
    (module.parent / "zero2.json").write_text('{"fp16": {"enabled": false}}', encoding="utf-8")
    assert not lint_paths([module], jobs=1, select=["AMP014"]).diagnostics


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_example_reads_its_deepspeed_config_and_reports_scaler_and_autocast() -> None:
    result = lint_paths([EXAMPLES / "deepspeed_fp16_with_torch_amp.py"], jobs=1)
    found = [(d.line, d.code) for d in result.diagnostics]
    assert found == [(33, "AMP014"), (36, "AMP014")]
    assert all(
        "`fp16.enabled: true` in ds_config_fp16.json, line 9" in d.message
        for d in result.diagnostics
    )
    assert not lint_paths([EXAMPLES / "deepspeed_fp16.py"], jobs=1).diagnostics


def test_a_scaler_in_an_unrelated_function_of_the_file_is_left_alone() -> None:
    source = """\
    import torch
    from accelerate import Accelerator

    def bench_accelerate(model, batch):
        accelerator = Accelerator(mixed_precision="fp16")
        model = accelerator.prepare(model)
        accelerator.backward(model(batch).loss)

    def bench_native_amp(model, batch):
        scaler = torch.amp.GradScaler("cuda")
        scaler.scale(model(batch).loss).backward()
    """
    assert lines(source) == []


def test_a_scaler_in_the_function_that_builds_the_engine_through_a_helper() -> None:
    source = """\
    import deepspeed
    import torch

    def build_engine(model):
        engine, optimizer, _, _ = deepspeed.initialize(
            model=model, config={"train_batch_size": 8, "fp16": {"enabled": True}}
        )
        return engine, optimizer

    def train(model, loader):
        engine, optimizer = build_engine(model)
        scaler = torch.amp.GradScaler("cuda")
    """
    assert lines(source) == [12]
