"""AMP001 get-scale-every-step: receivers, per-step contexts, guards, messages."""

from __future__ import annotations

import textwrap

import pytest
from rule_runner import run_rule

from linter.rules import GetScaleEveryStep


def lines(source: str) -> list[int]:
    return [line for line, _col, _msg in run_rule(GetScaleEveryStep, textwrap.dedent(source))]


def messages(source: str) -> list[str]:
    return [msg for _line, _col, msg in run_rule(GetScaleEveryStep, textwrap.dedent(source))]


LOOP_READ = """\
{setup}
for batch in loader:
    scaler.scale(model(batch)).backward()
    scaler.step(optimizer)
    scaler.update()
    log({read})
"""


@pytest.mark.parametrize(
    ("setup", "read"),
    [
        ("import torch\nscaler = torch.amp.GradScaler('cuda')", "scaler._scale.item()"),
        ("import torch.cuda.amp as A\nscaler = A.GradScaler()", "float(scaler._scale)"),
        ("from torch import amp\nscaler = amp.GradScaler('cuda')", 'scaler.state_dict()["scale"]'),
        ("from torch.cpu.amp import GradScaler as G\nscaler = G()", "scaler._scale.tolist()"),
        ("from scaler import GradScaler\nscaler = GradScaler()", "scaler._scale.item()"),
    ],
    ids=["torch.amp", "module-alias", "from-import", "class-alias", "ampscale"],
)
def test_scaler_constructed_under_any_alias_is_recognised(setup: str, read: str) -> None:
    assert lines(LOOP_READ.format(setup=setup, read=read)) == [setup.count("\n") + 6]


def test_private_spellings_need_a_proven_scaler() -> None:
    # A variable merely named `scaler` (from an unknown factory) is enough for get_scale()...
    setup = "scaler = make_scaler(cfg)"
    assert lines(LOOP_READ.format(setup=setup, read="scaler.get_scale()")) == [6]
    # ...but not for the generic `_scale` / state_dict spellings.
    assert lines(LOOP_READ.format(setup=setup, read="scaler._scale.item()")) == []
    assert lines(LOOP_READ.format(setup=setup, read='scaler.state_dict()["scale"]')) == []


def test_get_scale_with_arguments_is_a_look_alike() -> None:
    setup = "import torch\nscaler = torch.amp.GradScaler('cuda')"
    assert lines(LOOP_READ.format(setup=setup, read="scaler.get_scale(0)")) == []


def test_get_scale_with_arguments_is_a_look_alike_in_a_file_that_also_reads_the_scale() -> None:
    # A real read elsewhere lets the file past the text pre-check, so the call itself is judged.
    setup = "import torch\nscaler = torch.amp.GradScaler('cuda')\nprint(scaler.get_scale())"
    assert lines(LOOP_READ.format(setup=setup, read="scaler.get_scale(0)")) == []


def test_scaler_named_variable_holding_another_class_is_not_a_scaler() -> None:
    setup = "from sklearn.preprocessing import StandardScaler\nscaler = StandardScaler()"
    assert lines(LOOP_READ.format(setup=setup, read="scaler.get_scale()")) == []


def test_explicitly_disabled_scaler_does_not_sync() -> None:
    setup = "import torch\nscaler = torch.amp.GradScaler('cuda', enabled=False)"
    assert lines(LOOP_READ.format(setup=setup, read="scaler.get_scale()")) == []


def test_wrapper_owned_scalers_are_recognised() -> None:
    source = """\
    for batch in loader:
        a = accelerator.scaler._scale.item()
        b = trainer.precision_plugin.scaler.state_dict()["scale"]
    """
    assert lines(source) == [2, 3]


def test_annotated_parameter_is_a_scaler() -> None:
    source = """\
    from typing import Optional
    from torch.amp import GradScaler

    def log_scale(s: Optional[GradScaler], step):
        print(step, s._scale.item())

    def train(loader, s: "GradScaler | None"):
        for step, batch in enumerate(loader):
            log_scale(s, step)
    """
    assert lines(source) == [5]


