"""Whether a backward's gradients reach a later step (`linter.model.iterations._gradient_reach`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.iterations._gradient_reach import feeds_a_plain_optimizer, never_together, reaches
from linter.model.iterations._iteration import TrainingIterations, of_module
from linter.model.iterations._iteration_events import Iteration, Kind
from linter.model.syntax._module_index import ModuleIndex, module_index


def _one(source: str) -> tuple[ModuleIndex, TrainingIterations, Iteration]:
    source = textwrap.dedent(source)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    model = of_module(context)
    (iteration,) = model.iterations
    return module_index(context), model, iteration


def test_a_zero_grad_always_between_stops_the_gradients_one_under_a_condition_does_not() -> None:
    index, model, iteration = _one(
        """
        for batch in loader:
            first.backward()
            optimizer.zero_grad()
            second.backward()
            if accumulate_done:
                optimizer.zero_grad()
            scaler.step(optimizer)
            scaler.update()
        """
    )
    first, second = iteration.of(Kind.BACKWARD)
    (step,) = iteration.of(Kind.SCALER_STEP)
    assert not reaches(model, index, iteration, first, step)
    assert reaches(model, index, iteration, second, step)


def test_contradicting_conditions_never_run_together_and_do_not_reach() -> None:
    index, model, iteration = _one(
        """
        for batch in loader:
            if not use_amp:
                loss.backward()
            if use_amp:
                scaler.step(optimizer)
                scaler.update()
        """
    )
    (backward,) = iteration.of(Kind.BACKWARD)
    (step,) = iteration.of(Kind.SCALER_STEP)
    assert never_together(model, iteration, backward, step)
    assert not reaches(model, index, iteration, backward, step)


def test_a_backward_before_another_optimizer_stepped_directly_feeds_it() -> None:
    _index, model, iteration = _one(
        """
        for real in loader:
            d_loss.backward()
            scaler.step(opt_g)
            opt_d.step()
            scaler.update()
        """
    )
    (backward,) = iteration.of(Kind.BACKWARD)
    steps = iteration.of(Kind.SCALER_STEP)
    assert feeds_a_plain_optimizer(model, iteration, backward, steps)
    _index, model, iteration = _one(
        """
        for real in loader:
            d_loss.backward()
            scaler.step(opt_g)
            scaler.update()
        """
    )
    (backward,) = iteration.of(Kind.BACKWARD)
    assert not feeds_a_plain_optimizer(model, iteration, backward, iteration.of(Kind.SCALER_STEP))
