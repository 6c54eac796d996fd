"""Clips that may see scaled gradients (`linter.model.iterations._scaled_clips`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.iterations._iteration import of_module
from linter.model.iterations._scaled_clips import (
    ClipVerdicts,
    in_a_nested_loop,
    scaled_clips,
    under_the_steps_conditions,
)
from linter.model.iterations._unscaling import unscaling_calls
from linter.model.syntax._module_index import module_index


def _verdicts(source: str) -> tuple[ModuleContext, ClipVerdicts]:
    source = textwrap.dedent(source)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    model, index = of_module(context), module_index(context)
    return context, scaled_clips(model, index, unscaling_calls(model, index))


def lines(source: str) -> list[int]:
    context, verdicts = _verdicts(source)
    return [context.position(s.clip.call).start.line for s in verdicts.scaled]


def test_a_clip_between_scaled_backward_and_step_is_scaled_with_both_named() -> None:
    context, verdicts = _verdicts(
        """
        import torch
        for x in loader:
            scaler.scale(model(x)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """
    )
    (scaled,) = verdicts.scaled
    assert context.position(scaled.clip.call).start.line == 5
    assert scaled.backward is not None
    assert context.position(scaled.backward.call).start.line == 4
    assert (scaled.step.scaler, scaled.step.optimizer) == ("scaler", "optimizer")
    assert verdicts.judged == {scaled.clip.call}


def test_an_unscale_first_even_under_its_own_condition_covers_the_clip() -> None:
    _context, verdicts = _verdicts(
        """
        import torch
        for it in range(n):
            scaler.scale(loss).backward()
            if grad_clip != 0.0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            scaler.step(optimizer)
            scaler.update()
        """
    )
    assert verdicts.scaled == ()
    assert len(verdicts.judged) == 1  # judged, and found unscaled first


def test_a_clip_on_the_non_amp_branch_or_after_the_step_is_not_scaled() -> None:
    assert (
        lines(
            """
        import torch
        for batch in loader:
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.update()
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
        """
        )
        == []
    )


def test_an_unscale_of_the_other_optimizer_does_not_cover_this_clip() -> None:
    assert lines(
        """
        import torch
        for batch in loader:
            scaler.scale(loss_d).backward()
            scaler.unscale_(opt_d)
            torch.nn.utils.clip_grad_norm_(disc.parameters(), 1.0)
            scaler.step(opt_d)
            scaler.scale(loss_g).backward()
            torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)
            scaler.step(opt_g)
            scaler.update()
        """
    ) == [9]


def test_a_step_method_without_backward_is_scaled_only_for_a_proven_scaler() -> None:
    proven = """
        import torch
        class Trainer:
            def __init__(self):
                self.scaler = torch.amp.GradScaler("cuda")
            def optimizer_step(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.optimizer)
                self.scaler.update()
        """
    assert lines(proven) == [7]
    unknown = proven.replace('torch.amp.GradScaler("cuda")', "make_scaler()")
    assert lines(unknown) == []


def test_clip_position_facts_a_micro_batch_loop_and_the_steps_conditions() -> None:
    source = textwrap.dedent(
        """
        import torch
        for i, batch in enumerate(loader):
            for micro in batch.split(4):
                scaler.scale(model(micro)).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if (i + 1) % accum == 0:
                scaler.step(optimizer)
                scaler.update()
        """
    )
    context = ModuleContext("t.py", source, cst.parse_module(source))
    model, index = of_module(context), module_index(context)
    inner, outer = scaled_clips(model, index, unscaling_calls(model, index)).scaled
    assert in_a_nested_loop(index, inner)
    assert not in_a_nested_loop(index, outer)
    assert not under_the_steps_conditions(index, model, outer)


def test_an_unscale_in_a_hook_no_iteration_reaches_may_run_before_the_clip() -> None:
    assert (
        lines(
            """
        import torch
        class Trainer:
            def on_before_clip(self):
                self.scaler.unscale_(self.optimizer)
            def fit(self, loader):
                for batch in loader:
                    self.scaler.scale(self.model(batch)).backward()
                    self.hooks.fire()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
        """
        )
        == []
    )
