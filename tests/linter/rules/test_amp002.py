"""AMP002 fp16-amp-with-bf16-checkpoint: fp16 sites, bf16 origins, pairing, messages."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from rule_runner import run_rule, run_rule_related

from linter._rule import ModuleContext
from linter.api import lint_paths
from linter.config import ConfigError, load_settings
from linter.model.values._bf16_families import BF16_FAMILIES, bf16_family
from linter.rules import Fp16AmpWithBf16Checkpoint


def lines(source: str) -> list[int]:
    found = run_rule(Fp16AmpWithBf16Checkpoint, textwrap.dedent(source))
    return [line for line, _col, _msg in found]


AUTOCAST_LOOP = """\
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
for batch in loader:
    with {autocast}:
        loss = model(**batch).loss
    loss.backward()
"""


@pytest.mark.parametrize(
    "autocast",
    [
        'torch.autocast("cuda", dtype=torch.float16)',
        'torch.autocast(device_type="cuda")',
        'torch.amp.autocast("cuda")',
        "torch.cuda.amp.autocast()",
        "torch.cuda.amp.autocast(dtype=torch.half)",
        'torch.autocast("cuda", dtype="float16")',
    ],
)
def test_fp16_autocast_spellings_are_reported(autocast: str) -> None:
    assert lines(AUTOCAST_LOOP.format(autocast=autocast)) == [6]


@pytest.mark.parametrize(
    "autocast",
    [
        'torch.autocast("cuda", dtype=torch.bfloat16)',
        'torch.autocast("cpu")',
        'torch.autocast("cuda", enabled=False)',
        "torch.cuda.amp.autocast(enabled=args.fp16)",
        "torch.autocast(device.type, dtype=amp_dtype)",
        "torch.no_grad()",
    ],
)
def test_bf16_cpu_disabled_or_runtime_autocast_is_not_reported(autocast: str) -> None:
    assert lines(AUTOCAST_LOOP.format(autocast=autocast)) == []


def test_autocast_under_import_aliases() -> None:
    source = """\
    import torch as th
    from torch import autocast as ac
    model = Net().to(th.bfloat16)
    model.train()
    with ac("cuda", dtype=th.half):
        out = model(x)
    """
    assert lines(source) == [5]


@pytest.mark.parametrize(
    "load",
    [
        'from_pretrained("org/lm", torch_dtype=torch.bfloat16)',
        'from_pretrained("org/lm", dtype="bfloat16")',
        'from_pretrained("org/lm", torch_dtype=DTYPE)',
        'from_pretrained("google/flan-t5-base")',
        'from_pretrained("google/flan-t5-base", dtype="auto")',
        'from_pretrained("google/flan-t5-base", torch_dtype=torch.float32)',
        'from_pretrained("org/lm").bfloat16()',
        'from_pretrained("org/lm").to("cuda", torch.bfloat16)',
    ],
)
def test_bf16_origins(load: str) -> None:
    source = f"""\
import torch
from transformers import AutoModel
DTYPE = torch.bfloat16
model = AutoModel.from_pretrained and AutoModel.{load}
model = AutoModel.{load}
with torch.autocast("cuda", dtype=torch.float16):
    model(x).loss.backward()
"""
    assert lines(source) == [6]


@pytest.mark.parametrize(
    "load",
    [
        'from_pretrained("org/lm")',
        'from_pretrained("org/lm", torch_dtype=torch.float16)',
        'from_pretrained("org/lm", torch_dtype=dtype)',
        'from_pretrained("org/lm", torch_dtype=torch.bfloat16).float()',
        'from_pretrained("org/lm", torch_dtype=torch.bfloat16).to(torch.float32)',
        'from_pretrained("org/lm", revision="bf16")',
    ],
)
def test_not_bf16_origins(load: str) -> None:
    source = f"""\
import torch
from transformers import AutoModel
model = AutoModel.{load}
with torch.autocast("cuda", dtype=torch.float16):
    model(x).loss.backward()
