"""Clip thresholds multiplied by the loss scale (`linter.model.iterations._scaled_thresholds`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.assembly._summarize import summarize
from linter.model.assembly._summary_making import SUMMARY_MAKER
from linter.model.iterations._iteration import of_module
from linter.model.iterations._iteration_events import Kind
from linter.model.iterations._scaled_thresholds import scaled_thresholds
from linter.model.project._imports import ModuleFiles
from linter.model.project._project import Project
from linter.model.syntax._module_index import module_index


def _verdicts(context: ModuleContext) -> list[bool]:
    """Per clip event of every iteration, in order: is its threshold scaled?"""
    model, index = of_module(context), module_index(context)
    thresholds = scaled_thresholds(model, index)
    return [
        thresholds.scaled(clip)
        for iteration in model.iterations
        for clip in iteration.of(Kind.CLIP)
    ]


def verdicts(source: str) -> list[bool]:
    source = textwrap.dedent(source)
    return _verdicts(ModuleContext("t.py", source, cst.parse_module(source)))


LOOP = """
import torch
for batch in loader:
    scaler.scale(model(batch)).backward()
    {before}
    torch.nn.utils.clip_grad_norm_(model.parameters(), {threshold})
    scaler.step(optimizer)
    scaler.update()
"""


@pytest.mark.parametrize(
    ("before", "threshold"),
    [
        ("pass", "max_norm * scaler.get_scale()"),
        ("pass", "scaler.get_scale() * max_norm"),
        ("pass", "args.clip * scaler._scale.item() / world_size"),
        ("pass", "max_norm * float(scaler._scale)"),
        ("pass", "max_norm=max_norm * scaler.get_scale()"),
        ("threshold = args.max_norm * scaler.get_scale()", "threshold"),
        ("scale = scaler.get_scale()", "max_norm * scale"),
    ],
)
def test_a_product_with_the_scale_is_scaled(before: str, threshold: str) -> None:
    assert verdicts(LOOP.format(before=before, threshold=threshold)) == [True]


@pytest.mark.parametrize(
    ("before", "threshold"),
    [
        ("pass", "1.0"),
        ("pass", "max_norm"),
        ("pass", "max_norm / scaler.get_scale()"),  # divided by the scale: not the same clip
        ("pass", "max_norm + scaler.get_scale()"),
        ("pass", "max_norm * world_size"),
        ("pass", "max_norm * x_scale"),
        ("threshold = args.max_norm * accum_steps", "threshold"),
        ("scale = 2.0", "max_norm * scale"),
    ],
)
def test_other_thresholds_are_not_scaled(before: str, threshold: str) -> None:
    assert verdicts(LOOP.format(before=before, threshold=threshold)) == [False]


def test_a_name_bound_twice_is_unknown_and_not_scaled() -> None:
    assert verdicts(
        """
        import torch
        for batch in loader:
            scaler.scale(model(batch)).backward()
            threshold = max_norm * scaler.get_scale()
            if warmup:
                threshold = max_norm
            torch.nn.utils.clip_grad_norm_(model.parameters(), threshold)
            scaler.step(optimizer)
            scaler.update()
        """
    ) == [False]


HELPER = """
import torch


def clip_gradients(model, max_norm, scale=1.0):
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm * scale)


def train(model, loader, optimizer, scaler, max_norm):
    for batch in loader:
        scaler.scale(model(batch)).backward()
        clip_gradients(model, max_norm{passed})
        scaler.step(optimizer)
        scaler.update()
"""


def test_a_parameter_the_caller_fills_with_the_scale_is_scaled() -> None:
    assert verdicts(HELPER.format(passed=", scale=scaler.get_scale()")) == [True]
    assert verdicts(HELPER.format(passed=", scaler.get_scale()")) == [True]


def test_a_parameter_left_at_its_default_is_not_scaled() -> None:
    assert verdicts(HELPER.format(passed="")) == [False]
    assert verdicts(HELPER.format(passed=", scale=args.grad_scale")) == [False]


def test_a_method_threshold_is_scaled_as_its_callers_pass_it() -> None:
    # The step method is its own iteration; its callers decide what the threshold holds.
    source = """
        import torch


        class Trainer:
            def __init__(self):
                self.scaler = torch.amp.GradScaler("cuda")

            def optimizer_step(self, max_norm):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
                self.scaler.step(self.optimizer)
                self.scaler.update()

            def fit(self, loader):
                for batch in loader:
                    self.scaler.scale(self.model(batch)).backward()
                    self.optimizer_step({first})

            def finetune(self, batch):
                self.scaler.scale(self.model(batch)).backward()
                self.optimizer_step({second})
        """
    scaled = "self.max_norm * self.scaler.get_scale()"
    # Iterations: the method itself (every caller decides), the loop of `fit`, `finetune`.
    assert verdicts(source.format(first=scaled, second=scaled)) == [True, True, True]
    # Each caller's iteration reads its own argument; the method alone, all of them.
    mixed = verdicts(source.format(first=scaled, second="self.max_norm"))
    assert sorted(mixed) == [False, False, True]


def _project(tmp_path: Path, sources: dict[str, str]) -> Project:
    summaries = {}
    for name, source in sources.items():
        path = tmp_path / name
        text = textwrap.dedent(source)
        path.write_text(text, encoding="utf-8")
        context = ModuleContext(str(path), text, cst.parse_module(text))
        summaries[str(path)] = summarize(context, str(path), has_amp=True)
    return Project(ModuleFiles(str(tmp_path), list(summaries)), summaries, maker=SUMMARY_MAKER)


def _in_project(project: Project, path: Path) -> list[bool]:
    text = path.read_text(encoding="utf-8")
    return _verdicts(ModuleContext(str(path), text, cst.parse_module(text), project))


GRADS = """
from torch import nn


def clip_gradients(model, config, scale=1.0):
    nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm * scale)
"""

LOOP_MODULE = """
from grads import clip_gradients


class Loop:
    def finish_update(self):
        clip_gradients(self.model, self.config{passed})
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def run(self, loader):
        for batch in loader:
            self.scaler.scale(self.model(batch)).backward()
            self.finish_update()
"""


@pytest.mark.parametrize(
    ("passed", "expected"),
    [(", scale=self.scaler.get_scale()", True), ("", False), (", scale=self.loss_weight", False)],
)
def test_a_helper_of_another_module_reads_the_argument_of_the_call_it_is_grafted_under(
    tmp_path: Path, passed: str, expected: bool
) -> None:
    project = _project(tmp_path, {"grads.py": GRADS, "loop.py": LOOP_MODULE.format(passed=passed)})
    assert set(_in_project(project, tmp_path / "loop.py")) == {expected}


TRAINER = """
import torch


class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")

    def optimizer_step(self, max_norm):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
"""

SCRIPT = """
from trainer import Trainer


def main(loader, args):
    trainer = Trainer()
    for batch in loader:
        trainer.scaler.scale(trainer.model(batch)).backward()
        trainer.optimizer_step({passed})
"""


@pytest.mark.parametrize(
    ("passed", "expected"),
    [("args.clip * trainer.scaler.get_scale()", True), ("args.clip", False)],
)
def test_a_parameter_filled_by_callers_in_other_modules(
    tmp_path: Path, passed: str, expected: bool
) -> None:
    project = _project(tmp_path, {"trainer.py": TRAINER, "main.py": SCRIPT.format(passed=passed)})
    assert _in_project(project, tmp_path / "trainer.py") == [expected]