GUARDED = """\
import torch
scaler = torch.amp.GradScaler("cuda")
for i, batch in enumerate(loader):
    scaler.step(optimizer)
    if {test}:
        print(scaler.get_scale())
"""


@pytest.mark.parametrize(
    "test",
    [
        "i % log_every == 0",
        "global_step % cfg.log_interval == 0",
        "optimizer_steps % log_every == 0",
        "it % 100 == 0",
        "not i % 10",
        "state.global_step % args.logging_steps == 0",
        "self.control.should_log",
        "should_save and rank == 0",
        "i == 0",
    ],
)
def test_periodic_or_one_off_guard_is_not_per_step(test: str) -> None:
    assert lines(GUARDED.format(test=test)) == []


@pytest.mark.parametrize(
    "test",
    [
        "(i + 1) % accum_steps == 0",
        "(i + 1) % args.gradient_accumulation_steps == 0",
        "i % update_freq == 0",
        "accelerator.sync_gradients",
        "args.amp",
        "scaler is not None",
        "rank == 0",
        "i % log_every != 0",
    ],
)
def test_accumulation_config_and_inverted_guards_stay_per_step(test: str) -> None:
    assert lines(GUARDED.format(test=test)) == [6]


def test_else_branch_of_inverted_periodic_guard_is_periodic() -> None:
    source = (
        GUARDED.format(test="i % log_every != 0") + "    else:\n        print(scaler.get_scale())\n"
    )
    assert lines(source) == [6]


@pytest.mark.parametrize(
    "exit_guard",
    [
        "if i % log_every != 0:\n        continue",
        "if not should_log(i): continue",
        "if i % log_every != 0:\n        break",
        "if not should_log(i):\n        raise StopTraining(i)",
    ],
)
def test_early_exit_on_off_steps_guards_the_rest_of_the_block(exit_guard: str) -> None:
    source = f"""\
import torch
scaler = torch.amp.GradScaler("cuda")
for i, batch in enumerate(loader):
    scaler.step(optimizer)
    {exit_guard}
    print(scaler.get_scale())
"""
    assert lines(source) == []


def test_reads_before_and_after_the_loop_and_per_epoch_are_not_per_step() -> None:
    source = """\
    import torch
    scaler = torch.amp.GradScaler("cuda")
    print(scaler.get_scale())
    for epoch in range(num_epochs):
        for batch in loader:
            scaler.step(optimizer)
        print(epoch, scaler.get_scale())
    print(scaler.get_scale())
    """
    assert lines(source) == []


def test_transitive_calls_from_a_loop_are_followed() -> None:
    source = """\
    import torch
    scaler = torch.amp.GradScaler("cuda")

    def leaf():
        return scaler.get_scale()

    def middle():
        return leaf()

    def top():
        return middle()

    for batch in loader:
        top()
    """
    found = messages(source)
    assert len(found) == 1
    assert (
        "in `leaf()`, called in `middle()`, called in `top()`, called inside the loop" in (found[0])
    )


def test_call_depth_is_limited() -> None:
    chain = "\n".join(f"def f{n}():\n    return f{n + 1}()\n" for n in range(6))
    source = f"""\
import torch
scaler = torch.amp.GradScaler("cuda")
{chain}
def f6():
    return scaler.get_scale()

for batch in loader:
    f0()
"""
    assert lines(source) == []


def test_recursive_functions_terminate() -> None:
    source = """\
    import torch
    scaler = torch.amp.GradScaler("cuda")

    def ping(n):
        print(scaler.get_scale())
        return pong(n - 1) if n else 0

    def pong(n):
        return ping(n)

    def unused(n):
        return unused(n) + scaler.get_scale()
    """
    assert lines(source) == []


def test_self_method_called_from_a_loop_is_per_step() -> None:
    source = """\
    import torch

    class Runner:
        def __init__(self):
            self.loss_scaler = torch.cuda.amp.GradScaler()

        def log(self):
            return self.loss_scaler.get_scale()

        def train(self, loader):
            for batch in loader:
                self.log()
    """
    assert lines(source) == [8]


