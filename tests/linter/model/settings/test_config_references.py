"""Which configs a module loads (and where they resolve), the values its code reads from them,
the dtypes those values decide, and the engines that manage precision because of them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.settings._config_dtypes import ConfigDtypes
from linter.model.settings._config_references import (
    DEEPSPEED_READER,
    FILE_READER,
    HYDRA_READER,
    TRAINING_ARGUMENTS_READER,
    config_dependencies,
    config_notes,
    config_read,
    config_references,
)
from linter.model.syntax._dotted_names import ImportAliases
from linter.model.syntax._module_index import module_index
from linter.model.values._precision_engines import precision_engines

DS_BF16 = '{\n  "train_batch_size": 8,\n  "bf16": {"enabled": true}\n}\n'


def project(tmp_path: Path, files: dict[str, str], module: str = "train.py") -> ModuleContext:
    """Write ``files`` under a project root and return the context of ``module``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    path = tmp_path / module
    source = path.read_text(encoding="utf-8")
    return ModuleContext(str(path), source, cst.parse_module(source))


def test_deepspeed_json_named_by_initialize(tmp_path: Path) -> None:
    context = project(
        tmp_path,
        {
            "ds_config.json": DS_BF16,
            "train.py": """\
                import deepspeed
                engine, *_ = deepspeed.initialize(model=model, config="ds_config.json")
            """,
        },
    )
    (reference,) = config_references(context)
    assert (reference.reader, reference.spelled, reference.known) == (
        DEEPSPEED_READER,
        "ds_config.json",
        True,
    )
    assert reference.configs[0].get("bf16.enabled") is True
    assert config_dependencies(context) == (str((tmp_path / "ds_config.json").resolve()),)


@pytest.mark.parametrize(
    "call",
    [
        "deepspeed.initialize(args=args, model=model)",
        "deepspeed.initialize(model=model, config=args.deepspeed_config)",
        "deepspeed.initialize(model=model, config_params=json.load(open(args.deepspeed)))",
    ],
    ids=["args-only", "flag", "json-load"],
)
def test_deepspeed_config_from_a_flag_default(tmp_path: Path, call: str) -> None:
    flag = "--deepspeed" if "args.deepspeed)" in call else "--deepspeed_config"
    context = project(
        tmp_path,
        {
            "configs/zero2.json": DS_BF16,
            "train.py": f"""\
                import argparse, json
                import deepspeed
                parser = argparse.ArgumentParser()
                parser.add_argument("{flag}", default="configs/zero2.json")
                args = parser.parse_args()
                engine, *_ = {call}
            """,
        },
    )
    (reference,) = [r for r in config_references(context) if r.reader == DEEPSPEED_READER]
    assert reference.known
    assert reference.configs[0].path == str((tmp_path / "configs" / "zero2.json").resolve())


def test_path_relative_to_the_module_then_the_project_root(tmp_path: Path) -> None:
    context = project(
        tmp_path,
        {
            "ds.json": DS_BF16,
            "scripts/train.py": """\
                import os
                import deepspeed
                here = os.path.dirname(__file__)
                deepspeed.initialize(model=model, config="ds.json")
            """,
        },
        module="scripts/train.py",
    )
    (reference,) = config_references(context)
    assert reference.known
    assert reference.consulted == (
        str((tmp_path / "scripts" / "ds.json").resolve()),
        str((tmp_path / "ds.json").resolve()),
    )


def test_path_joined_onto_the_modules_folder(tmp_path: Path) -> None:
    context = project(
        tmp_path,
        {
            "conf/ds.json": DS_BF16,
            "train.py": """\
                import os
                import deepspeed
                path = os.path.join(os.path.dirname(__file__), "conf", "ds.json")
                deepspeed.initialize(model=model, config=path)
            """,
        },
    )
    assert config_references(context)[0].known


@pytest.mark.parametrize(
    "spelled",
    ["missing.json", "/etc/ds.json", "../outside.json", "ds\\0.json"],
    ids=["absent", "abs", "up", "nul"],
)
def test_unresolvable_paths_are_unknown(tmp_path: Path, spelled: str) -> None:
    (tmp_path / "outside.json").write_text(DS_BF16, encoding="utf-8")
    context = project(
        tmp_path / "proj",
        {"train.py": f'import deepspeed\ndeepspeed.initialize(model=m, config="{spelled}")\n'},
    )
    (reference,) = config_references(context)
    assert not reference.known
    assert precision_engines(context) == ()


