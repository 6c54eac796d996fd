"""Reading config files as data: safe loaders, size cap, notes, and what each shape picks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linter.model.settings._config_files import (
    ACCELERATE,
    DEEPSPEED,
    GENERIC,
    LIGHTNING_CLI,
    MAX_CONFIG_BYTES,
    TRAINING_ARGUMENTS,
    ConfigFile,
    precision_facts,
    precision_of,
    project_root,
    read_config,
    shape_of,
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_deepspeed_json_bf16_is_read_with_the_line_of_its_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "ds.json",
        '{\n  "train_micro_batch_size_per_gpu": 4,\n  "bf16": {\n    "enabled": true\n  }\n}\n',
    )
    facts = precision_facts(read_config(path))
    assert (facts.shape, facts.precision, facts.engine_precision) == (DEEPSPEED, "bf16", True)
    assert [(s.key, s.value, s.line) for s in facts.evidence] == [("bf16.enabled", True, 4)]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"fp16": {"enabled": True}, "train_batch_size": 8}, ("fp16", True, False)),
        ({"fp16": {"enabled": False}, "bf16": {"enabled": False}}, ("fp32", False, False)),
        ({"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}, (None, None, False)),
        ({"zero_optimization": {"stage": 3}}, ("fp32", False, False)),
        (
            {"train_batch_size": 8, "torch_autocast": {"enabled": True, "dtype": "bfloat16"}},
            ("bf16", False, True),
        ),
        ({"fp16": {"enabled": True}, "bf16": {"enabled": True}}, (None, True, False)),
        ({"bfloat16": {"enabled": True}, "train_batch_size": 8}, ("bf16", True, False)),
    ],
    ids=["fp16", "both-off", "auto", "no-section", "torch-autocast", "both-on", "bfloat16-alias"],
)
def test_deepspeed_precision(config: dict, expected: tuple) -> None:
    facts = precision_facts(ConfigFile("ds.json", config), DEEPSPEED)
    assert (facts.precision, facts.engine_precision, facts.torch_autocast) == expected


def test_accelerate_yaml_is_recognised_by_its_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "default_config.yaml",
        "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n"
        "mixed_precision: fp16\nnum_processes: 2\n",
    )
    config = read_config(path)
    assert shape_of(config) == ACCELERATE
    facts = precision_facts(config)
    assert facts.precision == "fp16"
    assert facts.evidence[0].line == 3


def test_lightning_cli_yaml_reads_trainer_precision(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "fit.yaml",
        "seed_everything: 1\ntrainer:\n  max_epochs: 3\n  precision: bf16-mixed\n"
        "model:\n  lr: 0.1\n",
    )
    config = read_config(path)
    assert shape_of(config) == LIGHTNING_CLI
    facts = precision_facts(config)
    assert (facts.precision, facts.evidence[0].line) == ("bf16", 4)


@pytest.mark.parametrize(
    ("arguments", "precision"),
    [
        ({"output_dir": "out", "bf16": True, "fp16": False}, "bf16"),
        ({"output_dir": "out", "fp16": True}, "fp16"),
        ({"output_dir": "out", "fp16": False}, "fp32"),
        ({"output_dir": "out", "fp16": True, "bf16": True}, None),
    ],
)
def test_training_arguments_json(tmp_path: Path, arguments: dict, precision: str | None) -> None:
    config = read_config(write(tmp_path, "args.json", json.dumps(arguments)))
    assert shape_of(config) == TRAINING_ARGUMENTS
    assert precision_facts(config).precision == precision


@pytest.mark.parametrize(
    ("text", "precision"),
    [
        ("training:\n  precision: bf16\n  lr: 1.0e-4\n", "bf16"),
        ("amp: true\ndtype: bfloat16\n", None),  # `amp: true` names no dtype
        ("network:\n  dtype: float16\ntrainer:\n  precision: 16-mixed\n", "fp16"),
        ("precision: ${oc.env:PRECISION}\n", None),
        ("precision: bf16\nmixed_precision: fp16\n", None),
        ("fp16: false\nbf16: true\n", "bf16"),
    ],
    ids=["nested", "amp-flag", "agreeing", "interpolation", "conflicting", "booleans"],
)
def test_generic_yaml_precision_keys(tmp_path: Path, text: str, precision: str | None) -> None:
    config = read_config(write(tmp_path, "config.yaml", text))
    facts = precision_facts(config)
    assert (facts.shape, facts.precision) == (GENERIC, precision)


def test_toml_is_read_with_tomllib(tmp_path: Path) -> None:
    config = read_config(write(tmp_path, "train.toml", '[trainer]\nprecision = "bf16-mixed"\n'))
    assert config.get("trainer.precision") == "bf16-mixed"


@pytest.mark.parametrize(
    ("name", "text", "note"),
    [
        ("broken.json", '{"bf16": {"enabled": true,}', "cannot parse"),
        ("broken.yaml", "a: [1, 2\n", "cannot parse"),
        ("list.yaml", "- a\n- b\n", "the top level is a list"),
        ("config.ini", "[a]\n", "not a JSON, YAML or TOML file"),
        ("tag.yaml", "a: !!python/object/apply:os.system ['true']\n", "cannot parse"),
    ],
    ids=["json", "yaml", "not-a-mapping", "suffix", "python-tag"],
)
def test_unreadable_config_is_a_one_line_note(
    tmp_path: Path, name: str, text: str, note: str
) -> None:
    config = read_config(write(tmp_path, name, text))
    assert config.data is None
    assert note in (config.note or "")
    assert str(tmp_path / name) in (config.note or "")
    assert "\n" not in (config.note or "")


def test_an_oversized_config_is_not_read(tmp_path: Path) -> None:
    path = write(tmp_path, "huge.json", '{"a": "' + "x" * MAX_CONFIG_BYTES + '"}')
    config = read_config(path)
    assert config.data is None
    assert "larger than" in (config.note or "")


def test_a_missing_config_is_a_note(tmp_path: Path) -> None:
    config = read_config(tmp_path / "absent.json")
    assert config.data is None
    assert "cannot read" in (config.note or "")


def test_an_edited_config_is_read_again(tmp_path: Path) -> None:
    path = write(tmp_path, "ds.json", '{"bf16": {"enabled": true}}')
    assert read_config(path).get("bf16.enabled") is True
    path.write_text('{"bf16": {"enabled": false}, "fp16": {"enabled": true}}', encoding="utf-8")
    assert read_config(path).get("bf16.enabled") is False


@pytest.mark.parametrize(
    ("value", "precision"),
    [
        ("bf16-mixed", "bf16"),
        ("BF16", "bf16"),
        (16, "fp16"),
        ("16-mixed", "fp16"),
        ("no", "fp32"),
        (True, None),
        ("auto", None),
        ([16], None),
    ],
)
def test_precision_values(value: object, precision: str | None) -> None:
    assert precision_of(value) == precision


def test_project_root_is_the_nearest_folder_with_a_marker(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    module = tmp_path / "src" / "pkg" / "train.py"
    module.write_text("", encoding="utf-8")
    assert project_root(module) == tmp_path.resolve()


def test_an_empty_yaml_file_is_an_empty_config(tmp_path: Path) -> None:
    config = read_config(write(tmp_path, "none.yaml", "# no callbacks\n"))
    assert (config.data, config.note) == ({}, None)
