"""The shared model of a training iteration (`linter.model.iterations._iteration`) on shapes it must
read."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.iterations._iteration import TrainingIterations, of_module
from linter.model.iterations._iteration_events import Kind
from linter.model.syntax._path_facts import Fact


def iterations(source: str) -> TrainingIterations:
    source = textwrap.dedent(source)
    return of_module(ModuleContext("t.py", source, cst.parse_module(source)))


def shape(model: TrainingIterations) -> list[list[tuple[str, str | None, str | None, bool]]]:
    return [
        [(e.kind.value, e.scaler, e.optimizer, e.via is not None) for e in it.events]
        for it in model.iterations
    ]


def test_accumulation_micro_loop_belongs_to_the_step_iteration() -> None:
    model = iterations(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for epoch in range(10):
            for step, batch in enumerate(loader):
                for micro in range(accum):
                    scaler.scale(model(batch) / accum).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
        """
    )
    assert shape(model) == [
        [
            ("scaled backward", "scaler", None, False),
            ("clip", None, None, False),
            ("scaler step", "scaler", "optimizer", False),
            ("update", "scaler", None, False),
            ("zero_grad", None, "optimizer", False),
        ]
    ]
    (iteration,) = model.iterations
    assert isinstance(iteration.scope, cst.For)
    assert cst.ensure_type(iteration.scope.target, cst.Tuple)


def test_a_loop_over_optimizers_is_not_an_iteration() -> None:
    model = iterations(
        """
        for batch in loader:
            scaler.scale(loss_fn(batch)).backward()
            for opt in optimizers:
                scaler.step(opt)
            scaler.update()
        """
    )
    assert [[e.kind for e in it.events] for it in model.iterations] == [
        [Kind.SCALED_BACKWARD, Kind.SCALER_STEP, Kind.UPDATE]
    ]


def test_methods_called_from_the_loop_bring_their_events_at_the_call() -> None:
    model = iterations(
        """
        from torch.nn.utils import clip_grad_norm_ as clip
        class Trainer:
            def backward(self, loss):
                self.scaler.scale(loss).backward()
            def optimizer_step(self):
                clip(self.model.parameters(), 1.0)
                self.scaler.step(self.optimizer)
                self.scaler.update()
            def fit(self):
                for batch in self.loader:
                    if self.scaler is not None:
                        self.backward(self.model(batch))
                    else:
                        self.model(batch).backward()
                    self.optimizer_step()
        """
    )
    step_method, loop = model.iterations
    assert isinstance(step_method.scope, cst.FunctionDef)
    assert [e.kind for e in step_method.events] == [Kind.CLIP, Kind.SCALER_STEP, Kind.UPDATE]
    assert isinstance(loop.scope, cst.For)
    kinds = [(e.kind, e.via is not None) for e in loop.events]
    assert kinds == [
        (Kind.SCALED_BACKWARD, True),
        (Kind.BACKWARD, False),
        (Kind.CLIP, True),
        (Kind.SCALER_STEP, True),
        (Kind.UPDATE, True),
    ]
    scaled, plain, clip, step, update = loop.events
    assert loop.exclusive(scaled, plain)
    assert loop.may_precede(scaled, clip)
    assert loop.may_precede(clip, step)
    assert loop.may_precede(step, update)
    assert not loop.may_precede(update, step)  # round the loop is the next iteration
    assert loop.between(scaled, step, Kind.CLIP) == [clip]
    assert model.iteration_of(plain.call) is loop
    assert model.holding(step.call) == [step_method, loop]


def test_recipe_wrappers_are_not_events() -> None:
    model = iterations(
        """
        for batch in loader:
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            model_engine.backward(loss)
            model_engine.step()
            self.manual_backward(loss)
            optimizer.step()
            lr_scheduler.step()
        """
    )
    assert shape(model) == [[("optimizer step", None, "optimizer", False)]]


def test_scaled_loss_bound_to_a_name_is_a_scaled_backward() -> None:
    model = iterations(
        """
        def train_step(batch):
            scaled = grad_scaler.scale(model(batch))
            scaled.backward()
            grad_scaler.unscale_(optimizer=opt_g)
            grad_scaler.step(opt_g)
            grad_scaler.update()
        """
    )
    assert shape(model) == [
        [
            ("scaled backward", "grad_scaler", None, False),
            ("unscale_", "grad_scaler", "opt_g", False),
            ("scaler step", "grad_scaler", "opt_g", False),
            ("update", "grad_scaler", None, False),
        ]
    ]


def test_optimizers_by_name_and_by_construction() -> None:
    model = iterations(
        """
        import torch
        from bitsandbytes import optim as bnb_optim
        net_optim = bnb_optim.AdamW8bit(model.parameters())
        options = make()
        for batch in loader:
            loss.backward()
            net_optim.step()
            d_optimizer.step()
            opt1.step()
            options.step()
            ema.step()
            self.lr_scheduler.step()
        """
    )
    assert [e.optimizer for e in model.events if e.kind is Kind.OPTIMIZER_STEP] == [
        "net_optim",
        "d_optimizer",
        "opt1",
    ]