"""
    assert lines(source) == []


def test_message_and_related_location_name_the_bf16_site() -> None:
    source = """\
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(
        "org/lm",
        torch_dtype=torch.bfloat16,
    )
    with torch.autocast("cuda", dtype=torch.float16):
        model(x).loss.backward()
    """
    ((_line, _col, message),) = run_rule(Fp16AmpWithBf16Checkpoint, textwrap.dedent(source))
    assert (
        "fp16 autocast applies fp16 to `model`, which was loaded as bfloat16 at line 6" in message
    )
    assert "65504" in message
    assert "below 1" in message
    assert "NaN" in message
    assert run_rule_related(Fp16AmpWithBf16Checkpoint, textwrap.dedent(source)) == [
        (8, [(6, "loaded as bfloat16")])
    ]


def test_family_message_names_checkpoint_and_family() -> None:
    source = """\
    from transformers import AutoModelForSeq2SeqLM, Trainer, TrainingArguments
    model = AutoModelForSeq2SeqLM.from_pretrained("google/mt5-base")
    Trainer(model=model, args=TrainingArguments("o", fp16=True)).train()
    """
    ((line, _col, message),) = run_rule(Fp16AmpWithBf16Checkpoint, textwrap.dedent(source))
    assert line == 3
    assert "loads `google/mt5-base`, a mT5 checkpoint pretrained in bfloat16 (line 2)" in message
    assert "use `bf16=True`" in message


@pytest.mark.parametrize("fp16", ["fp16=args.fp16", "fp16=False", "bf16=True"])
def test_training_arguments_without_a_literal_fp16_true(fp16: str) -> None:
    source = f"""\
