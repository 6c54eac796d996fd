"""AMP013 unscale-more-than-once: what it flags, what it leaves alone, and its example."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest
from rule_runner import run_rule, run_rule_related

from linter.cli import main
from linter.rules import UnscaleMoreThanOnce

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def lines(source: str) -> list[int]:
    return [line for line, _col, _msg in run_rule(UnscaleMoreThanOnce, textwrap.dedent(source))]


# -- what is reported ----------------------------------------------------------------------------


def test_an_unscale_every_pass_with_the_update_held_back_is_reported_with_the_update() -> None:
    source = textwrap.dedent(
        """\
        for step, batch in enumerate(loader):
            scaler.scale(model(batch) / accum).backward()
            scaler.unscale_(optimizer)
            if (step + 1) % accum == 0:
                scaler.step(optimizer)
                scaler.update()
        """
    )
    ((line, column, message),) = run_rule(UnscaleMoreThanOnce, source)
    assert (line, column) == (3, 5)
    assert "`scaler.unscale_(optimizer)` can run twice" in message
    assert "RuntimeError: unscale_() has already been called" in message
    assert run_rule_related(UnscaleMoreThanOnce, source) == [(3, [(6, "update held back")])]


def test_a_counter_the_loop_increments_holds_the_update_back_too() -> None:
    assert lines(
        """
        accum_step = 0
        for batch in loader:
            scaler.scale(model(batch)).backward()
            accum_step += 1
            if clip:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            if accum_step % accumulation == 0:
                scaler.step(optimizer)
                scaler.update()
        """
    ) == [7]


def test_an_unscale_in_a_helper_called_in_a_micro_batch_loop_is_reported_in_the_helper() -> None:
    source = textwrap.dedent(
        """\
        def clip(scaler, optimizer, model):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

        def train_step(self, batch):
            for micro in batch.chunk(4):
                scaler.scale(model(micro)).backward()
                clip(scaler, optimizer, model)
            scaler.step(optimizer)
            scaler.update()
        """
    )
    assert run_rule_related(UnscaleMoreThanOnce, source) == [(2, [(8, "called here")])]


def test_a_second_unscale_after_a_clip_helper_is_reported_with_the_first() -> None:
    source = textwrap.dedent(
        """\
        class Trainer:
            def clip_gradients(self):
                self.grad_scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)

            def train_step(self, batch):
                self.grad_scaler.scale(self.model(batch)).backward()
                if self.max_norm:
                    self.clip_gradients()
                self.grad_scaler.unscale_(self.optimizer)
                self.grad_scaler.step(self.optimizer)
                self.grad_scaler.update()
        """
    )
    assert run_rule_related(UnscaleMoreThanOnce, source) == [(10, [(9, "first unscale_")])]


# -- what is not reported ------------------------------------------------------------------------


def test_an_unscale_under_the_same_condition_as_a_helpers_update_is_once_per_step() -> None:
    assert (
        lines(
            """
            def optimizer_step(scaler, optimizer):
                scaler.step(optimizer)
                scaler.update()

            for i, batch in enumerate(loader):
                scaler.scale(model(batch)).backward()
                if (i + 1) % accum == 0 and clip:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                if (i + 1) % accum == 0:
                    optimizer_step(scaler, optimizer)
            """
        )
        == []
    )


def test_an_update_held_back_by_a_run_wide_flag_is_not_per_pass() -> None:
    # ``use_amp`` does not change from batch to batch: when the unscale runs, so does update.
    assert (
        lines(
            """
            for batch in loader:
                scaler.scale(model(batch)).backward()
                scaler.unscale_(optimizer)
                scaler.step(optimizer)
                if use_amp:
                    scaler.update()
            """
        )
        == []
    )


def test_unscales_of_an_optimizer_the_linter_cannot_name_are_not_reported() -> None:
    assert (
        lines(
            """
            for batch in loader:
                scaler.scale(loss).backward()
                for i in range(len(optimizers)):
                    scaler.unscale_(optimizers[i])
                scaler.step(optimizers[0])
                scaler.update()
            """
        )
        == []
    )


def test_a_retry_loop_that_breaks_after_one_pass_is_not_reported() -> None:
    assert (
        lines(
            """
            for batch in loader:
                scaler.scale(model(batch)).backward()
                while True:
                    scaler.unscale_(optimizer)
                    break
                scaler.step(optimizer)
                scaler.update()
            """
        )
        == []
    )


def test_an_unscale_guarded_by_the_scalers_own_stage_is_not_reported() -> None:
    # allennlp's clip_gradient checks the per-optimizer stage before unscaling.
    assert (
        lines(
            """
            from torch.amp.grad_scaler import OptState

            class Trainer:
                def clip_gradient(self):
                    state = self._scaler._per_optimizer_states[id(self.optimizer)]
                    if state["stage"] is not OptState.UNSCALED:
                        self._scaler.unscale_(self.optimizer)

                def rescale_gradients(self):
                    self._scaler.unscale_(self.optimizer)

                def train_epoch(self, loader):
                    for batch in loader:
                        self._scaler.scale(self.model(batch)).backward()
                        self.rescale_gradients()
                        self.clip_gradient()
                        self._scaler.step(self.optimizer)
                        self._scaler.update()
            """
        )
        == []
    )


def test_unscales_with_an_update_between_are_not_reported() -> None:
    assert (
        lines(
            """
            for batch in loader:
                scaler.scale(loss_d).backward()
                scaler.unscale_(optimizer)
                scaler.step(optimizer)
                scaler.update()
                scaler.scale(loss_g).backward()
                scaler.unscale_(optimizer)
                scaler.step(optimizer)
                scaler.update()
            """
        )
        == []
    )


# -- the CLI and the example ---------------------------------------------------------------------


def test_explain_prints_the_rule_page(capsys) -> None:
    assert main(["--explain", "AMP013"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith("(AMP013)")
    assert "microsoft/Swin-Transformer#311" in out


def test_the_example_raises_torchs_runtime_error_on_cpu() -> None:
    pytest.importorskip("torch")
    train = runpy.run_path(str(EXAMPLES / "unscale_in_accumulation_loop.py"))["train"]
    with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called"):
        train()


def test_the_example_runs_when_every_batch_is_a_boundary() -> None:
    # With no accumulation the unscale is once per update: the same code runs to the end.
    pytest.importorskip("torch")
    train = runpy.run_path(str(EXAMPLES / "unscale_in_accumulation_loop.py"))["train"]
    assert train(batches=3, accumulation_steps=1) == 3
