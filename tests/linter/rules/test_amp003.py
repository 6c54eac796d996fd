"""AMP003 clip-before-unscale: what it flags, what it leaves alone, and its unscale_ fix."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest
from rule_runner import run_rule, run_rule_related

from linter import fix_source, lint_source
from linter.cli import main
from linter.rules import ClipBeforeUnscale


def lines(source: str) -> list[int]:
    return [line for line, _col, _msg in run_rule(ClipBeforeUnscale, textwrap.dedent(source))]


def fixed(source: str) -> str:
    return fix_source(textwrap.dedent(source), select=["AMP003"], unsafe_fixes=True).text


# -- what is reported ----------------------------------------------------------------------------


def test_a_clip_between_scaled_backward_and_step_is_reported_with_both_sites() -> None:
    source = textwrap.dedent(
        """\
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            scaler.scale(loss_fn(model(x), y)).backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """
    )
    ((line, column, message),) = run_rule(ClipBeforeUnscale, source)
    assert (line, column) == (5, 12)
    assert "`scaler.unscale_(optimizer)`" in message
    assert "`clip_grad_norm_`" in message
    assert run_rule_related(ClipBeforeUnscale, source) == [
        (5, [(4, "scaled backward"), (6, "scaler step")])
    ]


def test_clip_inside_the_accumulation_micro_loop_is_reported() -> None:
    # tez's shape: each micro-step clips the scaled, partly accumulated gradients.
    assert lines(
        """
        import torch
        for step, batch in enumerate(loader):
            loss = model(batch) / accum
            if fp16:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            if (step + 1) % accum == 0:
                if fp16:
                    scaler.unscale_(optimizer)
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
        """
    ) == [10]


def test_a_checkpoint_save_handed_the_scaler_after_the_step_does_not_hide_the_clip() -> None:
    assert lines(
        """
        import torch
        for step, batch in enumerate(loader):
            scaler.scale(model(batch)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            if step % 1000 == 0:
                save_checkpoint(model, optimizer, scaler)
        """
    ) == [5]


@pytest.mark.parametrize(
    ("shape", "advice"),
    [
        (
            "for micro in batch.split(4):\n        scaler.scale(model(micro)).backward()\n"
            "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    if True:\n        scaler.step(optimizer)",
            "clip once, after the loop and after `scaler.unscale_(optimizer)`",
        ),
        (
            "scaler.scale(model(batch)).backward()\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    if (i + 1) % accum == 0:\n        scaler.step(optimizer)",
            "clip under the conditions where `scaler.step(optimizer)` runs, after "
            "`scaler.unscale_(optimizer)`",
        ),
        (
            "scaler.scale(model(batch)).backward()\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    scaler.step(optimizer)",
            "; call `scaler.unscale_(optimizer)` before it",
        ),
    ],
    ids=["micro-loop", "step-under-a-guard", "plain"],
)
def test_the_message_says_where_to_clip(shape: str, advice: str) -> None:
    source = f"import torch\nfor i, batch in enumerate(loader):\n    {shape}\n"
    ((_line, _column, message),) = run_rule(ClipBeforeUnscale, source)
    assert message.endswith(advice)


def test_clip_and_backward_in_methods_called_from_the_loop() -> None:
    assert lines(
        """
        from torch.nn.utils import clip_grad_value_
        class Trainer:
            def backward(self, loss):
                self.scaler.scale(loss).backward()
            def clip(self):
                clip_grad_value_(self.model.parameters(), 0.5)
            def fit(self):
                for batch in self.loader:
                    self.backward(self.loss(batch))
                    self.clip()
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
        """
    ) == [7]


@pytest.mark.parametrize(
    "clip",
    [
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
        "torch.nn.utils.clip_grad_value_(model.parameters(), 1.0)",
        "torch.nn.utils.clip_grad.clip_grad_norm_(model.parameters(), 1.0)",
        "torch.nn.utils.clip_grads_with_norm_(params, 1.0, total)",
        "model.clip_grad_norm_(1.0)",  # FSDP's method
    ],
)
def test_every_spelling_of_a_clip(clip: str) -> None:
    assert lines(
        f"""
        import torch
        for batch in loader:
            scaler.scale(model(batch)).backward()
            {clip}
            scaler.step(optimizer)
            scaler.update()
        """
    ) == [5]


def test_the_second_optimizer_of_a_gan_step_is_not_covered_by_the_first_ones_unscale() -> None:
    assert lines(
        """
        import torch
        for real in loader:
            scaler.scale(d_loss(real)).backward()
            scaler.unscale_(opt_d)
            torch.nn.utils.clip_grad_norm_(disc.parameters(), 1.0)
            scaler.step(opt_d)
            scaler.scale(g_loss(real)).backward()
            torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)
            scaler.step(opt_g)
            scaler.update()
        """
    ) == [9]


def test_a_trainer_step_method_without_the_backward_is_reported_when_the_scaler_is_proven() -> None:
    source = """
        import torch
        class Trainer:
            def __init__(self):
                self.scaler = torch.amp.GradScaler("cuda")
            def optimizer_step(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                self.scaler.step(self.optimizer)
                self.scaler.update()
        """
    assert lines(source) == [7]
    # Named like a scaler but not proven one: the backward is not in sight either, so no.
    assert lines(source.replace('torch.amp.GradScaler("cuda")', "make_scaler()")) == []


def test_a_trainer_step_method_is_not_reported_when_the_module_unscales_elsewhere() -> None:
    assert not lines(
        """
        import torch
        class Trainer:
            def __init__(self):
                self.scaler = torch.amp.GradScaler("cuda")
            def after_backward(self):
                self.scaler.unscale_(self.optimizer)
            def optimizer_step(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                self.scaler.step(self.optimizer)
                self.scaler.update()
        """
    )


def test_one_clip_reached_from_two_iterations_is_reported_once() -> None:
    assert lines(
        """
        import torch
        class Trainer:
            def optimizer_step(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.optimizer)
                self.scaler.update()
            def fit(self):
                for batch in self.loader:
                    self.scaler.scale(self.loss(batch)).backward()
                    self.optimizer_step()
        """
    ) == [5]


# -- what is not reported ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        # nanoGPT: the unscale_ under the same condition as the clip.
        """
        for it in range(max_iters):
            for micro_step in range(accum):
                scaler.scale(loss).backward()
            if grad_clip != 0.0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            scaler.step(optimizer)
            scaler.update()
        """,
        # timm's NativeScaler.__call__.
        """
        class NativeScaler:
            def __call__(self, loss, optimizer, clip_grad=None, parameters=None):
                self._scaler.scale(loss).backward()
                if clip_grad is not None:
                    self._scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
                self._scaler.step(optimizer)
                self._scaler.update()
        """,
        # The unscale_ in a helper method called before the clip.
        """
        class Trainer:
            def unscale(self):
                self.scaler.unscale_(self.optimizer)
            def train_step(self, batch):
                self.scaler.scale(self.loss(batch)).backward()
                self.unscale()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.optimizer)
                self.scaler.update()
        """,
        # The clip on the non-AMP path only.
        """
        for batch in loader:
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
        """,
        # Two separate `if`s on the same flag are exclusive with the other arm.
        """
        for batch in loader:
            if use_amp:
                scaler.scale(loss).backward()
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if use_amp:
                scaler.step(optimizer)
            else:
                optimizer.step()
        """,
        # Accelerate clips (and unscales) itself.
        """
        for batch in loader:
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        """,
        # A critic whose optimizer is stepped directly, not through the scaler.
        """
        for batch in loader:
            scaler.scale(actor_loss).backward()
            critic_loss.backward()
            torch.nn.utils.clip_grad_norm_(critic.parameters(), 1.0)
            critic_optimizer.step()
            scaler.step(actor_optimizer)
            scaler.update()
        """,
        # The clip comes after the step (it acts on the next step's... nothing: no scaled grads).
        """
        for batch in loader:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        """,
        # A loop over the optimizers unscales each one.
        """
        for batch in loader:
            scaler.scale(loss).backward()
            for opt in optimizers:
                scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
        # A call named like an unscale (a method of a base class in another module).
        """
        class Trainer(Base):
            def train_step(self, batch):
                self.scaler.scale(self.loss(batch)).backward()
                self.unscale_gradients()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.optimizer)
                self.scaler.update()
        """,
        # A function of another module handed the scaler may unscale.
        """
        from .clipping import clip_scaled
        for batch in loader:
            scaler.scale(loss).backward()
            prepare_for_clip(scaler, optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
        # A clip before this iteration's backward does not clip what the backward makes.
        """
        scaler = torch.amp.GradScaler("cuda")
        for batch in loader:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
        # A hook of this file unscales; the trainer calls its hooks in ways not followed here.
        """
        class UnscaleHook(HookBase):
            def after_backward(self):
                self.trainer.scaler.unscale_(self.trainer.optimizer)
        class Trainer:
            def run_step(self):
                self.scaler.scale(self.loss()).backward()
                self.call_hooks("after_backward")
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.optimizer)
                self.scaler.update()
        """,
        # Not torch's clip: an unimported look-alike.
        """
        for batch in loader:
            scaler.scale(loss).backward()
            clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
    ],
    ids=[
        "nanogpt",
        "timm-native-scaler",
        "unscale-in-helper",
        "non-amp-branch",
        "exclusive-flags",
        "accelerate",
        "critic-stepped-directly",
        "clip-after-step",
        "loop-over-optimizers",
        "unscale-named-call",
        "scaler-handed-to-a-function",
        "clip-before-the-backward",
        "unscale-in-an-unreached-hook",
        "unimported-lookalike",
    ],
)
def test_not_reported(source: str) -> None:
    assert lines("import torch\n" + textwrap.dedent(source)) == []


def test_files_without_a_clip_and_a_step_are_not_parsed() -> None:
    assert not ClipBeforeUnscale.wants("scaler.scale(loss).backward()\nscaler.step(opt)\n")
    assert not ClipBeforeUnscale.wants("torch.nn.utils.clip_grad_norm_(p, 1.0)\n")
    assert ClipBeforeUnscale.wants("clip_grad_norm_(p, 1.0)\nscaler.step(opt)\n")


# -- Accelerate ----------------------------------------------------------------------------------

ACCELERATE_LOOP = """
from accelerate import Accelerator
import torch
accelerator = Accelerator({options})
for batch in loader:
    accelerator.backward(model(**batch).loss)
    {before}
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
"""


def test_torch_clip_after_accelerate_backward_is_reported() -> None:
    source = textwrap.dedent(ACCELERATE_LOOP.format(options="", before="pass"))
    ((line, _column, message),) = run_rule(ClipBeforeUnscale, source)
    assert line == 8
    assert "`accelerator.clip_grad_norm_(...)`" in message
    assert run_rule_related(ClipBeforeUnscale, source) == [(8, [(6, "Accelerate backward")])]


@pytest.mark.parametrize(
    ("options", "before"),
    [
        ('mixed_precision="bf16"', "pass"),
        ('mixed_precision="no"', "pass"),
        ("", "accelerator.unscale_gradients()"),
        ('deepspeed_plugin="ds_config.json"', "pass"),
    ],
    ids=["pinned-bf16", "pinned-no", "unscale-gradients", "deepspeed"],
)
def test_accelerate_clip_is_not_reported_when_fp16_is_ruled_out_or_unscaled(
    options: str, before: str
) -> None:
    assert not lines(ACCELERATE_LOOP.format(options=options, before=before))


def test_accelerate_clip_is_reported_when_fp16_is_a_runtime_choice() -> None:
    source = ACCELERATE_LOOP.format(options="mixed_precision=args.mixed_precision", before="pass")
    assert lines(source) == [8]


DRIVER_TRAINER = """
from accelerate import Accelerator
import torch


class Trainer:
    def init_driver(self, precision):
        self._driver = Accelerator(mixed_precision=precision)

    def _backward(self, loss):
        self._driver.backward(loss)

    def _clip(self):
        {clip}(self.model.parameters(), 1.0)

    def train_step(self, batch):
        with self._driver.accumulate(self.model):
            self._backward(self.model(batch))
            {before}
            self._clip()
            self.optimizer.step()
            self.optimizer.zero_grad()
"""


def test_torch_clip_after_the_backward_of_an_accelerator_of_another_name_is_reported() -> None:
    source = DRIVER_TRAINER.format(clip="torch.nn.utils.clip_grad_norm_", before="pass")
    ((line, _column, message),) = run_rule(ClipBeforeUnscale, textwrap.dedent(source))
    assert line == 14
    assert "`self._driver.clip_grad_norm_(...)`" in message


@pytest.mark.parametrize(
    ("clip", "before"),
    [
        ("self._driver.clip_grad_norm_", "pass"),
        ("torch.nn.utils.clip_grad_norm_", "self._unscale()"),
    ],
    ids=["accelerator-clip", "unscale-helper"],
)
def test_an_accelerator_of_another_name_that_unscales_is_not_reported(
    clip: str, before: str
) -> None:
    source = DRIVER_TRAINER.format(clip=clip, before=before)
    source += "\n    def _unscale(self):\n        self._driver.unscale_gradients()\n"
    assert not lines(source)


# -- the fix -------------------------------------------------------------------------------------

LOOP = """\
import torch

for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
"""


def test_fix_inserts_unscale_before_the_clip() -> None:
    assert fixed(LOOP) == LOOP.replace(
        "    torch.nn", "    scaler.unscale_(optimizer)\n    torch.nn"
    )


def test_the_fix_is_unsafe() -> None:
    (diagnostic,) = lint_source(LOOP, select=["AMP003"])
    assert diagnostic.fix is not None
    assert diagnostic.fix.applicability == "unsafe"
    assert fix_source(LOOP, select=["AMP003"]).text == LOOP


def test_fixed_source_is_clean_and_a_second_fix_is_a_no_op() -> None:
    once = fixed(LOOP)
    assert lint_source(once, select=["AMP003"]) == []
    assert fixed(once) == once


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # Under the clip's own condition, at its indentation, names from the step.
        (
            """
            class Trainer:
                def train_step(self, batch):
                    self.grad_scaler.scale(self.loss(batch)).backward()
                    if self.max_norm:
                        norm = clip_grad_norm_(self.model.parameters(), self.max_norm)
                    self.grad_scaler.step(self.opt)
                    self.grad_scaler.update()
            """,
            "        if self.max_norm:\n"
            "            self.grad_scaler.unscale_(self.opt)\n"
            "            norm = clip_grad_norm_(",
        ),
        # After the comment and blank line above the clip, which stay where they were.
        (
            """
            for batch in loader:
                scaler.scale(loss).backward()

                # clip the gradients
                clip_grad_norm_(model.parameters(), 1.0)  # max norm 1
                scaler.step(optimizer)
                scaler.update()
            """,
            "    scaler.scale(loss).backward()\n\n    # clip the gradients\n"
            "    scaler.unscale_(optimizer)\n"
            "    clip_grad_norm_(model.parameters(), 1.0)  # max norm 1\n",
        ),
        # After a compound statement.
        (
            """
            for batch in loader:
                with autocast:
                    loss = model(batch)
                scaler.scale(loss).backward()
                if verbose:
                    print(loss)
                clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
            """,
            "        print(loss)\n    scaler.unscale_(optimizer)\n    clip_grad_norm_(",
        ),
    ],
    ids=["under-condition", "after-comment", "after-compound"],
)
def test_fix_places_the_unscale(before: str, after: str) -> None:
    header = "from torch.nn.utils import clip_grad_norm_\n"
    assert after in fixed(header + textwrap.dedent(before))


@pytest.mark.parametrize(
    "source",
    [
        # Several optimizers: which one to unscale is the author's call.
        """
        for batch in loader:
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt_a)
            scaler.step(opt_b)
            scaler.update()
        """,
        # In the micro-batch loop: a second unscale_ before update() raises.
        """
        for batch in loader:
            for micro in batch.split(4):
                scaler.scale(model(micro)).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
        # The step is under a condition the clip is not (accumulation, the AMP flag).
        """
        for i, batch in enumerate(loader):
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if (i + 1) % accum == 0:
                scaler.step(optimizer)
                scaler.update()
        """,
        # Not a plain statement of its own.
        """
        for batch in loader:
            scaler.scale(loss).backward()
            log(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
            scaler.step(optimizer)
            scaler.update()
        """,
        """
        for batch in loader:
            scaler.scale(loss).backward()
            if clip: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
        # In another function than the step: its names may not be visible there.
        """
        def clip(model):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for batch in loader:
            scaler.scale(loss).backward()
            clip(model)
            scaler.step(optimizer)
            scaler.update()
        """,
    ],
    ids=[
        "several-optimizers",
        "micro-loop",
        "step-under-accumulation-guard",
        "inside-an-expression",
        "one-line-if",
        "clip-in-helper",
    ],
)
def test_no_fix_where_it_could_break_the_step(source: str) -> None:
    source = "import torch\n" + textwrap.dedent(source)
    diagnostics = lint_source(source, select=["AMP003"])
    assert diagnostics
    assert all(d.fix is None for d in diagnostics)


def test_two_clips_before_one_step_get_one_unscale() -> None:
    source = textwrap.dedent(
        """\
        import torch
        for batch in loader:
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(encoder.parameters(), 1.0)
            torch.nn.utils.clip_grad_norm_(decoder.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """
    )
    once = fixed(source)
    assert once.count("scaler.unscale_(optimizer)") == 1
    assert lint_source(once, select=["AMP003"]) == []


def test_fix_keeps_tabs_and_crlf() -> None:
    source = LOOP.replace("    ", "\t").replace("\n", "\r\n")
    result = fixed(source)
    assert "\r\n\tscaler.unscale_(optimizer)\r\n\ttorch.nn" in result


def test_cli_fix_with_unsafe_fixes_rewrites_the_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "train.py"
    path.write_text(LOOP, encoding="utf-8")
    assert main(["--no-cache", "--select", "AMP003", "--fix", "train.py"]) == 1
    assert path.read_text(encoding="utf-8") == LOOP
    assert main(["--no-cache", "--select", "AMP003", "--fix", "--unsafe-fixes", "train.py"]) == 0
    assert "    scaler.unscale_(optimizer)\n    torch.nn" in path.read_text(encoding="utf-8")


# -- the examples ----------------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _code(text: str) -> str:
    """A module without its docstring."""
    return text.split('"""\n', 1)[1]


def test_the_fix_turns_the_bad_example_into_the_clean_one() -> None:
    bad = (EXAMPLES / "clip_before_unscale.py").read_text(encoding="utf-8")
    clean = (EXAMPLES / "clip_after_unscale.py").read_text(encoding="utf-8")
    assert _code(fixed(bad)) == _code(clean)
    assert lint_source(clean, select=["AMP003"]) == []


def test_clipping_scaled_gradients_stalls_training_on_cpu(capsys) -> None:
    # The evidence for the rule, measured: same seed and data, the clip before unscale_ sees a
    # norm multiplied by the scale and leaves the loss ~100x higher after the same steps.
    pytest.importorskip("torch")
    bad = runpy.run_path(str(EXAMPLES / "clip_before_unscale.py"))["train"]()
    clean = runpy.run_path(str(EXAMPLES / "clip_after_unscale.py"))["train"]()
    assert bad > 10 * clean
    norms = [float(line.rsplit(" ", 1)[1]) for line in capsys.readouterr().out.splitlines()[::2]]
    assert norms[0] > 1000 * norms[1]