from transformers import AutoModel, Trainer, TrainingArguments
model = AutoModel.from_pretrained("google/gemma-3-1b-it")
Trainer(model=model, args=TrainingArguments("o", {fp16})).train()
"""
    assert lines(source) == []


def test_fp16_arguments_of_another_trainer_do_not_apply() -> None:
    source = """\
    from transformers import AutoModel, Trainer, TrainingArguments
    bf16_model = AutoModel.from_pretrained("google/gemma-3-1b-it")
    fp16_model = AutoModel.from_pretrained("bert-base-cased")
    fp16_args = TrainingArguments("a", fp16=True)
    bf16_args = TrainingArguments("b", bf16=True)
    Trainer(model=fp16_model, args=fp16_args).train()
    Trainer(model=bf16_model, args=bf16_args).train()
    """
    assert lines(source) == []


def test_accelerator_applies_to_the_models_it_prepares() -> None:
    source = """\
    import torch
    from accelerate import Accelerator
    from transformers import AutoModel
    accelerator = Accelerator(mixed_precision="fp16")
    lm = AutoModel.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
    head = torch.nn.Linear(10, 10)
    head, opt = accelerator.prepare(head, opt)
    loss.backward()
    """
    assert lines(source) == []
    assert lines(source.replace("prepare(head, opt)", "prepare(lm, opt)")) == [4]


def test_grad_scaler_pairs_through_the_optimizer_it_steps() -> None:
    source = """\
    import torch
    from transformers import AutoModel
    model = AutoModel.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
    other = torch.nn.Linear(4, 4)
    optimizer = torch.optim.AdamW(other.parameters())
    scaler = torch.amp.GradScaler("cuda")
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    """
    assert lines(source) == []
    paired = source.replace("AdamW(other.", "AdamW(model.")
    assert lines(paired) == [6]
    assert lines(paired.replace('GradScaler("cuda")', "GradScaler(enabled=args.fp16)")) == []


def test_lightning_precision_applies_to_the_module_passed_to_fit() -> None:
    source = """\
    import lightning as L
    from transformers import AutoModel

    class LitModel(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.backbone = AutoModel.from_pretrained("google/t5-v1_1-small")

    L.Trainer(precision=16).fit(LitModel())
    trainer = L.Trainer(precision="16-mixed")
    trainer.fit(LitModel())
    pl_trainer = L.Trainer(precision="bf16-mixed")
    pl_trainer.fit(LitModel())
    """
    # Both fp16 Trainers fit the same bf16 backbone: one finding, the second site related.
    assert run_rule_related(Fp16AmpWithBf16Checkpoint, textwrap.dedent(source)) == [
        (
            9,
            [(7, "loads `google/t5-v1_1-small`"), (10, '`precision="16-mixed"` also applies fp16')],
        )
    ]


def test_inference_only_file_is_not_reported() -> None:
    source = """\
    import torch
    from transformers import AutoModel
    model = AutoModel.from_pretrained("google/flan-t5-xl", torch_dtype=torch.bfloat16).half()
    with torch.autocast("cuda", dtype=torch.float16):
        print(model.generate(x))
    """
    assert lines(source) == []
    # Training: the `.half()` is the fp16 site; the autocast then runs an fp16 model.
    assert lines(source + "loss.backward()\n") == [3]


def test_rebinding_a_name_ends_the_old_model() -> None:
    source = """\
    import torch
    from transformers import AutoModel
    model = AutoModel.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
    model = torch.nn.Linear(4, 4)
    model.train()
    with torch.autocast("cuda", dtype=torch.float16):
        model(x)
    """
    assert lines(source) == []


def test_model_kept_through_wrappers() -> None:
    source = """\
    import torch
    from peft import get_peft_model
    from transformers import AutoModel
    base = AutoModel.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
    model = torch.compile(get_peft_model(base.cuda(), config))
    model.train()
    with torch.autocast("cuda", dtype=torch.float16):
        model(x)
    """
    assert lines(source) == [7]


def test_one_finding_per_fp16_site_even_with_several_bf16_models() -> None:
    source = """\
    import torch
    from transformers import AutoModel
    a = AutoModel.from_pretrained("org/a", torch_dtype=torch.bfloat16)
    b = AutoModel.from_pretrained("org/b", torch_dtype=torch.bfloat16)
    a.train()
    with torch.autocast("cuda", dtype=torch.float16):
        out = a(x) + b(x)
    """
    assert lines(source) == [6]


@pytest.mark.parametrize(
    ("checkpoint", "family"),
    [
        ("google/flan-t5-xxl", "FLAN-T5"),
        ("./checkpoints/flan_t5_large-finetuned", "FLAN-T5"),
        ("google/t5-v1_1-large", "T5 v1.1"),
        ("google/t5-v1.1-base", "T5 v1.1"),
        ("google/mt5-xl", "mT5"),
        ("bigscience/T0pp", "T0"),
        ("google/gemma-3-27b-it", "Gemma 3"),
        ("google/functiongemma-270m-it", "Gemma 3"),
        ("google/gemma-4-e2b", "Gemma 4"),
        ("Qwen/Qwen2-7B-Instruct", "Qwen2"),
        ("t5-base", None),
        ("google/umt5-small", None),
        ("google/gemma-2-9b", None),
        ("Qwen/Qwen2.5-7B", None),
        ("bigscience/bloom-560m", None),
        ("meta-llama/Llama-2-7b-hf", None),
    ],
)
def test_family_table_matches_documented_families_only(checkpoint: str, family: str | None) -> None:
    found = bf16_family(checkpoint)
    assert (found.name if found else None) == family


def test_every_family_row_cites_public_evidence() -> None:
    for family in BF16_FAMILIES:
        assert family.evidence
        assert all(re.match(r"https://\S+$", url) for url in family.evidence)


def test_message_names_the_first_bf16_model_the_autocast_runs() -> None:
    source = """\
    import torch
    from transformers import AutoModel
    first = AutoModel.from_pretrained("org/a", torch_dtype=torch.bfloat16)
    second = AutoModel.from_pretrained("org/b", torch_dtype=torch.bfloat16)
    first.train()
    with torch.autocast("cuda", dtype=torch.float16):
        out = second(first(x))
    """
    ((_line, _col, message),) = run_rule(Fp16AmpWithBf16Checkpoint, textwrap.dedent(source))
    assert "applies fp16 to `second`" in message


def test_model_followed_from_the_caller_into_a_parameter() -> None:
    source = """\
    import torch
    from transformers import AutoModelForCausalLM

    def train(net, loader):
        scaler = torch.amp.GradScaler("cuda")
        optimizer = torch.optim.AdamW(net.parameters())
        for batch in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = net(**batch).loss
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    def main():
        model = AutoModelForCausalLM.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
        train(model, loader=None)
    """
    ((_line, _col, message),) = run_rule(Fp16AmpWithBf16Checkpoint, textwrap.dedent(source))
    assert "`net`, which was loaded as bfloat16 at line 15" in message
    # One bf16 model trained under fp16 AMP is one finding: the autocast is a related site.
    assert run_rule_related(Fp16AmpWithBf16Checkpoint, textwrap.dedent(source)) == [
        (5, [(15, "loaded as bfloat16"), (8, "fp16 autocast also applies fp16")])
    ]


def test_parameter_shadows_a_bf16_global_of_the_same_name() -> None:
    source = """\
    import torch
    from transformers import AutoModel
    model = AutoModel.from_pretrained("org/lm", torch_dtype=torch.bfloat16)

    def train(model):
        with torch.autocast("cuda", dtype=torch.float16):
            model(x).sum().backward()

    train(torch.nn.Linear(4, 4))
    """
    assert lines(source) == []
    assert lines(source.replace("train(torch.nn.Linear(4, 4))", "train(model)")) == [6]


def test_method_parameter_followed_through_self_calls_and_recursion_terminates() -> None:
    source = """\
    import torch
    from transformers import AutoModel

    class Runner:
        def run(self):
            lm = AutoModel.from_pretrained("org/lm", dtype=torch.bfloat16)
            self.fit(lm, 3)

        def fit(self, module, epochs):
            if epochs:
                self.fit(module, epochs - 1)
            with torch.autocast("cuda"):
                module(x).sum().backward()
    """
    assert lines(source) == [12]


def test_self_in_a_method_is_not_a_parameter_to_follow() -> None:
    source = """\
    import torch

    class Trainer:
        def __init__(self, model):
            self.model = model
            self.scaler = torch.cuda.amp.GradScaler()

        def create_optimizer(self):
            self.optimizer = torch.optim.AdamW(self.model.parameters())

        def train_step(self, inputs):
            self.create_optimizer()
            self.scaler.step(self.optimizer)
            self.model.train()
    """
    assert lines(source) == []


@pytest.mark.parametrize("cast", ["model.half()", "model.to(torch.float16)"])
def test_the_fp16_cast_is_reported_once_not_again_at_the_autocast(cast: str) -> None:
    source = f"""\
import torch
from transformers import AutoModel
model = AutoModel.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
model = {cast}
with torch.autocast("cuda", dtype=torch.float16):
    model(x).sum().backward()
"""
    assert lines(source) == [4]


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("model.half()", [4]),
        ("model.to(torch.float16)", [4]),
        ("model.float()", []),
        ("model.to('cuda')", [5]),
        ("model.bfloat16()", [5]),
    ],
)
def test_in_place_casts_change_what_the_name_holds(statement: str, expected: list[int]) -> None:
    source = f"""\
import torch
from transformers import AutoModel
model = AutoModel.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
{statement}
with torch.autocast("cuda", dtype=torch.float16):
    model(x).sum().backward()
"""
    assert lines(source) == expected


# -- messages, related sites, reachable wording, options (issue 9) ------------------------------


def messages_of(source: str) -> list[str]:
    return [msg for *_pos, msg in run_rule(Fp16AmpWithBf16Checkpoint, textwrap.dedent(source))]


MIXED_PRECISION_FLAG = """\
import argparse
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM
parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", default={default}, choices=["no", "fp16", "bf16"])
args = parser.parse_args()
accelerator = Accelerator(mixed_precision=args.mixed_precision)
model = AutoModelForCausalLM.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
model, opt = accelerator.prepare(model, opt)
accelerator.backward(model(x).loss)
"""


def test_a_flag_that_may_choose_fp16_is_reported_as_reachable() -> None:
    (message,) = messages_of(MIXED_PRECISION_FLAG.format(default='"no"'))
    assert message.startswith("when run with --mixed_precision fp16, ")
    assert "`mixed_precision=args.mixed_precision` applies fp16 to `model`" in message


def test_a_flag_that_defaults_to_fp16_is_certain() -> None:
    (message,) = messages_of(MIXED_PRECISION_FLAG.format(default='"fp16"'))
    assert message.startswith("`mixed_precision=args.mixed_precision` applies fp16")


def test_a_flag_without_fp16_among_its_choices_is_not_reported() -> None:
    source = MIXED_PRECISION_FLAG.format(default='"no"').replace('"fp16", ', "")
    assert messages_of(source) == []


@pytest.mark.parametrize(
    ("origin", "words", "not_words"),
    [
        (
            'from_pretrained("org/lm", torch_dtype=torch.bfloat16)',
            "was loaded as bfloat16 at line 3",
            "pretrained",
        ),
        ('from_pretrained("org/lm").to(torch.bfloat16)', "was cast to bfloat16 at line 3", "pre"),
        (
            'from_pretrained("google/flan-t5-base")',
            "loads `google/flan-t5-base`, a FLAN-T5 checkpoint pretrained in bfloat16 (line 3)",
            "was ",
        ),
    ],
)
def test_message_says_where_the_bf16_comes_from(origin: str, words: str, not_words: str) -> None:
    source = f"""\
import torch
from transformers import AutoModel
model = AutoModel.{origin}
model = model.half()
model(x).sum().backward()
"""
    (message,) = messages_of(source)
    assert words in message
    assert not_words not in message.partition(words)[2].partition(";")[0].replace("bf16", "")


def test_no_backticks_around_english() -> None:
    source = """\
    import torch
    from transformers import AutoModel, Trainer, TrainingArguments
    model = AutoModel.from_pretrained("google/gemma-3-1b-it", torch_dtype=torch.float16)
    Trainer(model=model, args=TrainingArguments("o", fp16=True)).train()
    """
    (message,) = messages_of(source)
    assert "applies fp16 to the model, which loads" in message
    assert "`the model`" not in message
    for quoted in re.findall(r"`([^`]*)`", message):
        assert " " not in quoted or "=" in quoted or "(" in quoted, quoted


def test_one_finding_for_the_fp16_load_and_fp16_true_of_one_model() -> None:
    source = """\
    import torch
    from transformers import AutoModel, Trainer, TrainingArguments
    model = AutoModel.from_pretrained("google/gemma-3-1b-it", torch_dtype=torch.float16)
    args = TrainingArguments("o", fp16=True)
    Trainer(model=model, args=args).train()
    """
    assert run_rule_related(Fp16AmpWithBf16Checkpoint, textwrap.dedent(source)) == [
        (3, [(3, "loads `google/gemma-3-1b-it`"), (4, "`fp16=True` also applies fp16")])
    ]


@pytest.mark.parametrize("order", ["bf16 first", "fp16 first"])
def test_a_cast_after_the_fp16_site_is_never_its_origin(order: str) -> None:
    casts = ["self.m = self.m.bfloat16()", "self.m = self.m.half()"]
    if order == "fp16 first":
        casts.reverse()
    source = f"""\
import torch
class Runner:
    def setup(self):
        self.m = build()
        {casts[0]}
        {casts[1]}
        self.m(x).sum().backward()
"""
    found = messages_of(source)
    assert len(found) == (1 if order == "bf16 first" else 0)
    assert all("cast to bfloat16 at line 5" in message for message in found)


def test_fp16_not_bf16_supported_pairs_with_an_ungated_load_only() -> None:
    source = """\
    import torch
    from transformers import AutoModel, Trainer, TrainingArguments
    model = AutoModel.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
    args = TrainingArguments("o", fp16=not torch.cuda.is_bf16_supported())
    Trainer(model=model, args=args).train()
    """
    (message,) = messages_of(source)
    assert message.startswith("on a GPU without bf16 support, `fp16=not torch.cuda")
    gated = source.replace(
        "    model = AutoModel", "    if torch.cuda.is_bf16_supported():\n        model = AutoModel"
    )
    assert messages_of(gated) == []


@pytest.mark.parametrize(
    ("switch", "expected"),
    [
        ("fp16=True", [4]),
        ("fp16=torch.cuda.is_available()", [4]),
        ("fp16=use_fp16", [4]),
        ("fp16=not use_bf16", [4]),
        ("fp16=args.fp16", []),
        ("fp16=not torch.cuda.is_available()", []),
        ("fp16=False", []),
    ],
)
def test_fp16_switch_expressions(switch: str, expected: list[int]) -> None:
    source = f"""\
import torch
from transformers import AutoModel, Trainer, TrainingArguments
use_fp16, use_bf16 = True, False
args = TrainingArguments("o", {switch})
model = AutoModel.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
Trainer(model=model, args=args).train()
"""
    source = source.replace("use_fp16, use_bf16 = True, False", "use_fp16 = True\nuse_bf16 = False")
    assert lines(source) == [line + 1 for line in expected]


def test_extend_bf16_families_option() -> None:
    source = """\
    from transformers import AutoModel, Trainer, TrainingArguments
    model = AutoModel.from_pretrained("my-org/llm-7b")
    Trainer(model=model, args=TrainingArguments("o", fp16=True)).train()
    """
    assert lines(source) == []
    rule = Fp16AmpWithBf16Checkpoint({"extend-bf16-families": ["my-org/llm-*"]})
    context = ModuleContext(
        "s.py", textwrap.dedent(source), cst.parse_module(textwrap.dedent(source))
    )
    (finding,) = rule.check(context)
    assert "a my-org/llm-* checkpoint pretrained in bfloat16" in finding.message


def test_extend_bf16_families_is_read_from_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.amp-lint.fp16-amp-with-bf16-checkpoint]\nextend-bf16-families = ["my-org/*"]\n'
    )
    script = tmp_path / "train.py"
    script.write_text(
        "from transformers import AutoModel, Trainer, TrainingArguments\n"
        'model = AutoModel.from_pretrained("my-org/llm-7b")\n'
        'Trainer(model=model, args=TrainingArguments("o", fp16=True)).train()\n'
    )
    result = lint_paths([script], settings=load_settings(None, start=tmp_path), jobs=1)
    assert [(d.line, d.code) for d in result.diagnostics] == [(3, "AMP002")]
    (tmp_path / "pyproject.toml").write_text(
        "[tool.amp-lint.fp16-amp-with-bf16-checkpoint]\nextend-bf16-family = []\n"
    )
    with pytest.raises(ConfigError, match="unknown option 'extend-bf16-family'"):
        load_settings(None, start=tmp_path)


def test_the_switch_is_quoted_without_its_comma_or_comment() -> None:
    source = """\
    import torch
    from transformers import AutoModel, Trainer, TrainingArguments
    model = AutoModel.from_pretrained("org/lm", torch_dtype=torch.bfloat16)
    args = TrainingArguments(
        "o",
        fp16=True,  # faster on our V100s
    )
    Trainer(model=model, args=args).train()
    """
    (message,) = messages_of(source)
    assert message.startswith("`fp16=True` applies fp16 to `model`")


@pytest.mark.parametrize(("caster", "expected"), [("export_bf16", []), ("__init__", [6])])
def test_another_methods_cast_is_cited_only_when_it_runs_first(caster: str, expected: list) -> None:
    source = f"""\
import torch


class Runner:
    def train(self, loader):
        with torch.autocast("cuda", dtype=torch.float16):
            self.model(loader).sum().backward()

    def {caster}(self):
        self.model = build().to(torch.bfloat16)
"""
    assert lines(source) == expected


# -- issue 20: a component of a bf16 pipeline or model -------------------------------------------

_COMPONENT = """
import torch
from diffusers import DiffusionPipeline

pipe = DiffusionPipeline.from_pretrained("ckpt", torch_dtype=torch.bfloat16)
{setup}
{part} = pipe.{component}
optimizer = torch.optim.AdamW({part}.parameters())
scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    scaler.scale({part}(batch).mean()).backward()
    scaler.step(optimizer)
    scaler.update()
"""


@pytest.mark.parametrize(("part", "component"), [("transformer", "transformer"), ("net", "unet")])
def test_a_component_of_a_bf16_pipeline_is_bf16(part: str, component: str) -> None:
    source = _COMPONENT.format(setup="", part=part, component=component)
    assert lines(source) == [9]


def test_a_component_replaced_before_it_is_taken_is_not_the_pipelines() -> None:
    setup = 'pipe.unet = UNet2DConditionModel.from_pretrained("ckpt", subfolder="unet")'
    source = _COMPONENT.format(setup=setup, part="net", component="unet")
    assert lines(source) == []


@pytest.mark.parametrize("model", ["MODEL", '"google/flan-t5-large"'])
def test_a_trainer_given_a_checkpoint_name_is_named_by_it_not_none(model: str) -> None:
    source = f"""\
from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

MODEL = "google/flan-t5-large"


def main(data):
    args = Seq2SeqTrainingArguments("out", fp16=True)
    Seq2SeqTrainer(model={model}, args=args, train_dataset=data).train()
"""
    [(line, _column, message)] = run_rule(Fp16AmpWithBf16Checkpoint, source)
    assert line == 7
    assert "`None`" not in message
    assert message.startswith(
        "`fp16=True` applies fp16 to the checkpoint `google/flan-t5-large`, which is a FLAN-T5 "
        "checkpoint pretrained in bfloat16"
    )


def test_a_scaler_switched_by_a_conditional_expression_is_reported() -> None:
    source = """\
    import torch
    from transformers import AutoModelForCausalLM


    def train(loader, cfg):
        model = AutoModelForCausalLM.from_pretrained("x", torch_dtype=torch.bfloat16)
        optimizer = torch.optim.AdamW(model.parameters())
        scaler = torch.amp.GradScaler("cuda") if cfg.amp else None
        for batch in loader:
            loss = model(**batch).loss
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
    """
    assert lines(source) == [8]


_HELPERS = """\
import torch
from transformers import AutoModelForCausalLM


def load_model(name):
    return AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)