def test_a_critic_loop_with_its_own_steps_is_its_own_iteration() -> None:
    model = iterations(
        """
        for batch in loader:
            for _ in range(n_critic):
                scaler.scale(d_loss).backward()
                scaler.step(opt_d)
                scaler.update()
            scaler.scale(g_loss).backward()
            scaler.step(opt_g)
            scaler.update()
        """
    )
    critic, outer = sorted(model.iterations, key=lambda it: len(it.events))
    assert [e.optimizer for e in critic.of(Kind.SCALER_STEP)] == ["opt_d"]
    assert [e.optimizer for e in outer.of(Kind.SCALER_STEP)] == ["opt_g"]
    assert len(outer.of(Kind.UPDATE)) == 1


def test_order_inside_an_iteration_does_not_wrap_round_its_own_loop() -> None:
    model = iterations(
        """
        for batch in loader:
            for micro in batch.split(4):
                scaler.scale(model(micro)).backward()
                clip_grad_norm_(model.parameters(), 1.0)
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
        """
    )
    (iteration,) = model.iterations
    backward, unscale, step, update = iteration.events
    assert backward.kind is Kind.SCALED_BACKWARD
    assert iteration.may_precede(backward, unscale)
    assert not iteration.may_precede(unscale, backward)
    assert not iteration.may_precede(update, step)


def test_a_call_inside_a_nested_iteration_brings_its_events_there_only() -> None:
    model = iterations(
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
    )
    by_scope = {
        type(it.scope).__name__ + ":" + getattr(getattr(it.scope, "name", None), "value", ""): [
            e.kind for e in it.events
        ]
        for it in model.iterations
    }
    assert by_scope == {
        "FunctionDef:train_step": [Kind.SCALED_BACKWARD, Kind.SCALER_STEP],
        "For:": [Kind.SCALED_BACKWARD, Kind.SCALER_STEP],
        "FunctionDef:train_epoch": [Kind.UPDATE],
    }


def test_a_scheduler_built_from_torch_optim_is_not_an_optimizer() -> None:
    model = iterations(
        """
        import torch
        optimizer = torch.optim.SGD(params, lr=0.1)
        lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
        swa = torch.optim.swa_utils.AveragedModel(model)
        for batch in loader:
            scaler.scale(model(batch)).backward()
            scaler.step(optimizer)
            scaler.update()
            lr_scheduler.step()
            swa.step()
        """
    )
    assert model.is_optimizer("optimizer")
    assert not model.is_optimizer("lr_scheduler")
    assert not model.is_optimizer("swa")
    assert Kind.OPTIMIZER_STEP not in {e.kind for e in model.events}


def test_a_typing_cast_around_the_scaled_loss_is_still_a_scaled_backward() -> None:
    model = iterations(
        """
        from typing import cast
        for batch in loader:
            cast(torch.Tensor, scaler.scale(loss_fn(batch))).backward()
            scaled = cast(torch.Tensor, scaler.scale(loss_fn(batch)))
            scaled.backward()
            scaler.step(optimizer)
            scaler.update()
        """
    )
    assert shape(model)[0][:2] == [
        ("scaled backward", "scaler", None, False),
        ("scaled backward", "scaler", None, False),
    ]


def test_conditions_of_an_event_a_call_brings_read_the_callers_arguments() -> None:
    model = iterations(
        """
        class Trainer:
            def backward(self, loss, grad_scaler):
                if grad_scaler is not None:
                    grad_scaler.scale(loss).backward()
                else:
                    loss.backward()
            def fit(self):
                for batch in self.loader:
                    if self.use_amp:
                        self.backward(self.model(batch), grad_scaler=self.scaler)
                    if self.scaler is not None:
                        self.scaler.step(self.optimizer)
                        self.scaler.update()
        """
    )
    (loop,) = [it for it in model.iterations if it.of(Kind.BACKWARD)]
    (plain,) = loop.of(Kind.BACKWARD)
    (step,) = loop.of(Kind.SCALER_STEP)
    facts = model.conditions(plain)
    assert Fact("self.scaler", "==", None) in facts  # the helper's test, on the argument
    assert Fact("self.use_amp", "is", True) in facts  # the call site's own condition
    assert not loop.exclusive(plain, step)  # the sites alone do not tell
    assert model.facts.contradict(facts, model.conditions(step))


def test_torch_2_6_split_clip_is_a_clip_event() -> None:
    model = iterations(
        """
        from torch.nn.utils import clip_grads_with_norm_, get_total_norm
        for batch in loader:
            scaler.scale(loss).backward()
            total = get_total_norm([p.grad for p in model.parameters()])
            clip_grads_with_norm_(model.parameters(), 1.0, total)
            scaler.step(optimizer)
        """
    )
    assert [e.kind for e in model.events] == [Kind.SCALED_BACKWARD, Kind.CLIP, Kind.SCALER_STEP]


def test_callee_is_the_function_whose_events_a_call_brings() -> None:
    model = iterations(
        """
        def clip(model):
            pass
        class Trainer:
            def unscale(self):
                pass
            def fit(self):
                clip(self.model)
                self.unscale()
                self.other.unscale()
                helpers.clip(self.model)
        """
    )
    calls = {cst.Module([]).code_for_node(call.func): call for call in _calls(model)}
    assert model.callee(calls["clip"]).name.value == "clip"
    assert model.callee(calls["self.unscale"]).name.value == "unscale"
    assert model.callee(calls["self.other.unscale"]) is None
    assert model.callee(calls["helpers.clip"]) is None


def _calls(model: TrainingIterations) -> list[cst.Call]:
    found: list[cst.Call] = []

    class Collect(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    model._index.module.visit(Collect())
    return found
