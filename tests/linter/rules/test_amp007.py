"""AMP007 step-bypasses-scaler: what it flags, what it leaves alone, and its unsafe fix."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from rule_runner import run_rule, run_rule_related

from linter import fix_source, lint_source
from linter.rules import StepBypassesScaler


def lines(source: str) -> list[int]:
    return [line for line, _col, _msg in run_rule(StepBypassesScaler, textwrap.dedent(source))]


def fixed(source: str) -> str:
    return fix_source(textwrap.dedent(source), select=["AMP007"], unsafe_fixes=True).text


LOOP = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    optimizer.step()  # apply
    optimizer.zero_grad()
"""


def test_reported_at_the_step_with_the_scaled_backward_related() -> None:
    assert run_rule_related(StepBypassesScaler, LOOP) == [(6, [(5, "scaled backward")])]


def test_fix_steps_through_the_scaler_and_adds_the_missing_update() -> None:
    assert fixed(LOOP) == LOOP.replace(
        "    optimizer.step()  # apply\n",
        "    scaler.step(optimizer)  # apply\n    scaler.update()\n",
    )


def test_fixed_code_is_clean_for_the_iteration_rules_and_a_second_run_is_a_no_op() -> None:
    once = fixed(LOOP)
    cst.parse_module(once)
    assert lint_source(once, select=["AMP005", "AMP007"]) == []
    assert fixed(once) == once


def test_fix_keeps_an_existing_update_and_the_indentation() -> None:
    source = """\
    for step, batch in enumerate(loader):
        self.scaler.scale(self.model(batch) / accum).backward()
        if (step + 1) % accum == 0:
            self.optimizer.step()
            self.scaler.update()
    """
    assert fixed(source) == textwrap.dedent(source).replace(
        "self.optimizer.step()", "self.scaler.step(self.optimizer)"
    )


def test_the_fix_is_unsafe() -> None:
    (diagnostic,) = lint_source(LOOP, select=["AMP007"])
    assert diagnostic.fix is not None
    assert diagnostic.fix.applicability == "unsafe"
    assert fix_source(LOOP, select=["AMP007"]).text == LOOP


@pytest.mark.parametrize(
    "source",
    [
        # Two scalers scaled the gradients: which one steps is the author's call.
        "for x in loader:\n"
        "    if a:\n        grad_scaler.scale(f(x)).backward()\n"
        "    else:\n        loss_scaler.scale(f(x)).backward()\n"
        "    optimizer.step()\n",
        # The step is not a statement of its own: no line to add the update after.
        "for x in loader:\n    scaler.scale(f(x)).backward()\n    result = optimizer.step()\n",
    ],
    ids=["two-scalers", "not-a-statement"],
)
def test_no_fix_when_it_cannot_be_exact(source: str) -> None:
    (diagnostic,) = lint_source(source, select=["AMP007"])
    assert diagnostic.fix is None


@pytest.mark.parametrize(
    "source",
    [
        # The coqui/espnet shape: separate ifs on the same flag, scaler.step on the AMP path.
        "for x in loader:\n"
        "    if scaler is not None:\n        scaler.scale(f(x)).backward()\n"
        "    else:\n        f(x).backward()\n"
        "    if scaler is not None:\n        scaler.step(optimizer)\n        scaler.update()\n"
        "    else:\n        optimizer.step()\n",
        # A wrapper's step() forwarding to the inner optimizer.
        "class Wrapped:\n    def step(self):\n        self.optimizer.step()\n"
        "    def backward(self, loss):\n        self.scaler.scale(loss).backward()\n",
        # `loss = scaler.scale(loss)` in one function does not make another's loss scaled.
        "def amp_step(loss):\n    loss = scaler.scale(loss)\n    loss.backward()\n"
        "    scaler.step(opt)\n    scaler.update()\n"
        "def plain_loop(loader):\n    for x in loader:\n        loss = f(x)\n"
        "        loss.backward()\n        optimizer.step()\n",
        # Schedulers are not optimizers, even when built from torch.optim.
        "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, 5)\n"
        "for x in loader:\n    scaler.scale(f(x)).backward()\n    scaler.step(opt)\n"
        "    scaler.update()\n    sched.step()\n",
        # accelerate / DeepSpeed apply the recipe themselves.
        "for x in loader:\n    accelerator.backward(f(x))\n    optimizer.step()\n",
        "for x in loader:\n    model_engine.backward(f(x))\n    model_engine.step()\n",
        # The latest backward before the step is a plain backward of another loss.
        "for x in loader:\n    scaler.scale(f(x)).backward()\n    scaler.step(opt)\n"
        "    scaler.update()\n    aux_loss(x).backward()\n    aux_optimizer.step()\n",
    ],
    ids=[
        "separate-ifs",
        "wrapper-step",
        "scaled-name-in-other-function",
        "scheduler",
        "accelerate",
        "deepspeed",
        "plain-backward-between",
    ],
)
def test_not_reported(source: str) -> None:
    assert lines(source) == []


def test_a_critic_inner_loop_with_a_direct_step_is_its_own_iteration() -> None:
    assert (
        lines(
            """
        for real in loader:
            for _ in range(n_critic):
                critic_loss(real).backward()
                opt_critic.step()
            scaler.scale(gen_loss(real)).backward()
            scaler.step(opt_gen)
            scaler.update()
        """
        )
        == []
    )


def test_files_without_a_scale_call_are_not_parsed() -> None:
    assert not StepBypassesScaler.wants("loss.backward()\noptimizer.step()\n")
    assert StepBypassesScaler.wants("scaler.scale(loss).backward()\noptimizer.step()\n")


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "optimizer_step_bypasses_scaler.py"


def _final_loss(source: str) -> float:
    torch = pytest.importorskip("torch")
    namespace: dict = {"__name__": "example"}
    exec(compile(source, str(EXAMPLE), "exec"), namespace)
    torch.manual_seed(0)
    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
    return namespace["train"](torch.nn.Linear(4, 1), batches)


def test_the_example_diverges_in_torch_and_its_fixed_version_trains() -> None:
    # The evidence behind the rule: scaled gradients applied unscaled ruin the weights at once.
    source = EXAMPLE.read_text(encoding="utf-8")
    broken = _final_loss(source)
    assert not math.isfinite(broken) or broken > 1e6
    repaired = fix_source(source, select=["AMP007"], unsafe_fixes=True).text
    assert "scaler.step(optimizer)\n        scaler.update()\n" in repaired
    assert _final_loss(repaired) < 10


def test_a_direct_step_beside_the_scaler_step_of_the_same_optimizer_steps_twice() -> None:
    source = textwrap.dedent(
        """\
        for batch in loader:
            scaler.scale(loss_fn(batch)).backward()
            scaler.step(optim_g)
            scaler.update()
            optim_g.step()
        """
    )
    (diagnostic,) = lint_source(source, select=["AMP007"])
    assert (diagnostic.line, diagnostic.fix) == (5, None)
    assert "applied twice" in diagnostic.message
    assert [r.line for r in diagnostic.related] == [3, 2]


def test_the_same_optimizer_stepped_under_other_flags_is_the_other_path() -> None:
    assert (
        lines(
            """
            for batch in loader:
                scaler.scale(loss_fn(batch)).backward()
                if self.use_amp_scaler:
                    scaler.step(optimizer)
                    scaler.update()
                if not self.scaler:
                    optimizer.step()
            """
        )
        == []
    )
