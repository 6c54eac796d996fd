"""AMP012 scaled-gradients-observed: what it flags, what it leaves alone, and its example."""

from __future__ import annotations

import math
import runpy
import textwrap
from pathlib import Path

import pytest
from rule_runner import run_rule, run_rule_related

from linter.cli import main
from linter.rules import ScaledGradientsObserved

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def lines(source: str) -> list[int]:
    return [line for line, _col, _msg in run_rule(ScaledGradientsObserved, textwrap.dedent(source))]


# -- what is reported ----------------------------------------------------------------------------


def test_a_logged_norm_between_scaled_backward_and_step_names_the_unscale_to_add() -> None:
    source = textwrap.dedent(
        """\
        import torch
        for batch in loader:
            self_scaler = None
            grad_scaler.scale(model(batch)).backward()
            wandb.log({"grad": model.fc.weight.grad.norm()})
            grad_scaler.step(opt_main)
            grad_scaler.update()
        """
    )
    ((line, column, message),) = run_rule(ScaledGradientsObserved, source)
    assert (line, column) == (5, 24)
    assert "`model.fc.weight.grad.norm()`" in message
    assert "`grad_scaler.unscale_(opt_main)`" in message
    assert run_rule_related(ScaledGradientsObserved, source) == [(5, [(4, "scaled backward")])]


def test_a_read_in_a_helper_is_reported_at_the_call_that_runs_it_before_unscale() -> None:
    # Issue 42, class 7: the helper reads nothing wrong by itself; the call does.
    source = textwrap.dedent(
        """\
        class Trainer:
            def grad_stats(self):
                return {n: p.grad.std().item() for n, p in self.model.named_parameters()}

            def fit(self, loader):
                for batch in loader:
                    self.scaler.scale(self.model(batch)).backward()
                    self.logger.log(self.grad_stats())
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
        """
    )
    assert run_rule_related(ScaledGradientsObserved, source) == [
        (8, [(7, "scaled backward"), (3, "the gradients are read here")])
    ]


def test_a_helper_called_before_and_after_unscale_is_reported_at_the_early_call_only() -> None:
    source = """\
        class Trainer:
            def grad_stats(self):
                return {n: p.grad.std().item() for n, p in self.model.named_parameters()}

            def fit(self, loader):
                for batch in loader:
                    self.scaler.scale(self.model(batch)).backward()
                    early = self.grad_stats()
                    self.scaler.unscale_(self.optimizer)
                    late = self.grad_stats()
                    self.logger.log(early, late)
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
        """
    assert lines(source) == [8]
    assert lines(source.replace("early = self.grad_stats()", "early = None")) == []


def test_a_tensorboard_histogram_of_each_gradient_is_reported() -> None:
    assert lines(
        """
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter()
        for step, batch in enumerate(loader):
            scaler.scale(model(batch)).backward()
            if step % 100 == 0:
                for name, p in model.named_parameters():
                    writer.add_histogram(f"grad/{name}", p.grad.detach().cpu(), step)
            scaler.step(optimizer)
            scaler.update()
        """
    ) == [8]


def test_a_norm_compared_with_a_threshold_is_reported() -> None:
    # Deciding on a scaled norm: the threshold means something else at every scale.
    assert lines(
        """
        import torch
        for batch in loader:
            scaler.scale(model(batch)).backward()
            total = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
            if total > 100.0:
                optimizer.zero_grad()
                continue
            scaler.step(optimizer)
            scaler.update()
        """
    ) == [5]


def test_a_read_on_the_amp_path_after_both_backwards_is_reported() -> None:
    assert lines(
        """
        for batch in loader:
            if args.amp:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            log(p.grad.norm() for p in model.parameters())
            if args.amp:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
        """
    ) == [7]


def test_wandb_watch_beside_a_scaled_backward_is_reported_even_with_unscale() -> None:
    # wandb's hooks fire during backward, before any unscale_ (wandb#4369).
    source = textwrap.dedent(
        """\
        import wandb
        run = wandb.init(project="p")
        run.watch(model, log_freq=50)
        for batch in loader:
            scaler.scale(model(batch)).backward()
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
        """
    )
    assert run_rule_related(ScaledGradientsObserved, source) == [(3, [(5, "scaled backward")])]


