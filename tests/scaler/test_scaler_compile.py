"""Issue 21, item 2: a whole training step under ``torch.compile``, ours side by side with torch's.

The step is the one users compile: fp16 autocast forward on CPU, ``scale``, backward,
``unscale_``, clipping, a fused ``step`` and ``update``. Our scaler's methods run eagerly inside
it (``scaler._compile_boundary``), as torch's own, which dynamo skips: so the graph count must be
torch's, the results the eager ones, overflows included, and the monitoring readers must work.
Small model and few steps so that this runs in CI on 2 cores; dynamo is reset between tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from scaler_harness import make_model, twin

import scaler
from scaler import GradScaler

#: Steps whose forward overflows fp16 (an inf in the inputs), chosen to include two in a row.
OVERFLOW_STEPS = frozenset({1, 4, 5})
STEPS = 8
SCALER_DIR = str(Path(scaler.__file__).resolve().parent)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def make_scaler(kind: str):
    # growth_interval=2: the trajectory grows as well as backs off within a few steps.
    if kind == "ours":
        return GradScaler("cpu", init_scale=2.0**10, growth_interval=2)
    return torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)


def train_step(model, optimizer, grad_scaler, inputs, target, poison):
    """One training step; ``poison`` (0 or inf, a tensor so it is a graph input) overflows it."""
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = torch.nn.functional.mse_loss(model(inputs + poison).float(), target)
    grad_scaler.scale(loss).backward()
    grad_scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    grad_scaler.step(optimizer)
    grad_scaler.update()
    return loss.detach()


def monitored_step(model, optimizer, grad_scaler, inputs, target, poison):
    """A step that also reads the sync-free monitoring inside the compiled region."""
    train_step(model, optimizer, grad_scaler, inputs, target, poison)
    return grad_scaler.step_skipped(optimizer), grad_scaler.peek_scale(), grad_scaler.stats()


def step_inputs(step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(500 + step)
    poison = torch.tensor(float("inf") if step in OVERFLOW_STEPS else 0.0)
    return torch.randn(16, 8, generator=generator), torch.randn(16, 4, generator=generator), poison


def setup(kind: str, model: torch.nn.Module | None = None):
    model = model if model is not None else make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=True)
    return model, optimizer, make_scaler(kind)


def run(step_fn, kind: str, model: torch.nn.Module | None = None) -> dict:
    return run_steps(step_fn, setup(kind, model), range(STEPS))


def run_steps(step_fn, objects: tuple, steps: range) -> dict:
    model, optimizer, grad_scaler = objects
    scales, skipped = [], []
    for step in steps:
        before = [p.detach().clone() for p in model.parameters()]
        step_fn(model, optimizer, grad_scaler, *step_inputs(step))
        after = list(model.parameters())
        skipped.append(all(torch.equal(b, a) for b, a in zip(before, after, strict=True)))
        scales.append(grad_scaler.get_scale())
    return {"model": model, "optimizer": optimizer, "scales": scales, "skipped": skipped}


def explain(kind: str):
    model, optimizer, grad_scaler = setup(kind)
    train_step(model, optimizer, grad_scaler, *step_inputs(0))  # the scale exists, as in training
    return torch._dynamo.explain(train_step)(model, optimizer, grad_scaler, *step_inputs(2))


def test_a_compiled_step_has_no_more_graphs_or_breaks_than_with_torchs_scaler() -> None:
    ours, reference = explain("ours"), explain("torch")
    # Measured on torch 2.13 CPU: 2 graphs and 1 break for both (ours was 5 and 4 before).
    assert ours.graph_count <= reference.graph_count
    assert ours.graph_break_count <= reference.graph_break_count


def test_no_graph_break_happens_inside_the_scaler() -> None:
    # Every break is at a call into the scaler, in the user's step, never in our code.
    reasons = explain("ours").break_reasons
    assert reasons
    for reason in reasons:
        assert not any(frame.filename.startswith(SCALER_DIR) for frame in reason.user_stack)
        assert "disable" in reason.reason


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_steps_give_the_eager_parameters_and_scale_trajectory(backend: str) -> None:
    eager = run(train_step, "ours")
    compiled = run(torch.compile(train_step, backend=backend), "ours")
    assert eager["skipped"] == [step in OVERFLOW_STEPS for step in range(STEPS)]
    assert compiled["skipped"] == eager["skipped"]
    assert compiled["scales"] == eager["scales"]
    # The forward is compiled (inductor may fuse differently); the scaler's work is not.
    for ours, reference in zip(
        compiled["model"].parameters(), eager["model"].parameters(), strict=True
    ):
        torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)


def test_compiled_steps_with_ours_and_with_torchs_scaler_agree() -> None:
    compiled = torch.compile(train_step, backend="aot_eager")
    model = make_model()
    reference_model = twin(model)
    ours, reference = run(compiled, "ours", model), run(compiled, "torch", reference_model)
    assert ours["scales"] == reference["scales"]
    assert ours["skipped"] == reference["skipped"]
    for p, q in zip(ours["model"].parameters(), reference["model"].parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def test_the_scale_changing_does_not_recompile_the_step() -> None:
    # Our bookkeeping is Python floats; traced, dynamo would guard on them and recompile.
    compiled = torch.compile(train_step, backend="aot_eager")
    objects = setup("ours")
    run_steps(compiled, objects, range(2))  # compiles every graph once (a clean, an overflow)
    with torch._dynamo.config.patch(error_on_recompile=True):
        result = run_steps(compiled, objects, range(2, STEPS))
    assert len(set(result["scales"])) > 2


def test_monitoring_readers_inside_a_compiled_step_give_the_eager_values() -> None:
    compiled = torch.compile(monitored_step, backend="aot_eager")
    eager_setup, compiled_setup = setup("ours"), setup("ours")
    for step in range(STEPS):
        inputs = step_inputs(step)
        expected = monitored_step(*eager_setup, *inputs)
        skipped, peeked, stats = compiled(*compiled_setup, *inputs)
        assert skipped.dtype == torch.bool
        assert bool(skipped) == bool(expected[0]) == (step in OVERFLOW_STEPS)
        assert peeked == expected[1] == compiled_setup[2].get_scale()
        assert stats == expected[2]
    assert stats.skipped_steps == len(OVERFLOW_STEPS)
