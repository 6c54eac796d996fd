"""AMP008 grad-scaler-with-fp16-params: fp16 models, the GradScaler that unscales them, and the
many ways a model in fp16 still trains fp32 parameters (which must stay silent)."""

from __future__ import annotations

import importlib.util
import math
import textwrap
from pathlib import Path

import pytest
from rule_runner import run_rule, run_rule_related

from linter.rules import GradScalerWithBf16Autocast, GradScalerWithFp16Params


def findings(source: str) -> list[tuple[int, int, str]]:
    return run_rule(GradScalerWithFp16Params, textwrap.dedent(source))


def lines(source: str) -> list[int]:
    return [line for line, _col, _msg in findings(source)]


SCALER_LOOP = """\
import torch
from transformers import AutoModelForCausalLM

{setup}
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""


@pytest.mark.parametrize(
    "setup",
    [
        "model = Net().cuda().half()",
        "model = Net().cuda()\nmodel = model.half()",
        "model = Net()\nmodel.half()",
        "model = Net().to(torch.float16)",
        "model = Net().to(dtype=torch.half)",
        'model = Net().to("cuda", torch.float16)',
        'model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.float16)',
        'model = AutoModelForCausalLM.from_pretrained("gpt2", dtype="float16")',
        "kwargs = dict(torch_dtype=torch.float16)\n"
        'model = AutoModelForCausalLM.from_pretrained("gpt2", **kwargs)',
        "model = torch.compile(Net().half())",
    ],
)
def test_fp16_model_spellings_are_reported_at_the_cast_or_load(setup: str) -> None:
    source = SCALER_LOOP.format(setup=setup)
    [cast_line] = [
        number
        for number, line in enumerate(setup.splitlines(), start=4)
        if "half" in line or "float16" in line
    ]
    assert lines(source) == [cast_line]


@pytest.mark.parametrize(
    "scaler",
    [
        'scaler = torch.amp.GradScaler("cuda") if cfg.fp16 else None',
        'scaler = None if not cfg.fp16 else torch.amp.GradScaler("cuda")',
        'if cfg.fp16:\n            scaler = torch.amp.GradScaler("cuda")',
    ],
)
def test_a_scaler_switched_by_a_conditional_expression_counts_as_one_switched_by_an_if(
    scaler: str,
) -> None:
    # `GradScaler() if args.amp else None` is how most scripts switch the scaler; it made no
    # site before, where the same scaler under `if args.amp:` did.
    source = f"""\
    import torch
    from transformers import AutoModelForCausalLM


    def train(loader, cfg):
        model = AutoModelForCausalLM.from_pretrained("x", torch_dtype=torch.float16)
        optimizer = torch.optim.AdamW(model.parameters())
        {scaler}
        for batch in loader:
            loss = model(**batch).loss
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
    """
    assert lines(source) == [6]


@pytest.mark.parametrize(
    "setup",
    [
        "model = Net().cuda()",
        "model = Net().half().float()",
        "model = Net().half()\nmodel.float()",
        "model = Net().half()\nmodel = model.to(torch.float32)",
        "model = Net().to(torch.bfloat16)",
        'model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.float32)',
        'model = AutoModelForCausalLM.from_pretrained("gpt2", revision="fp16")',
        'model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=dtype)',
        'model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.float16, '
        "load_in_8bit=True)",
        "model = Net().half()\nmodel.requires_grad_(False)",
        "model = Net().half()\nfor p in model.parameters():\n    p.requires_grad = False",
        "model = Net().half()\nfor p in model.parameters():\n    p.data = p.data.float()",
        "model = Net().half()\nmodel.head.float()",
        "x = batch.half()\nmodel = Net()",
    ],
)
def test_models_that_train_fp32_parameters_are_not_reported(setup: str) -> None:
    assert lines(SCALER_LOOP.format(setup=setup)) == []


def test_the_message_names_the_model_the_scaler_and_the_error() -> None:
    [(_line, column, message)] = findings(SCALER_LOOP.format(setup="model = Net().half()"))
    assert column == 9
    assert message.startswith("`model` is cast to float16 here and a GradScaler (line 6)")
    assert "Attempting to unscale FP16 gradients" in message
    assert "drop the cast" in message


def test_a_load_is_reported_at_its_dtype_argument_with_load_advice() -> None:
    setup = 'model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.float16)'
    [(_line, column, message)] = findings(SCALER_LOOP.format(setup=setup))
    assert column == setup.index("torch_dtype") + 1
    assert "is loaded as float16 here" in message
    assert "load it in fp32" in message


def test_related_locations_are_the_scaler_the_optimizer_and_the_step() -> None:
    related = run_rule_related(GradScalerWithFp16Params, SCALER_LOOP.format(setup="model = Net()"))
    assert related == []
    source = SCALER_LOOP.format(setup="model = Net().half()")
    [(line, sites)] = run_rule_related(GradScalerWithFp16Params, source)
    assert line == 4
    assert [site_line for site_line, _ in sites] == [6, 5, 11]
    assert "`optimizer` trains its parameters" in sites[1][1]
    assert "`scaler.step(optimizer)` unscales them" in sites[2][1]


def test_unscale_before_clipping_ties_the_scaler_to_the_optimizer() -> None:
    source = """\
    import torch

    model = Net().cuda().half()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    """
    assert lines(source) == [3]


def test_a_training_function_called_with_the_fp16_model_is_reported() -> None:
    source = """\
    import torch


    def train_one_epoch(model, optimizer, scaler, loader):
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()


    def main(args):
        model = build_model(args).cuda()
        if args.channels_last:
            model = model.to(memory_format=torch.channels_last)
        model.half()
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
        scaler = torch.cuda.amp.GradScaler()
        for epoch in range(args.epochs):
            train_one_epoch(model, optimizer, scaler, loader)
    """
    assert lines(source) == [17]


def test_one_finding_per_model_however_many_switches_apply() -> None:
    source = """\
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator(mixed_precision="fp16")
    model = Net().half()
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    model, optimizer = accelerator.prepare(model, optimizer)
    for x, y in loader:
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.step(optimizer)
        scaler.update()
    """
    assert lines(source) == [5]


def test_a_runtime_mixed_precision_choice_is_reported_with_its_condition() -> None:
    source = """\
    import argparse
    import torch
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    parser = argparse.ArgumentParser()
    parser.add_argument("--mixed_precision", default="no", choices=["no", "fp16", "bf16"])
    args = parser.parse_args()
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.float16)
    optimizer = torch.optim.AdamW(model.parameters())
    model, optimizer = accelerator.prepare(model, optimizer)
    for batch in loader:
        accelerator.backward(model(**batch).loss)
        optimizer.step()
    """
    [(line, _col, message)] = findings(source)
    assert line == 10
    assert message.startswith("when run with --mixed_precision fp16, `model` is loaded as float16")


def test_lightning_mixed_precision_over_an_fp16_module_is_reported_but_16_true_is_not() -> None:
    source = """\
    import lightning as L
    import torch
    from transformers import AutoModelForSequenceClassification


    class Classifier(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = AutoModelForSequenceClassification.from_pretrained(
                "bert-base-uncased", torch_dtype=torch.float16
            )

        def training_step(self, batch, batch_idx):
            return self.model(**batch).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=2e-5)


    trainer = L.Trainer(precision={precision})
    trainer.fit(Classifier(), train_loader)
    """
    assert lines(source.format(precision='"16-mixed"')) == [10]
    assert lines(source.format(precision="16")) == [10]
    assert lines(source.format(precision='"16-true"')) == []
    assert lines(source.format(precision='"bf16-mixed"')) == []


def test_a_disabled_scaler_is_not_reported() -> None:
    source = SCALER_LOOP.format(setup="model = Net().half()").replace(
        'torch.amp.GradScaler("cuda")', 'torch.amp.GradScaler("cuda", enabled=False)'
    )
    assert lines(source) == []


@pytest.mark.parametrize(
    ("scaler", "flag"),
    [
        ('torch.amp.GradScaler("cuda", enabled=args.amp)', "args.amp"),
        ("torch.cuda.amp.GradScaler(enabled=use_amp)", "use_amp"),
    ],
)
def test_a_model_half_on_every_run_meets_a_runtime_enabled_scaler_on_its_runs(
    scaler: str, flag: str
) -> None:
    # The model is fp16 on every run, so every run that turns the scaler on raises.
    source = SCALER_LOOP.format(setup="model = Net().half()").replace(
        'torch.amp.GradScaler("cuda")', scaler
    )
    [(line, _column, message)] = findings(source)
    assert line == 4
    assert message.startswith(f"when `{flag}` is true, `model` is cast to float16 here")


def test_a_half_model_under_a_scaler_beside_bf16_autocast_is_this_rules_finding() -> None:
    # AMP010 stays silent on a file with `.half()`; this rule owns the combination, because
    # `unscale_` raises on the fp16 gradients whatever dtype the autocast computes in.
    source = SCALER_LOOP.format(setup="model = Net().half()").replace(
        "dtype=torch.float16", "dtype=torch.bfloat16"
    )
    assert lines(source) == [4]
    assert run_rule(GradScalerWithBf16Autocast, textwrap.dedent(source)) == []


def test_a_renamed_fp16_backbone_beside_bf16_autocast_in_one_function_is_reported() -> None:
    source = """\
        from torch.amp import GradScaler, autocast


        def fit(cfg, batches):
            net = Backbone(cfg).cuda().to(torch.float16)
            opt = torch.optim.SGD(net.parameters(), lr=cfg.lr)
            amp_scaler = GradScaler("cuda")
            for images, targets in batches:
                with autocast("cuda", dtype=torch.bfloat16):
                    loss = criterion(net(images), targets)
                amp_scaler.scale(loss).backward()
                amp_scaler.step(opt)
                amp_scaler.update()
        """
    assert lines(source) == [5]


def test_a_cast_in_an_export_method_is_not_what_the_train_step_trains() -> None:
    source = """\
    import torch


    class Runner:
        def __init__(self, cfg):
            self.model = build(cfg).cuda()
            self.optimizer = torch.optim.AdamW(self.model.parameters())
            self.scaler = torch.amp.GradScaler("cuda")

        def export_fp16(self, path):
            self.model.half()
            torch.save(self.model.state_dict(), path)

        def train_step(self, batch):
            loss = self.model(batch).mean()
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
    """
    assert lines(source) == []


def test_a_cast_after_the_training_loop_is_not_reported() -> None:
    source = """\
    import torch


    def main():
        model = Net().cuda()
        optimizer = torch.optim.AdamW(model.parameters())
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            scaler.scale(loss_fn(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
        model = model.half()
        evaluate(model)
    """
    assert lines(source) == []


def test_a_cast_exclusive_with_the_scaler_is_not_reported() -> None:
    source = """\
    import torch

    model = Net().cuda()
    if args.precision == "half":
        model.half()
    elif args.precision == "amp":
        scaler = torch.amp.GradScaler("cuda")
    optimizer = torch.optim.AdamW(model.parameters())
    for x, y in loader:
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.step(optimizer)
        scaler.update()
    """
    assert lines(source) == []


def test_a_teacher_in_fp16_that_no_optimizer_trains_is_not_reported() -> None:
    source = """\
    import torch

    teacher = Teacher().cuda().half()
    student = Student().cuda()
    optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for x, _ in loader:
        with torch.no_grad():
            target = teacher(x.half())
        scaler.scale(distill(student(x), target)).backward()
        scaler.step(optimizer)
        scaler.update()
    """
    assert lines(source) == []


def test_a_trainer_with_a_peft_config_trains_adapters_only() -> None:
    source = """\
    import torch
    from transformers import AutoModelForCausalLM, TrainingArguments
    from trl import SFTTrainer

    model = AutoModelForCausalLM.from_pretrained("facebook/opt-350m", torch_dtype=torch.float16)
    args = TrainingArguments("out", fp16=True)
    SFTTrainer(model=model, args=args, train_dataset=data, peft_config=lora_config).train()
    """
    assert lines(source) == []


def test_inference_only_files_are_not_reported() -> None:
    source = """\
    import torch

    model = Net().cuda().half().eval()
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    scaler.step(optimizer)
    """
    assert lines(source) == []


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("model.half()\nscaler = GradScaler()\n", True),
        ("torch_dtype=torch.float16\nTrainingArguments(fp16=True)\n", True),
        ("model.half()\nloss.backward()\n", False),
        ("scaler = GradScaler()\nscaler.step(opt)\n", False),
        ('model.half()\nL.Trainer(precision="16-true")\n', False),
        ("torch_dtype=torch.float16\nHfArgumentParser\ntrainer_cls = DistilTrainer\n", True),
        ("torch_dtype=torch.float16\nHfArgumentParser\nencode(model)\n", False),
    ],
)
def test_the_pre_filter_needs_an_fp16_model_and_a_loss_scaling_switch(
    text: str, wanted: bool
) -> None:
    assert GradScalerWithFp16Params.wants(text) is wanted


def test_an_optimizer_over_fp32_copies_of_the_parameters_is_not_reported() -> None:
    source = SCALER_LOOP.format(setup="model = Net().half()").replace(
        "torch.optim.AdamW(model.parameters(), lr=1e-4)",
        "torch.optim.AdamW([p.detach().clone().float() for p in model.parameters()])",
    )
    assert "clone().float()" in source
    assert lines(source) == []


def test_a_scaler_enabled_by_a_comparison_of_constants_is_on() -> None:
    source = SCALER_LOOP.format(setup='dtype = "float16"\nmodel = Net().half()').replace(
        'torch.amp.GradScaler("cuda")', 'torch.amp.GradScaler("cuda", enabled=(dtype == "float16"))'
    )
    assert lines(source) == [5]
    assert lines(source.replace('dtype = "float16"', 'dtype = "bfloat16"')) == []


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _example(name: str):
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), EXAMPLES / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_bad_example_really_raises_what_the_rule_predicts() -> None:
    # The evidence behind AMP008, reproduced on the CPU with torch's own GradScaler.
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        _example("fp16_params_under_grad_scaler.py").train("cpu")


def test_the_clean_example_trains_and_is_not_reported() -> None:
    pytest.importorskip("torch")
    assert math.isfinite(_example("fp32_params_fp16_autocast.py").train("cpu"))
    source = (EXAMPLES / "fp32_params_fp16_autocast.py").read_text(encoding="utf-8")
    assert lines(source) == []


def test_a_cast_in_place_after_the_optimizer_is_built_still_changes_what_it_steps() -> None:
    # Module.half() replaces param.data in place: the optimizer holds the same, now fp16,
    # Parameters. A benchmark that times fp32 first and then "fp16" on one model does this.
    source = """\
    import torch

    model = Net().cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for x, y in loader:
        criterion(model(x), y).backward()
        optimizer.step()
    model.half()
    scaler = torch.cuda.amp.GradScaler()
    for x, y in loader:
        with torch.cuda.amp.autocast():
            loss = criterion(model(x.half()), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    """
    assert lines(source) == [8]


def test_an_fp32_cast_before_the_fp16_one_restores_nothing() -> None:
    source = """\
    import torch


    def benchmark(model, x, y):
        optimizer = torch.optim.Adam(model.parameters())
        model.float()
        for _ in range(10):
            criterion(model(x), y).backward()
            optimizer.step()
        model.half()
        scaler = torch.cuda.amp.GradScaler()
        for _ in range(10):
            with torch.cuda.amp.autocast():
                loss = criterion(model(x.half()), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    """
    assert lines(source) == [10]
    after = source.replace("        model.float()\n", "").replace(
        "        scaler = ", "        model.float()\n        scaler = "
    )
    assert lines(after) == []


FLAG_TIED = """\
import torch


def main(args):
    model = BertForSequenceClassification.from_pretrained(args.bert_model).cuda()
    if args.fp16:
        model.half()
    optimizer = torch.optim.AdamW(filter(lambda p: p.requires_grad, model.parameters()))
    scaler = torch.cuda.amp.GradScaler(enabled={enabled})
    for batch in loader:
        with torch.cuda.amp.autocast(enabled=args.fp16):
            loss = model(**batch).loss
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
"""


def test_a_cast_and_a_scaler_on_the_same_runtime_flag_are_reported_with_the_flag() -> None:
    [(line, _col, message)] = findings(FLAG_TIED.format(enabled="args.fp16"))
    assert line == 7
    assert message.startswith("when `args.fp16` is true, `model` is cast to float16 here")


@pytest.mark.parametrize("enabled", ["args.amp", "not args.fp16", "use_amp"])
def test_a_scaler_on_another_runtime_flag_is_not_reported(enabled: str) -> None:
    assert lines(FLAG_TIED.format(enabled=enabled)) == []


def test_an_unconditional_cast_with_a_flag_enabled_scaler_is_reported_under_the_flag() -> None:
    source = FLAG_TIED.format(enabled="args.amp").replace(
        "    if args.fp16:\n        model.half()", "    model.half()"
    )
    assert "if args.fp16:\n        model.half()" not in source
    [(line, _column, message)] = findings(source)
    assert line == 6
    assert message.startswith("when `args.amp` is true, `model` is cast to float16 here")


PART_CAST = """\
import torch
from torch import nn

model = nn.ModuleList([nn.Linear(10, 20), nn.Linear(20, 10)]).cuda()
{cast}
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = nn.functional.mse_loss(model[1](model[0](x)), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""


@pytest.mark.parametrize("cast", ["model[0].half()", "model.encoder.to(torch.float16)"])
def test_a_part_of_the_trained_model_cast_to_fp16_is_reported(cast: str) -> None:
    [(line, _col, message)] = findings(PART_CAST.format(cast=cast))
    assert line == 5
    assert f"`model` is cast to float16 in part (`{cast}`)" in message


@pytest.mark.parametrize(
    "cast",
    [
        "model[0].half()\nmodel[0].requires_grad_(False)",
        "model[0].half()\nmodel[0].float()",
        "model[0].to(device)",
        "model.encoder.half()\nmodel = build_fresh_model()",
    ],
)
def test_a_part_cast_that_is_frozen_undone_or_not_a_dtype_is_not_reported(cast: str) -> None:
    assert lines(PART_CAST.format(cast=cast)) == []


@pytest.mark.parametrize(
    "groups",
    [
        "named = list(model.named_parameters())\n"
        "groups = [{'params': [p for n, p in named if 'bias' not in n], 'weight_decay': 0.01}]",
        "decay = []\nfor name, p in model.named_parameters():\n    decay.append(p)\n"
        "groups = [{'params': decay}]",
        "decay, rest = [], []\nfor name, p in model.named_parameters():\n"
        "    (rest if p.ndim < 2 else decay).append(p)\n"
        "groups = [{'params': decay}, {'params': rest, 'weight_decay': 0.0}]",
    ],
)
def test_parameter_groups_built_from_the_model_lead_back_to_it(groups: str) -> None:
    setup = f"model = Net().half()\n{groups}"
    source = SCALER_LOOP.format(setup=setup).replace("model.parameters(), lr=1e-4", "groups")
    assert "AdamW(groups)" in source
    assert lines(source) == [4]


# -- issue 20: only an adapter applied to the model silences the rule ---------------------------

_FP16_TRAINING = """
import torch
from transformers import AutoModel
{imports}

def train(loader):
    {model} = AutoModel.from_pretrained("base", torch_dtype=torch.float16)
    {adapt}
    optimizer = torch.optim.AdamW({model}.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        scaler.scale({model}(**batch).loss).backward()
        scaler.step(optimizer)
        scaler.update()
"""


@pytest.mark.parametrize(
    ("imports", "adapt"),
    [
        ("import peft", "pass"),
        ("from peft import LoraConfig", "config = LoraConfig(r=8)"),
        ("from peft import get_peft_model", "head = get_peft_model(head, LoraConfig(r=8))"),
    ],
    ids=["unused-import", "config-only", "applied-to-another-model"],
)
def test_a_peft_import_or_config_not_applied_to_the_model_does_not_silence(
    imports: str, adapt: str
) -> None:
    source = _FP16_TRAINING.format(imports=imports, adapt=adapt, model="encoder")
    assert lines(source) == [7]


@pytest.mark.parametrize(
    "adapt",
    [
        "encoder = get_peft_model(encoder, LoraConfig(r=8))",
        "encoder.add_adapter(LoraConfig(r=8))",
        "trainable = [encoder]\n    cast_training_params(trainable, dtype=torch.float32)",
    ],
    ids=["get_peft_model", "add_adapter", "cast_training_params-of-a-list"],
)
def test_an_adapter_applied_to_the_model_silences(adapt: str) -> None:
    source = _FP16_TRAINING.format(imports="from peft import *", adapt=adapt, model="encoder")
    assert lines(source) == []


# -- adapters, quantization and freezing that only some runs apply --------------------------

_SWITCHED = """
import torch
from peft import get_peft_model
from transformers import AutoModelForCausalLM, BitsAndBytesConfig


def main(cfg, loader):
    {quantize}
    model = AutoModelForCausalLM.from_pretrained(
        cfg.model_name,
        {quantization}
        torch_dtype=torch.float16 if cfg.use_fp16 else torch.bfloat16,
    )
    {adapt}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = {scaler} if cfg.use_fp16 else None
    for batch in loader:
        with torch.autocast("cuda"):
            loss = model(**batch).loss
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
"""


def _switched(
    adapt: str = "",
    quantize: str = "",
    quantization: str = "",
    scaler: str = 'torch.amp.GradScaler("cuda")',
) -> str:
    return _SWITCHED.format(
        adapt=adapt, quantize=quantize, quantization=quantization, scaler=scaler
    )


def test_peft_under_its_own_switch_leaves_the_runs_without_it_reported() -> None:
    # llama-recipes' finetuning.py: `use_peft` is off by default, and those runs raise.
    adapt = "if cfg.use_peft:\n        model = get_peft_model(model, peft_config)"
    [(line, _col, message)] = findings(_switched(adapt=adapt))
    assert line == 12
    assert message.startswith(
        "when `cfg.use_fp16` is true and `cfg.use_peft` is false, `model` is loaded as float16"
    )


@pytest.mark.parametrize(
    "adapt",
    [
        "model = get_peft_model(model, peft_config)",
        "if peft_config is not None:\n        model = get_peft_model(model, peft_config)",
        "if cfg.use_fp16:\n        model = get_peft_model(model, peft_config)",
        "if cfg.use_peft:\n        model = PeftModel.from_pretrained(model, cfg.adapter)\n"
        "    else:\n        model = get_peft_model(model, peft_config)",
    ],
    ids=["every-run", "not-a-plain-switch", "the-cast-s-own-switch", "both-arms-adapt"],
)
def test_peft_that_every_fp16_run_applies_keeps_the_rule_silent(adapt: str) -> None:
    assert lines(_switched(adapt=adapt)) == []


def test_a_quantized_load_under_its_own_switch_leaves_the_other_runs_reported() -> None:
    quantize = (
        "bnb_config = None\n    if cfg.quantization:\n"
        "        bnb_config = BitsAndBytesConfig(load_in_8bit=True)"
    )
    source = _switched(quantize=quantize, quantization="quantization_config=bnb_config,")
    [(line, _col, message)] = findings(source)
    assert line == 14
    assert message.startswith(
        "when `cfg.use_fp16` is true and `cfg.quantization` is false, `model` is loaded"
    )


@pytest.mark.parametrize(
    ("quantize", "quantization", "expected"),
    [
        ("", "quantization_config=None,", [12]),
        ("", "quantization_config=BitsAndBytesConfig(load_in_8bit=True),", []),
        (
            "bnb_config = BitsAndBytesConfig(load_in_4bit=True)",
            "quantization_config=bnb_config,",
            [],
        ),
    ],
    ids=["literal-none-quantizes-nothing", "always-quantized", "bound-once"],
)
def test_a_quantized_load_on_every_run_is_silent_and_none_is_no_quantization(
    quantize: str, quantization: str, expected: list[int]
) -> None:
    assert lines(_switched(quantize=quantize, quantization=quantization)) == expected


@pytest.mark.parametrize(
    ("scaler", "expected"),
    [
        ('torch.amp.GradScaler("cuda")', [13]),
        ("ShardedGradScaler()", []),
        ("torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler()", []),
    ],
)
def test_a_sharded_grad_scaler_unscales_fp16_gradients_without_raising(
    scaler: str, expected: list[int]
) -> None:
    # torch's sharded_grad_scaler.py passes allow_fp16=True to `_unscale_grads_`, fairscale's
    # too: FSDP's scaler takes fp16 gradients, so there is no `unscale_` error to report.
    source = _switched(scaler=scaler).replace(
        "import torch\n",
        "import torch\nfrom torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\n",
    )
    assert lines(source) == expected


_ACCELERATE = """\
import argparse
import torch
from accelerate import Accelerator

parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", default=None, choices=["no", "fp16", "bf16"])
args = parser.parse_args()
accelerator = Accelerator(mixed_precision=args.mixed_precision)
vae = AutoencoderKL.from_pretrained("sd")
{freeze}
optimizer = torch.optim.AdamW(filter(lambda p: p.requires_grad, vae.parameters()))
{before}
vae, optimizer, loader = accelerator.prepare(vae, optimizer, loader)
weight_dtype = torch.float32
if accelerator.mixed_precision == "fp16":
    weight_dtype = torch.float16
elif accelerator.mixed_precision == "bf16":
    weight_dtype = torch.bfloat16
{after}
for batch in loader:
    loss = vae(batch.to(dtype=weight_dtype)).sample.mean()
    accelerator.backward(loss)
    accelerator.clip_grad_norm_(vae.parameters(), 1.0)
    optimizer.step()
{end}
"""


def _accelerate(freeze: str = "", before: str = "", after: str = "", end: str = "") -> str:
    return _ACCELERATE.format(freeze=freeze, before=before, after=after, end=end)


def test_a_trained_model_cast_to_diffusers_weight_dtype_after_prepare_is_reported() -> None:
    # diffusers' train_autoencoderkl.py: the dtype bound by `if` statements on the mixed
    # precision, the cast after `prepare`, the training after the cast.
    source = _accelerate(after="vae.to(accelerator.device, dtype=weight_dtype)")
    [(line, _col, message)] = findings(source)
    assert line == 19
    assert message.startswith("when run with --mixed_precision fp16, `vae` is cast to float16")


def test_the_weight_dtype_cast_before_prepare_is_reported_too() -> None:
    source = _accelerate(
        before="weight = torch.float32\n"
        'if args.mixed_precision == "fp16":\n'
        "    weight = torch.float16\n"
        "vae.to(accelerator.device, dtype=weight)",
    )
    assert "vae.to(accelerator.device, dtype=weight)\nvae, optimizer" in source
    assert lines(source) == [15]


@pytest.mark.parametrize(
    ("freeze", "after", "end"),
    [
        ("vae.requires_grad_(False)", "vae.to(accelerator.device, dtype=weight_dtype)", ""),
        ("", "", "vae.to(accelerator.device, dtype=weight_dtype)"),
        (
            "if args.train_vae:\n    vae.requires_grad_(True)\n"
            "else:\n    vae.requires_grad_(False)",
            "if not args.train_vae:\n    vae.to(accelerator.device, dtype=weight_dtype)",
            "",
        ),
    ],
    ids=["frozen", "cast-after-training", "trained-only-on-runs-that-skip-the-cast"],
)
def test_a_weight_dtype_cast_that_no_training_step_sees_is_not_reported(
    freeze: str, after: str, end: str
) -> None:
    # The last one is diffusers' train_amused.py: the text encoder is cast only when it is
    # not trained, and unfrozen only when it is.
    assert lines(_accelerate(freeze=freeze, after=after, end=end)) == []


@pytest.mark.parametrize(
    "freeze",
    [
        "vae.encoder.requires_grad_(False)",
        "vae.requires_grad_(False)\nvae.decoder.requires_grad_(True)",
    ],
    ids=["a-part-frozen", "frozen-then-a-part-unfrozen"],
)
def test_freezing_part_of_the_model_leaves_the_rest_trained_and_reported(freeze: str) -> None:
    source = _accelerate(freeze=freeze, after="vae.to(accelerator.device, dtype=weight_dtype)")
    assert len(lines(source)) == 1


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ("model.float()\nmodel.save_pretrained('out')", [4]),
        ("if args.upcast_before_saving:\n    model.to(torch.float32)", [4]),
        ("", [4]),
    ],
    ids=["upcast-to-save", "upcast-under-a-flag-to-save", "no-upcast"],
)
def test_an_fp32_cast_after_the_training_loop_restores_nothing_for_training(
    after: str, expected: list[int]
) -> None:
    # diffusers' Sana trainer casts the model it trains back to fp32 only to save it.
    source = SCALER_LOOP.format(setup="model = Net().half()") + after + "\n"
    assert lines(source) == expected


FLAG_PICKED_DTYPE = """\
import torch
from transformers import AutoModel, Trainer, TrainingArguments


def main(args):
    if args.bf16:
        torch_dtype = torch.bfloat16
    elif args.fp16:
        torch_dtype = torch.float16
    else:
        torch_dtype = torch.float32
    load_kwargs = {"cache_dir": args.cache_dir, "torch_dtype": torch_dtype}
    model = AutoModel.from_pretrained(args.name, **load_kwargs)
    training_args = TrainingArguments(output_dir="out", fp16=args.fp16, bf16=args.bf16)
    trainer = Trainer(model=model, args=training_args, train_dataset=None)
    trainer.train()
"""


def test_a_dtype_the_branches_pick_by_the_flag_the_trainer_reads_is_reported_under_it() -> None:
    # tevatron's shape: the `--fp16` run loads the model in fp16 and trains it with a scaler.
    found = run_rule(GradScalerWithFp16Params, FLAG_PICKED_DTYPE)
    assert [line for line, _c, _m in found] == [12]
    assert found[0][2].startswith("when `args.fp16` is true, `model` is loaded as float16")
    bound_once = FLAG_PICKED_DTYPE.replace(
        """    if args.bf16:
        torch_dtype = torch.bfloat16
    elif args.fp16:
        torch_dtype = torch.float16
    else:
        torch_dtype = torch.float32
""",
        "    torch_dtype = torch.float16 if args.fp16 else torch.float32\n",
    )
    assert lines(bound_once) == [7]  # the dict entry that hands the dtype on
    # A name bound to the conditional is that conditional: `.to(dtype)` beside an always-on
    # scaler is an fp16 cast on the --fp16 runs, as `.to(torch.float16 if args.fp16 else ...)`.
    named = SCALER_LOOP.format(
        setup="dtype = torch.float16 if args.fp16 else torch.float32\nmodel = Net().to(dtype)"
    )
    [(_line, _column, message)] = findings(named)
    assert message.startswith("when `args.fp16` is true, ")


def test_a_dtype_and_a_trainer_switched_by_different_flags_are_not_paired() -> None:
    other_flag = FLAG_PICKED_DTYPE.replace("fp16=args.fp16,", "fp16=args.mixed,")
    assert lines(other_flag) == []
    # Only bf16 and fp32 among the branches: no fp16 load at all.
    no_fp16 = FLAG_PICKED_DTYPE.replace(
        "torch_dtype = torch.float16", "torch_dtype = torch.float32"
    )
    assert lines(no_fp16) == []


PARSED_ARGUMENTS = """\
import torch
from transformers import AutoModel, HfArgumentParser, Trainer, TrainingArguments


def main():
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()
    if training_args.bf16:
        load_dtype = torch.bfloat16
    elif training_args.fp16:
        load_dtype = torch.float16
    else:
        load_dtype = torch.float32
    encoder = AutoModel.from_pretrained(model_args.name, torch_dtype=load_dtype)
    trainer_cls = ContrastiveTrainer if model_args.cached else Trainer
    trainer = trainer_cls(model=encoder, args=training_args, train_dataset=None)
    trainer.train()
"""


def test_training_arguments_an_argument_parser_fills_switch_the_trainer_by_their_flag() -> None:
    # tevatron's drivers: `--fp16` both picks the fp16 load and turns the Trainer's scaler on.
    [(line, _column, message)] = findings(PARSED_ARGUMENTS)
    assert line == 14
    assert message.startswith(
        "when `training_args.fp16` is true, `encoder` is loaded as float16 here and the "
        "GradScaler of the Trainer given `training_args` from HfArgumentParser (line 7)"
    )
    # The parser's tuple in another order, read by index: the same object.
    indexed = PARSED_ARGUMENTS.replace(
        "(ModelArguments, TrainingArguments)", "(TrainingArguments, ModelArguments)"
    ).replace(
        "model_args, training_args = parser.parse_args_into_dataclasses()",
        "training_args = parser.parse_args_into_dataclasses()[0]\n"
        "    model_args = parser.parse_args_into_dataclasses()[1]",
    )
    assert lines(indexed) == [15]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # The parser fills no training arguments: `training_args` is some other dataclass.
        ("(ModelArguments, TrainingArguments)", "(ModelArguments, RunArguments)"),
        # The position read is the model's arguments, not the training arguments.
        ("model_args, training_args = parser", "training_args, model_args = parser"),
        # The Trainer is handed other arguments.
        ("args=training_args,", "args=TrainingArguments('out'),"),
        # The dtype hangs on another flag than the one the Trainer reads.
        ("elif training_args.fp16:", "elif model_args.half:"),
        # A name bound to something that is not a Trainer class.
        ("ContrastiveTrainer if model_args.cached else Trainer", "make_runner(model_args)"),
    ],
)
def test_parsed_training_arguments_not_handed_to_the_trainer_are_not_paired(
    old: str, new: str
) -> None:
    source = PARSED_ARGUMENTS.replace(old, new)
    assert source != PARSED_ARGUMENTS
    assert lines(source) == []


DEEPSPEED_FLAG = """\
import argparse

import torch
from transformers import AutoModelForSeq2SeqLM, Trainer, TrainingArguments


def run_training(args, model, data):
    training_args = TrainingArguments(
        output_dir=args.save_dir,
        deepspeed=args.deepspeed,
        fp16=args.fp16,
    )
    Trainer(model=model, args=training_args, train_dataset=data).train()


def main(args):
    model = AutoModelForSeq2SeqLM.from_pretrained(args.load, torch_dtype=torch.float16)
    run_training(args, model, load_data(args))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--load", default="Salesforce/codet5p-770m")
    parser.add_argument("--deepspeed", default=None, type=str)
    parser.add_argument("--fp16", default=False, action="store_true")
    main(parser.parse_args())
"""


def test_a_deepspeed_flag_unset_by_default_leaves_its_absent_runs_to_the_scaler() -> None:
    # CodeT5+'s instruction tuning: an fp16 load on every run; `--fp16` alone (no
    # `--deepspeed`) trains through the Trainer's GradScaler, which raises.
    [(line, _column, message)] = findings(DEEPSPEED_FLAG)
    assert line == 17
    assert message.startswith(
        "when `args.fp16` is true and `--deepspeed` is not given, `model` is loaded as float16"
    )
    no_default = DEEPSPEED_FLAG.replace('"--deepspeed", default=None, type=str', '"--deepspeed"')
    assert lines(no_default) == [17]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # A config on every run: DeepSpeed's engine, no GradScaler.
        ("deepspeed=args.deepspeed,", 'deepspeed="ds_config.json",'),
        ('"--deepspeed", default=None', '"--deepspeed", default="ds_config.json"'),
        ('"--deepspeed", default=None', '"--deepspeed", required=True'),
        # A flag this module does not declare: unknown, so not reported.
        ("deepspeed=args.deepspeed,", "deepspeed=cfg.ds_config,"),
    ],
)
def test_a_deepspeed_config_on_every_run_or_an_unknown_one_keeps_it_quiet(
    old: str, new: str
) -> None:
    source = DEEPSPEED_FLAG.replace(old, new)
    assert source != DEEPSPEED_FLAG
    assert lines(source) == []