def test_a_module_without_a_file_on_disk_resolves_nothing() -> None:
    source = 'import deepspeed\ndeepspeed.initialize(model=m, config="ds_config.json")\n'
    context = ModuleContext("<stdin>", source, cst.parse_module(source))
    assert not config_references(context)[0].known


def test_dict_literal_config_and_its_mutation(tmp_path: Path) -> None:
    literal = project(
        tmp_path,
        {
            "train.py": """\
                import deepspeed
                ds_config = {"train_batch_size": 8, "fp16": {"enabled": True}}
                deepspeed.initialize(model=model, config=ds_config)
            """
        },
    )
    (reference,) = config_references(literal)
    assert reference.configs[0].get("fp16.enabled") is True
    assert reference.configs[0].default_line == 2
    mutated = project(
        tmp_path,
        {
            "train.py": """\
                import deepspeed
                ds_config = {"train_batch_size": 8, "fp16": {"enabled": True}}
                ds_config["fp16"]["enabled"] = args.fp16
                deepspeed.initialize(model=model, config=ds_config)
            """
        },
    )
    assert not config_references(mutated)[0].configs


def test_unparseable_config_is_a_note_not_an_error(tmp_path: Path) -> None:
    context = project(
        tmp_path,
        {
            "ds.json": '{"bf16": {"enabled": true,,}}',
            "train.py": 'import deepspeed\ndeepspeed.initialize(model=m, config="ds.json")\n',
        },
    )
    (note,) = config_notes(context)
    assert note.startswith("cannot parse ")
    assert "ds.json" in note
    assert precision_engines(context) == ()


HYDRA_MAIN = """\
    import hydra
    import torch

    @hydra.main(config_path="conf", config_name="train", version_base=None)
    def main(cfg):
        dtype = getattr(torch, cfg.precision.dtype)
        with torch.autocast("cuda", dtype=dtype):
            pass
"""


def hydra_project(tmp_path: Path, options: dict[str, str]) -> ModuleContext:
    files = {
        "conf/train.yaml": "defaults:\n  - precision: bf16\n  - _self_\nlr: 0.1\n",
        "train.py": HYDRA_MAIN,
    }
    files.update({f"conf/precision/{name}.yaml": text for name, text in options.items()})
    return project(tmp_path, files)


def dtype_of_autocast(context: ModuleContext):
    index = module_index(context)
    aliases = ImportAliases(index.nodes(cst.Import) + index.nodes(cst.ImportFrom))
    call = next(c for c in index.nodes(cst.Call) if "autocast" in context.module.code_for_node(c))
    dtype = call.args[1].value
    return ConfigDtypes(index, aliases, config_references(context)).of(dtype)


def test_hydra_group_options_all_bf16_decide_the_dtype(tmp_path: Path) -> None:
    context = hydra_project(tmp_path, {"bf16": "dtype: bfloat16\n", "bf16_large": "dtype: bf16\n"})
    (reference,) = config_references(context)
    assert reference.reader == HYDRA_READER
    assert [group for group, _ in reference.groups] == ["precision"]
    verdict = dtype_of_autocast(context)
    assert verdict is not None
    assert verdict.dtypes == {"bf16"}
    assert str((tmp_path / "conf" / "precision").resolve()) in config_dependencies(context)


def test_hydra_group_with_an_fp16_option_is_not_bf16_only(tmp_path: Path) -> None:
    context = hydra_project(tmp_path, {"bf16": "dtype: bfloat16\n", "fp16": "dtype: float16\n"})
    verdict = dtype_of_autocast(context)
    assert verdict is not None
    assert verdict.dtypes == {"bf16", "fp16"}


def test_hydra_option_without_the_key_leaves_the_dtype_unknown(tmp_path: Path) -> None:
    context = hydra_project(tmp_path, {"bf16": "dtype: bfloat16\n", "other": "lr: 1\n"})
    assert dtype_of_autocast(context) is None


def test_primary_config_value_overrides_the_group(tmp_path: Path) -> None:
    context = project(
        tmp_path,
        {
            "conf/train.yaml": "defaults:\n  - precision: a\nprecision:\n  dtype: bfloat16\n",
            "conf/precision/a.yaml": "dtype: float16\n",
            "train.py": HYDRA_MAIN,
        },
    )
    verdict = dtype_of_autocast(context)
    assert verdict is not None
    assert verdict.dtypes == {"bf16"}


