"""The shared model of a training iteration (`linter.rules._iteration`) on shapes it must read."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.rules._iteration import Kind, TrainingIterations, of_module


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