# -- what is not reported ------------------------------------------------------------------------


def test_a_read_after_an_unscale_under_its_own_condition_is_not_reported() -> None:
    assert (
        lines(
            """
            for batch in loader:
                scaler.scale(model(batch)).backward()
                if log_now:
                    scaler.unscale_(optimizer)
                    log(model.fc.weight.grad.norm())
                scaler.step(optimizer)
                scaler.update()
            """
        )
        == []
    )


def test_a_read_after_a_call_that_unscales_by_name_is_not_reported() -> None:
    assert (
        lines(
            """
            for batch in loader:
                scaler.scale(model(batch)).backward()
                trainer.unscale_gradients()
                log(model.fc.weight.grad.norm())
                scaler.step(optimizer)
                scaler.update()
            """
        )
        == []
    )


def test_an_unscale_in_a_hook_no_iteration_reaches_is_not_ruled_out() -> None:
    assert (
        lines(
            """
            class Trainer:
                def before_log(self):
                    self.scaler.unscale_(self.optimizer)

                def fit(self, loader):
                    for batch in loader:
                        self.scaler.scale(self.model(batch)).backward()
                        self.hooks.run("before_log")
                        log(self.model.fc.weight.grad.norm())
                        self.scaler.step(self.optimizer)
                        self.scaler.update()
            """
        )
        == []
    )


def test_a_function_that_divides_by_the_scale_is_not_reported() -> None:
    # caiman-asr's shape: the logging helper reads the scale and divides it out.
    assert (
        lines(
            """
            def grad_norm(model, scaler):
                total = sum(p.grad.norm() ** 2 for p in model.parameters()) ** 0.5
                return total / scaler.get_scale()

            for batch in loader:
                scaler.scale(model(batch)).backward()
                log(grad_norm(model, scaler))
                scaler.step(optimizer)
                scaler.update()
            """
        )
        == []
    )


def test_an_overflow_check_of_a_stored_norm_is_not_reported() -> None:
    assert (
        lines(
            """
            import math
            import torch
            for batch in loader:
                scaler.scale(model(batch)).backward()
                norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
                if not math.isfinite(norm):
                    print("overflow")
                scaler.step(optimizer)
                scaler.update()
            """
        )
        == []
    )


def test_reads_outside_an_amp_iteration_are_not_reported() -> None:
    # No scaler step or update anywhere: a plain fp32 loop.
    assert (
        lines(
            """
            for batch in loader:
                model(batch).backward()
                log(model.fc.weight.grad.norm())
                optimizer.step()
            """
        )
        == []
    )


def test_wandb_watch_without_a_scaled_backward_or_with_a_disabled_scaler_is_not_reported() -> None:
    assert (
        lines(
            """
            import wandb
            wandb.watch(model)
            for batch in loader:
                model(batch).backward()
                optimizer.step()
            """
        )
        == []
    )
    assert (
        lines(
            """
            import torch
            import wandb
            scaler = torch.amp.GradScaler("cuda", enabled=False)
            wandb.watch(model)
            for batch in loader:
                scaler.scale(model(batch)).backward()
                scaler.step(optimizer)
                scaler.update()
            """
        )
        == []
    )


# -- the CLI and the example ---------------------------------------------------------------------


def test_explain_prints_the_rule_page(capsys) -> None:
    assert main(["--explain", "AMP012"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith("(AMP012)")
    assert "wandb/wandb#9092" in out


def test_the_example_logs_the_norm_multiplied_by_the_scale_on_cpu(capsys) -> None:
    # The evidence, measured: the logged norm is inf when the first scale overflows, then
    # exactly the scale times the norm the optimizer applies.
    pytest.importorskip("torch")
    history, scale = runpy.run_path(str(EXAMPLES / "grad_norm_logged_before_unscale.py"))["train"]()
    assert math.isinf(history[0][0])
    for logged, applied in history[1:]:
        assert logged == pytest.approx(scale * applied, rel=1e-6)
    assert scale >= 1024