@pytest.mark.parametrize(
    ("expression", "dtypes"),
    [
        ('torch.bfloat16 if cfg.precision == "bf16" else torch.float16', {"bf16"}),
        ('torch.float16 if cfg.precision != "bf16" else torch.bfloat16', {"bf16"}),
        ('{"bf16": torch.bfloat16, "fp16": torch.float16}[cfg.precision]', {"bf16"}),
        ("torch.bfloat16 if cfg.use_bf16 else torch.float16", {"bf16"}),
        ("torch.bfloat16 if not cfg.use_bf16 else torch.float16", {"fp16"}),
        ("getattr(torch, cfg.missing)", None),
        ("torch.bfloat16 if other.bf16 else torch.float16", None),
    ],
)
def test_dtype_expressions_over_an_omegaconf_load(
    tmp_path: Path, expression: str, dtypes: set[str] | None
) -> None:
    context = project(
        tmp_path,
        {
            "config.yaml": "precision: bf16\nuse_bf16: true\n",
            "train.py": f"""\
                import torch
                from omegaconf import OmegaConf
                cfg = OmegaConf.load("config.yaml")
                with torch.autocast("cuda", {expression}):
                    pass
            """,
        },
    )
    verdict = dtype_of_autocast(context)
    assert (verdict.dtypes if verdict is not None else None) == dtypes


def test_training_arguments_json_read_by_hf_argument_parser(tmp_path: Path) -> None:
    context = project(
        tmp_path,
        {
            "args.json": '{"output_dir": "out", "bf16": true, "fp16": false}',
            "train.py": """\
                from transformers import HfArgumentParser, TrainingArguments
                parser = HfArgumentParser((ModelArguments, TrainingArguments))
                model_args, training_args = parser.parse_json_file(json_file="args.json")
                flag = training_args.bf16
            """,
        },
    )
    (reference,) = config_references(context)
    assert reference.reader == TRAINING_ARGUMENTS_READER
    assert reference.names == ("model_args", "training_args")
    index = module_index(context)
    flag = next(
        a.value
        for a in index.nodes(cst.Assign)
        if getattr(a.targets[0].target, "value", None) == "flag"
    )
    read = config_read(config_references(context), index, flag)
    assert read is not None
    assert [v.value for _c, v in read.values] == [True]


def test_yaml_safe_load_through_a_with_open(tmp_path: Path) -> None:
    context = project(
        tmp_path,
        {
            "config.yaml": "train:\n  dtype: bfloat16\n",
            "train.py": """\
                import yaml
                with open("config.yaml") as f:
                    cfg = yaml.safe_load(f)
            """,
        },
    )
    (reference,) = config_references(context)
    assert (reference.reader, reference.known, reference.names) == (FILE_READER, True, ("cfg",))
    assert reference.values("train.dtype")[0][1].value == "bfloat16"


def test_engines_from_a_deepspeed_file_and_arguments(tmp_path: Path) -> None:
    context = project(
        tmp_path,
        {
            "ds.json": DS_BF16,
            "train.py": """\
                import deepspeed
                from accelerate import Accelerator
                from lightning import Trainer
                engine, opt, _, _ = deepspeed.initialize(model=m, config="ds.json")
                accelerator = Accelerator(mixed_precision="fp16")
                trainer = Trainer(precision=16)
                other = Trainer(precision="bf16-mixed")
                unknown = Accelerator(mixed_precision=args.mixed_precision)
            """,
        },
    )
    found = [(e.framework, e.precision, e.scales, e.names) for e in precision_engines(context)]
    assert found == [
        ("DeepSpeed", "bf16", False, ("engine",)),
        ("Accelerate", "fp16", True, ()),
        ("Lightning", "fp16", True, ()),
        ("Lightning", "bf16", False, ()),
    ]
    assert precision_engines(context)[0].source == "`bf16.enabled: true` in ds.json, line 3"


def test_shipped_accelerate_configs_decide_an_accelerator_without_mixed_precision(
    tmp_path: Path,
) -> None:
    accelerate = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n"
    files = {
        "configs/one_gpu.yaml": accelerate + "mixed_precision: fp16\n",
        "configs/multi.yaml": accelerate + "mixed_precision: fp16\n",
        "configs/unrelated.yaml": "lr: 0.1\n",
        "train.py": "from accelerate import Accelerator\naccelerator = Accelerator()\n",
    }
    (engine,) = precision_engines(project(tmp_path, files))
    assert (engine.framework, engine.precision) == ("Accelerate", "fp16")
    files["configs/bf16.yaml"] = accelerate + "mixed_precision: bf16\n"
    assert precision_engines(project(tmp_path, files)) == ()
