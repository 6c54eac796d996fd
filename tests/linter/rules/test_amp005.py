"""AMP005 update-not-once-per-iteration: missing and repeated ``scaler.update()``."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest
from rule_runner import run_rule, run_rule_related

from linter.rules import UpdateNotOncePerIteration


def lines(source: str) -> list[int]:
    return [
        line for line, _col, _msg in run_rule(UpdateNotOncePerIteration, textwrap.dedent(source))
    ]


def test_update_after_the_step_loop_is_reported_at_the_step_with_the_update_related() -> None:
    source = textwrap.dedent(
        """\
        def train(model, loader, optimizer, scaler, epochs):
            for epoch in range(epochs):
                for x, y in loader:
                    scaler.scale(model(x, y)).backward()
                    scaler.step(optimizer)
                    optimizer.zero_grad()
                scaler.update()
        """
    )
    assert run_rule_related(UpdateNotOncePerIteration, source) == [
        (5, [(7, "the only update, outside the loop")])
    ]


def test_message_names_the_runtime_error() -> None:
    source = (
        "import torch\nscaler = torch.amp.GradScaler()\n"
        "for x in loader:\n    scaler.scale(f(x)).backward()\n    scaler.step(opt)\n"
    )
    ((_line, _col, message),) = run_rule(UpdateNotOncePerIteration, source)
    assert "step() has already been called since the last update()" in message


def test_step_inside_a_called_train_step_with_update_after_the_loop() -> None:
    assert lines(
        """
        class Trainer:
            def train_step(self, batch):
                self.scaler.scale(self.model(batch)).backward()
                self.scaler.step(self.optimizer)

            def train_epoch(self, loader):
                for batch in loader:
                    self.train_step(batch)
                self.scaler.update()
        """
    ) == [5]


def test_update_in_a_method_the_loop_calls_counts() -> None:
    assert (
        lines(
            """
            class Trainer:
                def after_step(self):
                    self.scaler.update()

                def fit(self, loader):
                    for batch in loader:
                        self.scaler.scale(self.model(batch)).backward()
                        self.scaler.step(self.optimizer)
                        self.after_step()
            """
        )
        == []
    )


def test_scaler_spelled_two_ways_is_one_scaler() -> None:
    assert (
        lines(
            """
            class Trainer:
                def fit(self, loader):
                    scaler = self.scaler
                    for batch in loader:
                        scaler.scale(self.model(batch)).backward()
                        scaler.step(self.optimizer)
                        self.scaler.update()
            """
        )
        == []
    )


@pytest.mark.parametrize(
    "body",
    [
        # Never updated here, but the scaler comes from elsewhere: maybe a wrapper that updates.
        "def train(loader, loss_scaler):\n"
        "    for x in loader:\n"
        "        loss_scaler.scale(f(x)).backward()\n"
        "        loss_scaler.step(opt)\n",
        # The step runs on the last micro-batch only: once per pass of the outer loop.
        "for batch in loader:\n"
        "    for micro in range(accum):\n"
        "        scaler.scale(f(batch, micro)).backward()\n"
        "        if micro == accum - 1:\n"
        "            scaler.step(opt)\n"
        "    scaler.update()\n",
        # A hook or step function whose caller is in another file.
        "def training_step(self, batch):\n"
        "    self.scaler.scale(self.loss(batch)).backward()\n"
        "    self.scaler.step(self.optimizer)\n",
        # A disabled scaler's step is a plain optimizer step.
        "scaler = torch.amp.GradScaler(enabled=False)\n"
        "for x in loader:\n"
        "    scaler.scale(f(x)).backward()\n"
        "    scaler.step(opt)\n",
        # The loop indexes optimizers by its target: one pass per optimizer.
        "for name in self.optimizer_names:\n"
        "    scaler.step(self.optimizers[name])\n"
        "scaler.update()\n",
        # The update is guarded in the method the loop over optimizers calls.
        "def step(self, optimizer, idx, n):\n"
        "    self.scaler.step(optimizer)\n"
        "    if idx + 1 == n:\n"
        "        self.scaler.update()\n"
        "def fit(self, batch):\n"
        "    for idx, optimizer in enumerate(self.optimizers):\n"
        "        self.step(optimizer, idx, len(self.optimizers))\n",
        # Only one optimizer of the loop steps (``continue`` skips the others).
        "for x in loader:\n"
        "    for i, opt in enumerate(optimizers):\n"
        "        if i != turn:\n"
        "            continue\n"
        "        scaler.step(opt)\n"
        "        scaler.update()\n",
        # Exclusive branches each update once.
        "for x in loader:\n"
        "    if phase == 'd':\n"
        "        scaler.step(opt_d)\n"
        "        scaler.update()\n"
        "    else:\n"
        "        scaler.step(opt_g)\n"
        "        scaler.update()\n",
        # Two updates with no step between would raise at once: not working code to judge.
        "for x in loader:\n    scaler.step(opt)\n    scaler.update()\n    scaler.update()\n",
    ],
    ids=[
        "scaler-from-elsewhere",
        "step-on-last-micro-batch",
        "hook",
        "disabled",
        "indexed-optimizers",
        "guarded-in-callee",
        "continue-skips",
        "exclusive",
        "no-step-between",
    ],
)
def test_not_reported(body: str) -> None:
    assert lines("import torch\n" + body) == []


def test_second_update_through_a_helper_is_reported_at_the_second_call() -> None:
    source = textwrap.dedent(
        """\
        def opt_step(opt):
            scaler.step(opt)
            scaler.update()

        for real in loader:
            scaler.scale(d_loss(real)).backward()
            opt_step(opt_d)
            scaler.scale(g_loss(real)).backward()
            opt_step(opt_g)
        """
    )
    assert run_rule_related(UpdateNotOncePerIteration, source) == [
        (9, [(7, "first update in the same iteration")])
    ]


def test_update_in_a_while_loop_over_optimizers_by_index() -> None:
    assert lines(
        """
        for x in loader:
            scaler.scale(loss_fn(x)).backward()
            for i in range(len(optimizers)):
                scaler.step(optimizers[i])
                scaler.update()
        """
    ) == [6]


def test_one_report_per_update_even_when_several_iterations_hold_it() -> None:
    found = lines(
        """
        def train_step(batch):
            scaler.scale(d_loss(batch)).backward()
            scaler.step(opt_d)
            scaler.update()
            scaler.scale(g_loss(batch)).backward()
            scaler.step(opt_g)
            scaler.update()

        for batch in loader:
            train_step(batch)
        """
    )
    assert found == [8]


def test_files_without_a_scaler_step_or_update_are_not_parsed() -> None:
    assert not UpdateNotOncePerIteration.wants("optimizer.step()\nscheduler.step()\n")
    assert UpdateNotOncePerIteration.wants("self.grad_scaler.step(opt)\n")
    assert UpdateNotOncePerIteration.wants("gs = GradScaler()\ngs.step(opt)\n")


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _run_example(name: str) -> None:
    torch = pytest.importorskip("torch")
    example = runpy.run_path(str(EXAMPLES / name))
    torch.manual_seed(0)
    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
    example["train"](torch.nn.Linear(4, 1), batches)


def test_the_reported_example_really_fails_in_torch_at_the_second_step() -> None:
    # The evidence behind the message: torch's GradScaler.step() raises once the optimizer was
    # stepped since the last update() (torch/amp/grad_scaler.py, OptState.STEPPED).
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called"):
        _run_example("scaler_update_per_epoch.py")


def test_the_fixed_example_trains() -> None:
    _run_example("scaler_update_per_step.py")
    assert lines((EXAMPLES / "scaler_update_per_step.py").read_text(encoding="utf-8")) == []


def test_an_accumulation_guard_in_the_inner_loop_still_steps_many_times() -> None:
    assert lines(
        """
        import torch
        scaler = torch.amp.GradScaler()
        for epoch in range(epochs):
            for i, batch in enumerate(loader):
                scaler.scale(f(batch)).backward()
                if (i + 1) % accum == 0:
                    scaler.step(opt)
            scaler.update()
        """
    ) == [8]


def test_a_scaler_made_afresh_for_each_element_is_updated_once_per_scaler() -> None:
    # One scaler per configuration case (a test sweep): each is stepped and updated once.
    source = """
