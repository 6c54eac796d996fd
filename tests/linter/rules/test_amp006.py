"""AMP006 backward-without-scale: what it flags, what it leaves alone, and its unsafe fix."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rule_runner import run_rule, run_rule_related

from linter import fix_source, lint_source
from linter.rules import BackwardWithoutScale

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def lines(source: str) -> list[int]:
    return [line for line, _col, _msg in run_rule(BackwardWithoutScale, textwrap.dedent(source))]


def messages(source: str) -> list[str]:
    return [message for _l, _c, message in run_rule(BackwardWithoutScale, textwrap.dedent(source))]


def fixed(source: str) -> str:
    return fix_source(textwrap.dedent(source), select=["AMP006"], unsafe_fixes=True).text


# -- what is reported -------------------------------------------------------------------------


def test_plain_backward_before_scaler_step() -> None:
    source = """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
            scaler.step(optimizer)
            scaler.update()
        """
    assert lines(source) == [6]
    (message,) = messages(source)
    assert "`loss.backward()` backpropagates an unscaled loss" in message
    assert "`scaler.step(optimizer)` (line 7)" in message
    assert "`scaler.scale(loss)`" in message


def test_second_loss_of_a_multi_loss_step_backpropagated_plainly() -> None:
    assert lines(
        """
        for batch in loader:
            out = model(batch)
            scaler.scale(out.loss).backward(retain_graph=True)
            out.aux_loss.backward()
            scaler.step(optimizer)
            scaler.update()
        """
    ) == [5]


def test_switched_scaler_is_reported_with_its_switch() -> None:
    source = """
        import torch
        scaler = torch.amp.GradScaler("cuda", enabled=args.amp)
        for batch in loader:
            model(batch).backward()
            scaler.step(optimizer)
            scaler.update()
        """
    assert lines(source) == [5]
    assert "whenever `args.amp` enables the scaler" in messages(source)[0]


def test_plain_backward_on_every_path_while_the_scaler_steps_under_amp() -> None:
    # With `use_amp` on, the gradients of the plain backward reach `scaler.step`.
    assert lines(
        """
        import torch
        scaler = torch.amp.GradScaler(enabled=use_amp)
        for batch in loader:
            model(batch).backward()
            if use_amp:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
        """
    ) == [5]


def test_discarded_scale_is_named_with_its_site() -> None:
    source = textwrap.dedent(
        """
        for batch in loader:
            loss = model(batch)
            scaler.scale(loss)
            loss.backward()
            scaler.step(optimizer)
            scaler.update()
        """
    )
    assert "the result of `scaler.scale(loss)` is never backpropagated" in messages(source)[0]
    assert run_rule_related(BackwardWithoutScale, source) == [
        (5, [(6, "the scaler step"), (4, "scaled loss never backpropagated")])
    ]


def test_scaled_loss_bound_to_a_name_never_backpropagated() -> None:
    source = """
        for batch in loader:
            loss = model(batch)
            scaled_loss = scaler.scale(loss)
            loss.backward()
            scaler.step(optimizer)
            scaler.update()
        """
    assert lines(source) == [5]
    assert "`scaler.scale(loss)` is never backpropagated" in messages(source)[0]


def test_helper_backward_is_reported_where_written_once() -> None:
    # `backward` is called from two loops that both step the scaler: one finding.
    assert lines(
        """
        from torch.cuda.amp import GradScaler
        class Trainer:
            def __init__(self):
                self.scaler = GradScaler()
            def backward(self, loss):
                loss.backward()
            def fit(self, loader):
                for batch in loader:
                    self.backward(self.model(batch))
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
            def finetune(self, loader):
                for batch in loader:
                    self.backward(self.model(batch))
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
        """
    ) == [7]


def test_autograd_backward_and_accumulation_guard() -> None:
    assert lines(
        """
        import torch
        for i, batch in enumerate(loader):
            torch.autograd.backward(model(batch) / accum)
            if (i + 1) % accum == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        """
    ) == [4]


def test_discriminator_stepped_through_the_scaler() -> None:
    assert lines(
        """
        for real, noise in loader:
            d_loss = critic(real).mean() - critic(gen(noise).detach()).mean()
            d_loss.backward()
            scaler.step(opt_d)
            scaler.scale(-critic(gen(noise)).mean()).backward()
            scaler.step(opt_g)
            scaler.update()
        """
    ) == [4]


def test_conditional_zero_grad_does_not_clear_the_gradients_on_every_path() -> None:
    assert lines(
        """
        for step, batch in enumerate(loader):
            model(batch).backward()
            if step % 100 == 0:
                optimizer.zero_grad()
            scaler.step(optimizer)
            scaler.update()
        """
    ) == [3]


# -- what is not reported ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "backward",
    [
        "scaler.scale(loss).backward()",
        "(scaler.scale(loss) / accum).backward()",
        "cast(torch.Tensor, scaler.scale(loss)).backward()",
        "torch.autograd.backward(scaler.scale(loss))",
        "torch.autograd.backward([scaler.scale(loss), scaler.scale(aux)])",
        "accelerator.backward(loss)",
        "self.manual_backward(loss)",
        "model_engine.backward(loss)",
        "self.backward()",
        "(loss * self.loss_scale).backward()",
        "(scaler.get_scale() * loss).backward()",
    ],
)
def test_scaled_or_wrapped_backwards(backward: str) -> None:
    source = f"""
        from typing import cast
        import torch
        for batch in loader:
            loss = model(batch)
            {backward}
            scaler.step(optimizer)
            scaler.update()
        """
    assert not lines(source)


def test_name_bound_to_a_scaled_loss_even_conditionally() -> None:
    # composer: the loss is rebound to its scaled self under the same flag as the step.
    assert not lines(
        """
        from typing import cast
        import torch
        for batch in loader:
            loss = model(batch)
            if use_grad_scaling:
                loss = cast(torch.Tensor, self.scaler.scale(loss))
            loss.backward()
            if use_grad_scaling:
                self.scaler.step(optimizer)
            else:
                optimizer.step()
        """
    )


@pytest.mark.parametrize(
    "scaling", ["loss = loss * self.loss_scale", "loss *= self.scaler.get_scale()"]
)
def test_loss_scaled_by_hand_before_the_backward(scaling: str) -> None:
    assert not lines(
        f"""
        for batch in loader:
            loss = model(batch)
            {scaling}
            loss.backward()
            self.scaler.step(optimizer)
            self.scaler.update()
        """
    )


def test_apex_scale_loss_context() -> None:
    assert not lines(
        """
        for batch in loader:
            if use_apex:
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
            else:
                scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """
    )


def test_helper_given_the_scaled_loss() -> None:
    # flair: `_backward` exists so that plugins can override it; it receives the scaled loss.
    assert not lines(
        """
        class Trainer:
            def _backward(self, loss):
                loss.backward()
            def train(self, loader, scaler):
                for batch in loader:
                    self._backward(scaler.scale(self.model(batch)))
                    scaler.step(self.optimizer)
                    scaler.update()
        """
    )


@pytest.mark.parametrize(
    ("scaled_branch", "plain_branch"),
    [
        ("if scaler is not None:", "else:"),
        ("if args.fp16:", "else:"),
        ("if use_amp:", "if not use_amp:"),
        ("if scaler:", "if scaler is None:"),
        ("if scaler.is_enabled():", "if not scaler.is_enabled():"),
    ],
)
def test_plain_backward_on_the_branch_without_amp(scaled_branch: str, plain_branch: str) -> None:
    source = f"""
        for batch in loader:
            loss = model(batch)
            {scaled_branch}
                scaler.scale(loss).backward()
            {plain_branch}
                loss.backward()
            scaler.step(optimizer)
            scaler.update()
        """
    assert not lines(source)


def test_plain_backward_where_the_scaler_is_none() -> None:
    assert not lines(
        """
        for batch in loader:
            if scaler is None:
                model(batch).backward()
                optimizer.step()
            else:
                scaler.scale(model(batch)).backward()
                scaler.step(optimizer)
                scaler.update()
        """
    )


def test_helper_branches_read_with_the_callers_argument() -> None:
    # open_clip: the helper's `scaler` parameter is the caller's `scaler`.
    assert not lines(
        """
        def backward(total_loss, grad_scaler):
            if grad_scaler is not None:
                grad_scaler.scale(total_loss).backward()
            else:
                total_loss.backward()
        def train_one_epoch(loader, scaler):
            for batch in loader:
                backward(model(batch), scaler)
                if scaler is not None:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
        """
    )


def test_helper_step_under_the_same_local_alias() -> None:
    # torchtnt: both methods read `grad_scaler = self.grad_scaler` and branch on it.
    assert not lines(
        """
        class Unit:
            def train_step(self, batch):
                grad_scaler = self.grad_scaler
                loss = self.model(batch)
                if grad_scaler:
                    grad_scaler.scale(loss).backward()
                else:
                    loss.backward()
                self._update_weights()
            def _update_weights(self):
                grad_scaler = self.grad_scaler
                if grad_scaler:
                    grad_scaler.step(self.optimizer)
                    grad_scaler.update()
                else:
                    self.optimizer.step()
            def fit(self, loader):
                for batch in loader:
                    self.train_step(batch)
        """
    )


@pytest.mark.parametrize(
    "construction",
    [
        'torch.amp.GradScaler("cuda", enabled=False)',
        "GradScaler(enabled=False)",
    ],
)
def test_disabled_scaler_divides_by_one(construction: str) -> None:
    assert not lines(
        f"""
        import torch
        from torch.amp import GradScaler
        scaler = {construction}
        for batch in loader:
            model(batch).backward()
            scaler.step(optimizer)
            scaler.update()
        """
    )


def test_switched_scaler_with_the_backward_only_when_switched_off() -> None:
    assert not lines(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda", enabled=cfg.fp16)
        for batch in loader:
            loss = model(batch)
            if not cfg.fp16:
                loss.backward()
            else:
                scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """
    )