def test_generic_method_name_on_another_object_is_not_followed() -> None:
    source = """\
    import torch

    class Monitor:
        def __init__(self):
            self.scaler = torch.amp.GradScaler("cuda")

        def update(self):
            return self.scaler.get_scale()

    for batch in loader:
        ema.update()
    """
    assert lines(source) == []


def test_optimizer_subclass_step_is_per_step() -> None:
    source = """\
    import torch

    class ScaledAdam(torch.optim.Optimizer):
        def step(self, closure=None):
            self.last_scale = self.grad_scaler.get_scale()
    """
    assert lines(source) == [5]


def test_plain_class_step_without_a_scaler_step_is_not_a_hook() -> None:
    source = """\
    class Scheduler:
        def step(self):
            print(self.scaler.get_scale())
    """
    assert lines(source) == []


@pytest.mark.parametrize(
    ("hook", "expected"),
    [
        ("training_step", [3]),
        ("on_before_optimizer_step", [3]),
        ("on_step_end", [3]),
        ("on_log", []),
        ("on_train_epoch_end", []),
        ("on_fit_start", []),
    ],
)
def test_framework_hooks(hook: str, expected: list[int]) -> None:
    source = f"""\
class Callback(Base):
    def {hook}(self, *args, **kwargs):
        print(self.scaler.get_scale())
"""
    assert lines(source) == expected


def test_skipped_step_pattern_gets_its_own_message() -> None:
    source = """\
    import torch
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        before = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        skipped = scaler.get_scale() < before
    """
    found = run_rule(GetScaleEveryStep, textwrap.dedent(source))
    assert [line for line, _col, msg in found if "to detect a skipped step" in msg] == [4, 7]
    # torch's scaler has no step_skipped(): the advice is to switch to ampscale's.
    assert all("(`from scaler import GradScaler`)" in msg for _line, _col, msg in found)
    ampscale = source.replace("import torch", "from scaler import GradScaler").replace(
        'torch.amp.GradScaler("cuda")', "GradScaler()"
    )
    found = run_rule(GetScaleEveryStep, textwrap.dedent(ampscale))
    assert [line for line, *_ in found] == [4, 7]
    assert all("use `scaler.step_skipped(optimizer)`" in msg for _line, _col, msg in found)


def test_reads_around_update_that_are_not_compared_only_log_the_scale() -> None:
    source = """    import torch
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        before = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        log(before=before, after=scaler.get_scale())
    """
    found = run_rule(GetScaleEveryStep, textwrap.dedent(source))
    assert [line for line, *_ in found] == [4, 7]
    assert all("to log/check it" in msg and "skipped" not in msg for *_, msg in found)


def test_message_names_the_loop_line_and_the_call() -> None:
    source = """\
    import torch
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        print(scaler.get_scale())
    """
    (message,) = messages(source)
    assert message.startswith("`scaler.get_scale()` copies the loss scale to the host")
    assert "inside the loop at line 3" in message
    assert message.endswith(
        "or switch to ampscale's GradScaler (`from scaler import GradScaler`), whose "
        "`peek_scale()` never waits"
    )
    ampscale = source.replace('torch.amp.GradScaler("cuda")', "GradScaler()").replace(
        "import torch", "from scaler import GradScaler"
    )
    (message,) = messages(ampscale)
    assert message.endswith("or use the non-blocking `scaler.peek_scale()`")


def test_read_in_a_lambda_or_nested_definition_is_judged_by_its_call() -> None:
    source = """\
    import torch
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        callbacks.append(lambda: scaler.get_scale())

        def later():
            return scaler.get_scale()
    """
    assert lines(source) == []