import torch

for case in cases:
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale(case.loss()).backward()
    scaler.step(case.optimizer)
    scaler.update()
"""
    assert lines(source) == []
    shared = source.replace('    scaler = torch.amp.GradScaler("cpu")\n', "")
    shared = shared.replace(
        "import torch\n", 'import torch\nscaler = torch.amp.GradScaler("cpu")\n'
    )
    assert lines(shared) == [8]


# -- issue 20: a function called once per epoch is not an iteration; dict entries as steps ----


@pytest.mark.parametrize(
    ("helper", "entries"),
    [
        ("scan_pessimistic_batches_for_oom", "batches.items()"),
        ("probe_memory", "probe_batches.values()"),
    ],
)
def test_an_epoch_loop_calling_a_training_function_is_no_loop_over_optimizers(
    helper: str, entries: str
) -> None:
    source = f"""
        import torch

        def {helper}(model, loader, optimizer):
            probe_batches = batches = {{"long": next(iter(loader))}}
            for entry in {entries}:
                model(entry).backward()
                optimizer.step()
                optimizer.zero_grad()

        def train_one_epoch(model, loader, optimizer, scaler):
            for batch in loader:
                scaler.scale(model(batch)).backward()
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()

        def run(model, loader, optimizer, epochs):
            scaler = torch.amp.GradScaler("cuda")
            {helper}(model, loader, optimizer)
            for epoch in range(epochs):
                train_one_epoch(model, loader, optimizer, scaler)
        """
    assert lines(source) == []


def test_a_dict_of_optimizers_is_still_a_loop_over_optimizers() -> None:
    source = """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for batch in loader:
            scaler.scale(model(batch)).backward()
            for name, opt in optimizers.items():
                scaler.step(opt)
                scaler.update()
        """
    assert lines(source) == [8]


_ALTERNATING_GAN = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for i, batch in enumerate(loader):
    if i % 2 == 1 and i >= disc_start:
{set_dis}
    else:
{set_gen}
    if step_gen:
        scaler.scale(gen_loss(batch)).backward()
        scaler.step(opt_g)
        scaler.update()
    if step_dis:
        scaler.scale(disc_loss(batch)).backward()
        scaler.step(opt_d)
        scaler.update()
"""


@pytest.mark.parametrize(
    ("set_dis", "set_gen", "expected"),
    [
        (
            "        step_gen = False\n        step_dis = True",
            "        step_gen = True\n        step_dis = False",
            [],
        ),
        (
            "        step_gen, step_dis = False, True",
            "        step_gen, step_dis = True, False",
            [],
        ),
        # The generator's arm leaves `step_dis` as an earlier pass set it: both may run.
        ("        step_gen = False\n        step_dis = True", "        step_gen = True", [17]),
    ],
    ids=["statements", "tuples", "not-cleared"],
)
def test_a_gan_alternating_its_networks_updates_once_per_iteration(
    set_dis: str, set_gen: str, expected: list[int]
) -> None:
    # Open-Sora-Plan's train_causalvae.py: one `if`/`else` sets `step_gen`/`step_dis`, then
    # each network's block scales, steps and updates; no pass runs both.
    assert lines(_ALTERNATING_GAN.format(set_dis=set_dis, set_gen=set_gen)) == expected
