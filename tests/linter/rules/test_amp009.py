"""AMP009 grad-scaler-per-step: per-step creation sites, scalers that live longer, messages."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest
from rule_runner import run_rule, run_rule_related

from linter.rules import GradScalerPerStep


def lines(source: str) -> list[int]:
    return [line for line, _col, _msg in run_rule(GradScalerPerStep, textwrap.dedent(source))]


STEP = """\
    {name}.scale(loss).backward()
    {name}.step(optimizer)
    {name}.update()
"""


def in_loop(constructor: str, imports: str = "import torch", header: str = "for x in loader:"):
    return f"{imports}\n{header}\n    scaler = {constructor}\n{STEP.format(name='scaler')}"


@pytest.mark.parametrize(
    ("imports", "constructor"),
    [
        ("import torch", 'torch.amp.GradScaler("cuda")'),
        ("import torch", "torch.GradScaler()"),
        ("import torch", "torch.cuda.amp.GradScaler(init_scale=1024)"),
        ("from torch.cpu.amp import GradScaler as G", "G()"),
        (
            "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler",
            "ShardedGradScaler()",
        ),
        ("from scaler import GradScaler", "GradScaler(min_scale=1.0)"),
        ("import torch", 'torch.amp.GradScaler("cuda", enabled=args.amp)'),
    ],
    ids=["torch.amp", "torch", "cuda", "cpu-alias", "sharded", "ampscale", "enabled-flag"],
)
def test_constructor_in_the_batch_loop_is_reported_under_any_alias(imports, constructor) -> None:
    assert lines(in_loop(constructor, imports)) == [3]


@pytest.mark.parametrize(
    "header",
    ["while True:", "for step, (x, y) in enumerate(train_loader):", "for it in range(max_iters):"],
)
def test_any_step_loop_counts(header: str) -> None:
    assert lines(in_loop('torch.amp.GradScaler("cuda")', header=header)) == [3]


def test_disabled_scaler_is_not_reported() -> None:
    assert lines(in_loop('torch.amp.GradScaler("cuda", enabled=False)')) == []


def test_constructor_in_the_inner_loop_of_an_epoch_loop() -> None:
    source = """\
    import torch
    for epoch in range(epochs):
        for x, y in loader:
            scaler = torch.amp.GradScaler("cuda")
            scaler.scale(loss_fn(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
    """
    assert lines(source) == [4]


def test_once_per_epoch_is_not_reported() -> None:
    source = """\
    import torch
    for epoch in range(epochs):
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            scaler.scale(loss_fn(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
    """
    assert lines(source) == []


def test_per_epoch_function_is_not_reported() -> None:
    source = """\
    import torch

    class Trainer:
        def train_one_epoch(self, loader):
            self.scaler = torch.amp.GradScaler("cuda")
            for batch in loader:
                self.scaler.scale(self.model(batch).loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()

        def fit(self):
            for epoch in range(self.epochs):
                self.train_one_epoch(self.loader)
    """
    assert lines(source) == []


def test_per_run_loop_handing_the_scaler_to_a_training_function_is_not_reported() -> None:
    source = """\
    import torch

    def train(model, scaler, loader):
        for batch in loader:
            scaler.scale(model(batch).loss).backward()
            scaler.step(optimizer)
            scaler.update()

    for run in runs:
        scaler = torch.amp.GradScaler("cuda")
        train(build_model(run), scaler, loader)
    """
    assert lines(source) == []


def test_scaler_handed_to_another_modules_trainer_is_not_reported() -> None:
    source = """\
    import torch
    from mylib import fit

    for name in experiments:
        scaler = torch.amp.GradScaler("cuda")
        fit(models[name], scaler=scaler)
    """
    assert lines(source) == []


def test_scaler_handed_to_a_same_module_step_helper_is_reported() -> None:
    source = """\
    import torch

    def backward_and_step(loss, optimizer, grad_scaler):
        grad_scaler.scale(loss).backward()
        grad_scaler.step(optimizer)
        grad_scaler.update()

    for batch in loader:
        scaler = torch.amp.GradScaler("cuda")
        backward_and_step(model(batch).loss, optimizer, grad_scaler=scaler)
    """
    assert lines(source) == [9]


@pytest.mark.parametrize(
    "header",
    [
        "for dtype in (torch.float16, torch.bfloat16):",
        "for fold in range(5):",
        "for lr, wd in itertools.product(lrs, wds):",
        "for seed in seeds:",
    ],
)
def test_loops_over_configurations_are_not_step_loops(header: str) -> None:
    assert lines(in_loop('torch.amp.GradScaler("cuda")', header=header)) == []


def test_collection_loop_that_never_steps_is_not_reported() -> None:
    source = """\
    import torch
    scalers = []
    for optimizer in optimizers:
        scalers.append(torch.amp.GradScaler("cuda"))
    """
    assert lines(source) == []


def test_per_step_function_called_from_the_loop_through_self() -> None:
    source = """\
    from torch.amp import GradScaler

    class Runner:
        def train_step(self, batch):
            self.scaler = GradScaler("cuda")
            self.scaler.scale(self.model(batch).loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()

        def fit(self, loader):
            for batch in loader:
                self.train_step(batch)
    """
    assert lines(source) == [5]


@pytest.mark.parametrize(
    ("base", "hook"),
    [
        ("L.LightningModule", "def training_step(self, batch, batch_idx):"),
        ("TrainerCallback", "def on_step_end(self, args, state, control, **kwargs):"),
        ("HookBase", "def run_step(self):"),
        ("torch.optim.Optimizer", "def step(self, closure=None):"),
    ],
    ids=["lightning", "hf-callback", "detectron2", "optimizer-wrapper"],
)
def test_per_step_hooks(base: str, hook: str) -> None:
    source = f"""\
import torch


class Hooked({base}):
    {hook}
        scaler = torch.amp.GradScaler("cuda")
        scaler.unscale_(self.optimizer)
        scaler.step(self.optimizer)
        scaler.update()
"""
    assert lines(source) == [6]


@pytest.mark.parametrize(
    "setup",
    [
        "def setup(self, stage):",
        "def configure_optimizers(self):",
        "def __init__(self):",
        "def on_fit_start(self):",
    ],
)
def test_setup_hooks_are_not_per_step(setup: str) -> None:
    source = f"""\
import torch


class LitModel(L.LightningModule):
    {setup}
        self.scaler = torch.amp.GradScaler("cuda")

    def training_step(self, batch, batch_idx):
        self.scaler.scale(self.loss(batch)).backward()
        self.scaler.step(self.optimizers())
        self.scaler.update()
"""
    assert lines(source) == []


@pytest.mark.parametrize(
    "creation",
    [
        "if self.scaler is None:\n            self.scaler = GradScaler()",
        "if not hasattr(self, 'scaler'):\n            self.scaler = GradScaler()",
        "self.scaler = self.scaler or GradScaler()",
        "self.scaler = GradScaler() if self.scaler is None else self.scaler",
    ],
    ids=["is-none", "hasattr", "or", "ifexp"],
)
def test_lazily_created_scaler_is_not_reported(creation: str) -> None:
    source = f"""\
from torch.amp import GradScaler


class LitModel(L.LightningModule):
    def training_step(self, batch, batch_idx):
        {creation}
        self.scaler.scale(self.loss(batch)).backward()
        self.scaler.step(self.optimizers())
        self.scaler.update()
"""
    assert lines(source) == []


def test_lazy_property_with_early_return_is_not_reported() -> None:
    source = """\
    import torch

    class Runner:
        def scaler(self):
            if self._scaler is not None:
                return self._scaler
            self._scaler = torch.amp.GradScaler("cuda")
            return self._scaler

        def train(self):
            for batch in self.loader:
                scaler = self.scaler()
                scaler.scale(self.model(batch).loss).backward()
                scaler.step(self.optimizer)
                scaler.update()
    """
    assert lines(source) == []


def test_factory_called_once_is_not_reported_and_called_per_step_is() -> None:
    factory = textwrap.dedent("""\
    import torch

    def make_scaler(cfg):
        scaler = torch.amp.GradScaler("cuda", init_scale=cfg.init_scale)
        return scaler

    """)
    once = factory + textwrap.dedent("""\
    scaler = make_scaler(cfg)
    for batch in loader:
        scaler.scale(model(batch).loss).backward()
        scaler.step(optimizer)
        scaler.update()
    """)
    per_step = factory + textwrap.dedent("""\
    for batch in loader:
        scaler = make_scaler(cfg)
        scaler.scale(model(batch).loss).backward()
        scaler.step(optimizer)
        scaler.update()
    """)
    assert lines(once) == []
    assert lines(per_step) == [8]


@pytest.mark.parametrize(
    "guard",
    ["if step % 1000 == 0:", "if step == 0:", "if not torch.isfinite(loss):"],
    ids=["periodic", "once", "error-path"],
)
def test_guarded_creation_is_not_per_step(guard: str) -> None:
    source = f"""\
import torch

scaler = torch.amp.GradScaler("cuda")
for step, batch in enumerate(loader):
    {guard}
        scaler = torch.amp.GradScaler("cuda")
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
    assert lines(source) == []


def test_accumulation_guard_still_runs_every_step() -> None:
    source = """\
    import torch
    for i, batch in enumerate(loader):
        scaler = torch.amp.GradScaler("cuda")
        scaler.scale(model(batch).loss / accum_steps).backward()
        if (i + 1) % accum_steps == 0:
            scaler.step(optimizer)
            scaler.update()
    """
    assert lines(source) == [3]


def test_multi_optimizer_step_loop_inside_the_iteration_is_still_one_step() -> None:
    source = """\
    import torch
    for batch in loader:
        scaler = torch.amp.GradScaler("cuda")
        scaler.scale(model(batch).loss).backward()
        for opt in (gen_opt, disc_opt):
            scaler.step(opt)
        scaler.update()
    """
    assert lines(source) == [3]


def test_look_alike_constructor_is_not_reported() -> None:
    source = """\
    from apex.amp import LossScaler
    from mylib import GradScaler2

    for batch in loader:
        scaler = LossScaler("dynamic")
        other = GradScaler2()
        scaler.step(optimizer)
        other.update()
    """
    assert lines(source) == []


def test_message_says_why_and_what_to_do() -> None:
    source = textwrap.dedent(in_loop('torch.amp.GradScaler("cuda")'))
    [(_line, _col, message)] = run_rule(GradScalerPerStep, source)
    assert '`torch.amp.GradScaler("cuda")` creates a new GradScaler every training step' in message
    assert "inside the loop at line 2" in message
    assert "never adapts" in message
    assert "before the loop" in message


def test_related_sites_are_the_use_and_for_a_factory_the_constructor() -> None:
    source = """\
import torch


def make_scaler():
    return torch.amp.GradScaler("cuda")


for batch in loader:
    scaler = make_scaler()
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
    assert run_rule_related(GradScalerPerStep, source) == [
        (9, [(10, "the new scaler is used for this step"), (5, "the GradScaler constructor")])
    ]


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_per_step_example_never_trains_and_its_clean_version_does() -> None:
    # The evidence behind the rule: a scaler whose initial scale overflows fp16 backs off and
    # trains when it lives across steps, and skips every step when it is created per step.
    pytest.importorskip("torch")
    per_step = runpy.run_path(str(EXAMPLES / "grad_scaler_per_step.py"))["train"]
    once = runpy.run_path(str(EXAMPLES / "grad_scaler_once.py"))["train"]
    assert per_step(steps=15)[2] is False
    assert once(steps=15)[2] is True