def test_scaler_built_under_a_flag_with_the_plain_backward_in_its_other_arm() -> None:
    assert not lines(
        """
        import torch
        class Trainer:
            def __init__(self, args):
                self.args = args
                if args.fp16:
                    self.scaler = torch.amp.GradScaler("cuda")
            def fit(self, loader):
                for batch in loader:
                    loss = self.model(batch)
                    if self.args.fp16:
                        self.scaler.scale(loss).backward()
                    else:
                        loss.backward()
                    if self.use_amp:
                        self.scaler.step(self.optimizer)
                        self.scaler.update()
                    else:
                        self.optimizer.step()
        """
    )


def test_always_on_scaler_with_a_plain_backward_on_the_fp32_branch() -> None:
    # GradScaler() scales with or without autocast: the fp32 branch still reaches its step.
    assert lines(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for batch in loader:
            loss = model(batch)
            if args.fp16:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            scaler.step(optimizer)
            scaler.update()
        """
    ) == [9]


def test_fp32_discriminator_stepped_plainly_before_the_generator() -> None:
    assert not lines(
        """
        for real, noise in loader:
            opt_d.zero_grad()
            d_loss = critic(real).mean() - critic(gen(noise).detach()).mean()
            d_loss.backward()
            opt_d.step()
            opt_g.zero_grad()
            scaler.scale(-critic(gen(noise)).mean()).backward()
            scaler.step(opt_g)
            scaler.update()
        """
    )


def test_plain_backward_for_an_optimizer_stepped_after_the_scaler() -> None:
    # The auxiliary network's gradients are `aux_optimizer`'s, not the scaler-stepped one's.
    assert not lines(
        """
        for batch in loader:
            scaler.scale(model(batch)).backward()
            aux_net(batch).backward()
            scaler.step(optimizer)
            scaler.update()
            aux_optimizer.step()
        """
    )


def test_generator_first_then_fp32_critic_after_the_scaler_step() -> None:
    assert not lines(
        """
        for batch in loader:
            scaler.scale(g_loss(batch)).backward()
            scaler.step(opt_g)
            scaler.update()
            d_loss(batch).backward()
            opt_d.step()
        """
    )


def test_gradients_cleared_before_the_scaler_step() -> None:
    # A gradient probe: the plain backward's gradients are read, then zeroed.
    assert not lines(
        """
        for batch in loader:
            probe(batch).backward()
            record_gradients(model)
            model.zero_grad()
            scaler.scale(model(batch)).backward()
            scaler.step(optimizer)
            scaler.update()
        """
    )


def test_backward_in_another_loop_than_the_scaler_step() -> None:
    assert not lines(
        """
        for batch in warmup_loader:
            model(batch).backward()
            warmup_optimizer.step()
            warmup_optimizer.zero_grad()
        for batch in loader:
            scaler.scale(model(batch)).backward()
            scaler.step(optimizer)
            scaler.update()
        """
    )


def test_prefilter_needs_a_backward_a_step_and_a_scaler() -> None:
    assert BackwardWithoutScale.wants("loss.backward()\nscaler.step(opt)\n")
    assert not BackwardWithoutScale.wants("loss.backward()\noptimizer.step()\n")
    assert not BackwardWithoutScale.wants("scaler.step(opt)\n")


# -- the fix ----------------------------------------------------------------------------------


def test_fix_wraps_the_loss_and_keeps_the_backward_arguments() -> None:
    result = fixed(
        """
        for batch in loader:
            scaler.scale(main(batch)).backward(retain_graph=True)
            (aux(batch) / accum).backward(retain_graph=True)
            scaler.step(optimizer)
            scaler.update()
        """
    )
    assert "    scaler.scale(aux(batch) / accum).backward(retain_graph=True)\n" in result


def test_fix_uses_the_scaler_of_the_class_in_a_helper_method() -> None:
    result = fixed(
        """
        class Trainer:
            def backward(self, loss):
                loss.backward()
            def fit(self, loader):
                for batch in loader:
                    self.backward(self.model(batch))
                    self.grad_scaler.step(self.optimizer)
                    self.grad_scaler.update()
        """
    )
    assert "        self.grad_scaler.scale(loss).backward()\n" in result


def test_fix_of_autograd_backward_scales_its_tensors() -> None:
    result = fixed(
        """
        import torch
        for batch in loader:
            torch.autograd.backward([ce(batch), kl(batch)], inputs=params)
            scaler.step(optimizer)
            scaler.update()
        """
    )
    assert "torch.autograd.backward(scaler.scale([ce(batch), kl(batch)]), inputs=params)" in result


@pytest.mark.parametrize(
    "source",
    [
        # The helper cannot see the caller's local `scaler`.
        """
        def backward(loss):
            loss.backward()
        def train(loader, scaler):
            for batch in loader:
                backward(model(batch))
                scaler.step(optimizer)
                scaler.update()
        """,
        # Two scalers step what the backward leaves: which one is not known.
        """
        for batch in loader:
            model(batch).backward()
            grad_scaler.step(opt_a)
            loss_scaler.step(opt_b)
            grad_scaler.update()
            loss_scaler.update()
        """,
    ],
    ids=["scaler-out-of-scope", "two-scalers"],
)
def test_no_fix_when_the_scaler_cannot_be_named_there(source: str) -> None:
    (diagnostic,) = lint_source(textwrap.dedent(source), select=["AMP006"])
    assert diagnostic.fix is None


def test_fix_is_unsafe_and_converges() -> None:
    source = (EXAMPLES / "fp16_penalty_backward_without_scale.py").read_text(encoding="utf-8")
    (diagnostic,) = lint_source(source, select=["AMP006"])
    assert diagnostic.fix is not None
    assert diagnostic.fix.applicability == "unsafe"
    assert lint_source(source, select=["AMP006"], fix=True) == source
    after = lint_source(source, select=["AMP006"], fix=True, unsafe_fixes=True)
    assert lint_source(after, select=["AMP006"]) == []


def test_fixed_example_is_the_clean_example() -> None:
    bad = (EXAMPLES / "fp16_penalty_backward_without_scale.py").read_text(encoding="utf-8")
    clean = (EXAMPLES / "fp16_penalty_backward_scaled.py").read_text(encoding="utf-8")
    after = fix_source(bad, select=["AMP006"], unsafe_fixes=True).text

    def code(text: str) -> str:  # the scripts differ only in their docstrings
        return text.split('"""', 2)[2]

    assert code(after) == code(clean)


def test_cli_fix_with_unsafe_fixes_rewrites_the_file(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "for batch in loader:\n"
        "    loss = model(batch)\n"
        "    loss.backward()\n"
        "    scaler.step(optimizer)\n"
        "    scaler.update()\n",
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "linter", "--no-cache", "--select", "AMP006", str(script)]
    run = subprocess.run([*command, "--fix"], capture_output=True, text=True, check=False)
    assert run.returncode == 1
    assert "loss.backward()" in script.read_text(encoding="utf-8")
    run = subprocess.run(
        [*command, "--fix", "--unsafe-fixes"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "    scaler.scale(loss).backward()\n" in script.read_text(encoding="utf-8")


def test_the_plain_backward_really_loses_the_penalty_on_cpu() -> None:
    # The docstrings' claim, measured: the unscaled penalty's gradients arrive divided by the
    # scale, so the weights keep their unregularized norm (~0.8) instead of halving (~0.4).
    pytest.importorskip("torch")
    sys.path.insert(0, str(EXAMPLES))
    try:
        import fp16_penalty_backward_scaled as clean
        import fp16_penalty_backward_without_scale as bad
    finally:
        sys.path.remove(str(EXAMPLES))
    lost, kept = bad.train(steps=60), clean.train(steps=60)
    assert lost > 1.5 * kept


# -- issue 20: dict-lookup flags and a rebound scaled loss reduced before the backward -------


@pytest.mark.parametrize("flag", ['args["fp16"]', "cfg['use_amp']", 'self.opts["half"]'])
def test_dict_lookup_flags_are_exclusive_branches(flag: str) -> None:
    source = f"""
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for batch in loader:
            loss = model(batch)
            if {flag}:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if {flag}:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
        """
    assert lines(source) == []


def test_dict_lookup_flags_of_different_keys_are_not_exclusive() -> None:
    assert lines(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for batch in loader:
            loss = model(batch)
            if opts["fp16"]:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if opts["amp"]:
                scaler.step(optimizer)
                scaler.update()
        """
    ) == [9]


@pytest.mark.parametrize(
    "backward",
    ["loss.mean().backward()", "(loss.sum() / n).backward()", "loss.float().mean().backward()"],
)
def test_rebound_scaled_loss_reduced_is_scaled(backward: str) -> None:
    source = f"""
        def step(model, batch, optimizer, scaler=None):
            loss = model(batch)
            if scaler is not None:
                loss = scaler.scale(loss)
            {backward}
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
        """
    assert lines(source) == []
    assert ".scale(" not in fixed(source).split("loss = scaler.scale(loss)")[1]


def test_reduction_of_the_unscaled_name_is_still_reported() -> None:
    source = """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for batch in loader:
            per_sample = model(batch)
            scaled = scaler.scale(per_sample)
            per_sample.mean().backward()
            scaler.step(optimizer)
            scaler.update()
        """
    assert lines(source) == [7]
    assert "scaler.scale(per_sample.mean()).backward()" in fixed(source)


MAIN_GUARD = """\
import torch

if __name__ == "__main__":
    scaler = torch.cuda.amp.GradScaler()
    for i, batch in enumerate(loader):
        loss = model(batch)
        if use_fp16:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if (1 + i) % accumulation_steps == 0:
            scaler.step(optimizer)
            scaler.update()
"""


def test_a_scaler_built_under_the_main_guard_is_on_for_every_run() -> None:
    # matchmaker's shape: the fp32 arm's plain backward reaches the always-on scaler's step.
    assert lines(MAIN_GUARD) == [10]
    # A scaler the fp16 switch builds is off on the runs that take the plain arm.
    switched = MAIN_GUARD.replace(
        "    scaler = torch.cuda.amp.GradScaler()\n",
        "    if use_fp16:\n        scaler = torch.cuda.amp.GradScaler()\n",
    )
    assert lines(switched) == []