def test_loop_over_a_collection_is_not_a_step_loop() -> None:
    source = """\
    import torch
    scaler = torch.amp.GradScaler("cuda")

    def summary(scalers):
        for name, s in scalers.items():
            print(name, s.get_scale())
        for group in optimizer.param_groups:
            group["last_scale"] = scaler.get_scale()

    for batch in loader:
        scaler.step(optimizer)
        for group in optimizer.param_groups:
            group["last_scale"] = scaler.get_scale()
    """
    assert lines(source) == [13]


def test_read_beside_the_loop_that_steps_the_scaler_is_not_per_step() -> None:
    source = """\
    import torch
    scaler = torch.amp.GradScaler("cuda")

    def train(fold):
        for batch in loaders[fold]:
            scaler.step(optimizer)
            scaler.update()
        return scaler.get_scale()

    for fold in range(5):
        print(train(fold))

    for run in runs:
        for batch in loader:
            scaler.step(optimizer)
            scaler.update()
        print(run, scaler.get_scale())
    """
    assert lines(source) == []


def test_wall_clock_guard_is_periodic() -> None:
    source = GUARDED.format(test="time.time() - last_log > 30")
    assert lines(source) == []


def test_self_call_from_a_base_class_loop_reaches_the_subclass_method() -> None:
    source = """\
    import torch

    class TrainerBase:
        def train(self, iters):
            for self.iter in range(iters):
                self.one_iteration()

    class AMPTrainer(TrainerBase):
        def __init__(self):
            self.grad_scaler = torch.cuda.amp.GradScaler()

        def one_iteration(self):
            self.grad_scaler.step(self.optimizer)
            if self.log_grad_scaler:
                self.storage.put_scalar("grad_scaler", self.grad_scaler.get_scale())
    """
    assert lines(source) == [15]


def test_detectron2_style_hooks_are_per_step() -> None:
    source = """\
    class ScaleHook(HookBase):
        def after_step(self):
            self.trainer.storage.put_scalar("scale", self.trainer.grad_scaler.get_scale())

        def after_train(self):
            print(self.trainer.grad_scaler.get_scale())
    """
    assert lines(source) == [3]


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("for epoch in range(start_epoch, args.epochs):", []),
        ("while epoch < max_epochs:", []),
        ("for i in range(steps_per_epoch):", [3]),
        ("for it in range(cfg.iters_per_epoch):", [3]),
    ],
)
def test_epoch_loops_are_told_from_step_loops_by_their_names(
    header: str, expected: list[int]
) -> None:
    source = f"""\
{header}
    scaler.step(optimizer)
    print(scaler.get_scale())
"""
    assert lines(source) == expected


def test_private_tensor_read_is_matched_only_as_the_trigger_spells_it() -> None:
    setup = "import torch\nscaler = torch.amp.GradScaler('cuda')"
    assert lines(LOOP_READ.format(setup=setup, read="scaler._scale.item()")) == [7]
    # The engine skips files without `._scale`; the rule must not claim what it never sees.
    assert lines(LOOP_READ.format(setup=setup, read="(scaler .  _scale).item()")) == []


def test_a_loop_over_scalers_is_not_a_step_loop() -> None:
    source = """\
    import torch
    scalers = [torch.amp.GradScaler("cuda"), torch.amp.GradScaler("cuda")]
    for epoch in range(num_epochs):
        run_epoch(scalers)
        for scaler in scalers:
            print(scaler.get_scale())
    """
    assert lines(source) == []
    assert lines(source.replace("for scaler in scalers:", "for scaler in loader:")) == [6]


HOOK_WITH_EARLY_RETURN = """\
from transformers import TrainerCallback


class ScaleLogger(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if {test}:
            return
        print(self.scaler.get_scale())
"""


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ("not state.is_world_process_zero or not control.should_log", []),
        ("not (state.is_world_process_zero and control.should_log)", []),
        ("not state.is_world_process_zero", [8]),
        ("state.is_world_process_zero and not control.should_log", [8]),
    ],
)
def test_early_return_when_the_framework_is_not_logging(test: str, expected: list[int]) -> None:
    assert lines(HOOK_WITH_EARLY_RETURN.format(test=test)) == expected


