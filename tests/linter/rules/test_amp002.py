"""AMP002 fp16-amp-with-bf16-checkpoint: fp16 sites, bf16 origins, pairing, messages."""

from __future__ import annotations

import re
import textwrap

import pytest
from rule_runner import run_rule, run_rule_related

from linter.rules import Fp16AmpWithBf16Checkpoint
from linter.rules._bf16_families import BF16_FAMILIES, bf16_family


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