def fit(model, batches, optimizer, scaler):
    model.train()
    for batch in batches:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(**batch).loss
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
"""


def test_a_module_that_only_imports_the_training_words_is_not_parsed(tmp_path: Path) -> None:
    # The fp16 switches and the sign of training are a module's own nodes: `layers.py` names
    # `load_model` and `fit`, whose sources spell all of AMP002's words, but holds no switch
    # of its own (the autocast `fit` enters is found from `models.py`'s side). On the
    # seven library wheels, files parsed for the words of what they import alone were 726 of
    # 914; the bf16 origin may still come from an imported loader (`train.py`).
    (tmp_path / ".git").mkdir()
    (tmp_path / "models.py").write_text(_HELPERS)
    (tmp_path / "layers.py").write_text(
        "from models import fit, load_model\n\n\ndef run(name, batches, optimizer, scaler):\n"
        "    return fit(load_model(name), batches, optimizer, scaler)\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nfrom models import load_model\n\n"
        'model = load_model("google/gemma-3-1b-it")\n'
        "optimizer = torch.optim.AdamW(model.parameters())\n"
        'scaler = torch.amp.GradScaler("cuda")\n'
        "model.train()\n"
        "for batch in loader:\n"
        '    with torch.autocast("cuda", dtype=torch.float16):\n'
        "        loss = model(**batch).loss\n"
        "    scaler.scale(loss).backward()\n"
        "    scaler.step(optimizer)\n"
        "    scaler.update()\n"
    )
    result = lint_paths([tmp_path], select=["AMP002"], jobs=1)
    assert {Path(d.path).name for d in result.diagnostics} == {"train.py"}
    assert result.files_parsed == 2  # models.py and train.py; not layers.py