def test_calls_on_another_object_are_not_calls_of_the_method_of_this_class() -> None:
    source = """\
    class Task:
        def train_step(self, batch):
            return batch


    class Trainer:
        def train_step(self, batch):
            print(self.scaler.get_scale())

        def fit(self, loader):
            for batch in loader:
                self.task.train_step(batch)
    """
    assert lines(source) == []
    assert lines(source.replace("self.task.train_step", "self.train_step")) == [8]
    # ...unless this module shows the attribute holds an instance of the class.
    bound = source.replace(
        "def fit(self, loader):", "def fit(self, loader):\n            self.task = Trainer()"
    )
    assert lines(bound) == [8]


# -- issue 20: an early return on a predicate method gates the rest of a per-step hook --------

_PREDICATE_HOOK = """
from transformers import TrainerCallback


class Logger({base}):
    def __init__(self, scaler):
        self.scaler = scaler
{predicate}
    def on_step_end(self, args, state, control, **kwargs):
        if not self.{method}(state):
            return
        print(self.scaler.get_scale())
"""


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("should_update_logs", "return state.global_step % 100 == 0"),
        ("time_for_a_report", "return state.global_step % self.every == 0"),
        ("first_step", "return state.global_step == 0"),
    ],
)
def test_a_periodic_predicate_defined_here_gates_the_read(method: str, body: str) -> None:
    predicate = f"\n    def {method}(self, state):\n        {body}\n"
    source = _PREDICATE_HOOK.format(base="TrainerCallback", predicate=predicate, method=method)
    assert lines(source) == []


def test_an_inherited_predicate_is_a_gate_of_unknown_period() -> None:
    source = _PREDICATE_HOOK.format(base="ReportingCallback", predicate="", method="due")
    assert lines(source) == []


def test_a_configuration_predicate_defined_here_gates_nothing() -> None:
    predicate = "\n    def active(self, state):\n        return self.scaler.is_enabled()\n"
    source = _PREDICATE_HOOK.format(base="TrainerCallback", predicate=predicate, method="active")
    assert lines(source) == [15]


CACHED_HOOK = """\
import torch
from transformers import TrainerCallback

amp = torch.amp.GradScaler("cuda")


class Drift(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        {guard}
            {store} = amp.get_scale()
        {after}
"""


@pytest.mark.parametrize(
    ("guard", "store"),
    [
        ("if self.q is None:", "self.q"),
        ('if not hasattr(self, "zz"):', "self.zz"),
        ('if getattr(state, "seen", None) is None:', "state.seen"),
    ],
)
def test_a_read_cached_on_the_first_call_is_not_per_step_whatever_the_names(
    guard: str, store: str
) -> None:
    assert lines(CACHED_HOOK.format(guard=guard, store=store, after="pass")) == []


def test_a_cache_emptied_again_every_step_reads_every_step() -> None:
    source = CACHED_HOOK.format(guard="if self.q is None:", store="self.q", after="self.q = None")
    assert lines(source) == [10]


def test_a_read_inside_a_cached_function_called_every_step_is_not_per_step() -> None:
    source = """\
        from functools import cache as remember

        import torch

        amp = torch.amp.GradScaler("cuda")


        @remember
        def starting_scale():
            return amp.get_scale()


        def current_scale():
            return amp.get_scale()


        for batch in loader:
            amp.scale(model(batch)).backward()
            amp.step(optimizer)
            amp.update()
            print(starting_scale(), current_scale())
        """
    assert lines(source) == [14]


def test_a_first_pass_flag_of_the_loop_runs_the_read_once() -> None:
    source = """\
        import torch

        amp = torch.amp.GradScaler("cuda")
        reported = False
        for batch in loader:
            amp.scale(model(batch)).backward()
            amp.step(optimizer)
            amp.update()
            if not reported:
                print("first scale", amp.get_scale())
                reported = True
            if not verbose:
                print(amp.get_scale())
        """
    assert lines(source) == [13]
