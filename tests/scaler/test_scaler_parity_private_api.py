"""torch's private GradScaler API as third-party code uses it, on torch's scaler and ours.

Training frameworks and user code reach past the public methods: they read and write
``scaler._scale`` and ``scaler._growth_tracker`` (clamping the scale, MMEngine copying one
scaler's scale into another), all-reduce the flags in ``scaler._found_inf_per_device(opt)`` or
``scaler._per_optimizer_states[id(opt)]["found_inf_per_device"]`` before ``step`` (nanochat,
Lightning's old sharded scaler), and subclass the scaler overriding ``_maybe_opt_step`` (XLA-style
scalers) or ``update`` built on ``_check_scale_growth_tracker`` (torch's ShardedGradScaler).
"""

from __future__ import annotations

import pytest
import torch
from parity_harness import (
    TorchScaler,
    assert_same,
    assert_same_outcome,
    backward,
    linear,
    sgd,
    torch_keys,
)
from scaler_harness import count_syncs
from torch.amp.grad_scaler import OptState

from scaler import GradScaler


def _train(scaler, model, optimizer, steps: range, overflow_at=(), between=None):
    """Plain loop; ``between(scaler, step)`` runs after each update, as user code would."""
    trajectory = []
    for step in steps:
        optimizer.zero_grad()
        backward(scaler, model, step)
        if step in overflow_at:
            model.weight.grad[0, 1] = float("inf")
        scaler.step(optimizer)
        scaler.update()
        if between is not None:
            between(scaler, step)
        trajectory.append((scaler.get_scale(), scaler._get_growth_tracker()))
    return trajectory


# ----------------------------------------------------------------- reading torch's attributes


def test_private_attributes_read_like_torchs_through_an_iteration() -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = sgd(model)
        scaler = scaler_class("cpu", 2.0**7, 3.0, 0.25, 2)
        seen = []

        def snapshot(label):
            states = scaler._per_optimizer_states
            mine = states.get(id(optimizer))
            seen.append(
                (
                    label,
                    None if scaler._scale is None else scaler._scale.clone(),
                    None if scaler._growth_tracker is None else scaler._growth_tracker.clone(),
                    scaler._get_growth_tracker(),
                    len(states),
                    None if mine is None else mine["stage"],
                    None if mine is None else dict(mine["found_inf_per_device"]),
                )
            )

        snapshot("fresh")
        for step in range(4):
            optimizer.zero_grad()
            backward(scaler, model, step)
            snapshot("scaled")
            if step == 2:
                model.bias.grad[0] = float("nan")
            scaler.unscale_(optimizer)
            snapshot("unscaled")
            scaler.step(optimizer)
            snapshot("stepped")
            scaler.update()
            snapshot("updated")
        return (
            seen,
            scaler._get_scale_async(),
            scaler._init_scale,
            scaler._init_growth_tracker,
            scaler._enabled,
            scaler._device,
            (scaler._growth_factor, scaler._backoff_factor, scaler._growth_interval),
        )

    seen = assert_same_outcome(scenario)[0]
    assert [entry[5] for entry in seen[1:5]] == [
        None,
        OptState.UNSCALED,
        OptState.STEPPED,
        None,
    ]


def test_found_inf_per_device_before_and_after_step() -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = sgd(model)
        scaler = scaler_class("cpu")
        backward(scaler, model)
        model.weight.grad[1, 1] = float("inf")
        before = dict(scaler._found_inf_per_device(optimizer))
        scaler.unscale_(optimizer)
        after_unscale = dict(scaler._found_inf_per_device(optimizer))
        scaler.step(optimizer)
        after_step = dict(scaler._found_inf_per_device(optimizer))
        stored = scaler._per_optimizer_states[id(optimizer)]["found_inf_per_device"]
        scaler.update()
        return before, after_unscale, after_step, dict(stored)

    assert_same_outcome(scenario)


def test_check_inf_per_device_records_without_unscaling() -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
        scaler = scaler_class("cpu")
        backward(scaler, model)
        grad = model.weight.grad.clone()
        found = scaler._check_inf_per_device(optimizer)
        stage = scaler._per_optimizer_states[id(optimizer)]["stage"]
        scaler.step(optimizer)
        scaler.update()
        return dict(found), torch.equal(grad, model.weight.grad), stage, model.weight

    assert_same_outcome(scenario)


@pytest.mark.parametrize("allow_fp16", [False, True])
def test_unscale_grads_called_directly(allow_fp16: bool) -> None:
    def scenario(scaler_class):
        first, second = linear(0), linear(1, dtype=torch.float16)
        optimizer = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=0.1)
        scaler = scaler_class("cpu")
        loss = first(torch.ones(2, 3)).sum() + second(torch.ones(2, 3).half()).float().sum()
        scaler.scale(loss).backward()
        second.bias.grad[0] = float("nan")
        found = scaler._unscale_grads_(optimizer, torch.tensor(0.25), torch.zeros(()), allow_fp16)
        return dict(found), [p.grad for p in optimizer.param_groups[0]["params"]]

    assert_same_outcome(scenario)


def test_check_scale_growth_tracker_and_lazy_init() -> None:
    def before(scaler_class):
        scaler_class("cpu")._check_scale_growth_tracker("unscale_")

    def after(scaler_class):
        scaler = scaler_class("cpu", 2.0**3)
        scaler._lazy_init_scale_growth_tracker(torch.device("cpu"))
        scale, tracker = scaler._check_scale_growth_tracker("update")
        return scale, tracker, scaler.get_scale(), scaler.scale(torch.ones(2))

    def twice(scaler_class):
        scaler = scaler_class("cpu")
        scaler.scale(torch.ones(1))
        scaler._lazy_init_scale_growth_tracker(torch.device("cpu"))

    assert_same_outcome(before)
    assert_same_outcome(after)
    assert_same_outcome(twice)


def test_maybe_opt_step_called_directly() -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = sgd(model)
        scaler = scaler_class("cpu")
        results = []
        for poison in (False, True):
            optimizer.zero_grad()
            backward(scaler, model)
            if poison:
                model.weight.grad[0, 0] = float("nan")
            scaler.unscale_(optimizer)
            state = scaler._per_optimizer_states[id(optimizer)]
            results.append(scaler._maybe_opt_step(optimizer, state))
            results.append(model.weight.clone())
            state["stage"] = OptState.STEPPED
            scaler.update()
        return results, scaler.get_scale()

    assert_same_outcome(scenario)


# ----------------------------------------------------------------- flags changed before step()


def test_flags_all_reduced_in_place_after_unscale_decide_the_step() -> None:
    """nanochat's pattern: ``for v in scaler._found_inf_per_device(opt).values():
    dist.all_reduce(v, op=MAX)`` between ``unscale_`` and ``step``; here another rank's inf."""

    def scenario(scaler_class):
        model = linear()
        optimizer = sgd(model, momentum=0.9)

        scaler = scaler_class("cpu", growth_interval=2)
        trajectory = []
        for step in range(5):
            optimizer.zero_grad()
            backward(scaler, model, step)
            scaler.unscale_(optimizer)
            if step in (1, 2):
                for flag in scaler._found_inf_per_device(optimizer).values():
                    flag.fill_(1.0)
            trajectory.append(scaler.step(optimizer))
            scaler.update()
            trajectory.append((scaler.get_scale(), scaler._get_growth_tracker()))
        return trajectory, model.weight

    assert_same_outcome(scenario)


@pytest.mark.parametrize("fused", [False, True])
def test_subclass_reducing_per_optimizer_flags_before_step(fused: bool) -> None:
    """Lightning's old ShardedGradScaler: ``step`` all-reduces
    ``_per_optimizer_states[id(opt)]["found_inf_per_device"]`` then calls ``super().step``."""

    def scenario(scaler_class):
        class Reducing(scaler_class):
            def step(self, optimizer, *args, **kwargs):
                for flag in self._per_optimizer_states[id(optimizer)][
                    "found_inf_per_device"
                ].values():
                    flag.fill_(1.0)  # the other rank's inf
                return super().step(optimizer, *args, **kwargs)

        model = linear()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=fused)
        scaler = Reducing("cpu")
        backward(scaler, model)
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
        return model.weight, scaler.get_scale()

    assert_same_outcome(scenario)


# ----------------------------------------------------------------- subclasses written for torch


def test_subclass_overriding_maybe_opt_step_is_used() -> None:
    """XLA-style scalers override ``_maybe_opt_step`` to step unconditionally with the flag."""

    def scenario(scaler_class):
        class StepsWithFlag(scaler_class):
            def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
                flags = tuple(optimizer_state["found_inf_per_device"].values())
                found_inf = torch.stack(flags).sum()
                calls.append(found_inf.clone())
                return ("stepped with", found_inf.clone(), args, kwargs)

        calls = []
        model = linear()
        optimizer = sgd(model)
        scaler = StepsWithFlag("cpu")
        returned = []
        for step in range(3):
            optimizer.zero_grad()
            backward(scaler, model, step)
            if step == 1:
                model.weight.grad[0, 0] = float("inf")
            returned.append(scaler.step(optimizer, 3, key="value"))
            scaler.update()
        return returned, calls, scaler.get_scale(), torch_keys(scaler.state_dict())

    assert_same_outcome(scenario)


def test_subclass_with_its_own_update_on_the_scale_tensors() -> None:
    """torch's ShardedGradScaler pattern: ``update`` takes ``_check_scale_growth_tracker``'s
    tensors and runs ``torch._amp_update_scale_`` on them, in place."""

    def scenario(scaler_class):
        class OwnUpdate(scaler_class):
            def update(self, new_scale=None):
                scale, tracker = self._check_scale_growth_tracker("update")
                flags = [
                    flag
                    for state in self._per_optimizer_states.values()
                    for flag in state["found_inf_per_device"].values()
                ]
                torch._amp_update_scale_(scale, tracker, sum(flags), 3.0, 0.25, 2)
                self._per_optimizer_states.clear()

        model = linear()
        optimizer = sgd(model)
        scaler = OwnUpdate("cpu", 2.0**4)
        trajectory = _train(scaler, model, optimizer, range(7), overflow_at={2, 3})
        return trajectory, model.weight, torch_keys(scaler.state_dict())

    trajectory, _, _ = assert_same_outcome(scenario)
    assert trajectory[1][0] == 2.0**4 * 3.0


def test_cuda_amp_style_subclass_with_init_scale_first() -> None:
    def scenario(scaler_class):
        class InitScaleFirst(scaler_class):
            def __init__(self, init_scale=2.0**16, growth_factor=2.0, enabled=True):
                super().__init__("cpu", init_scale, growth_factor, enabled=enabled)

        model = linear()
        optimizer = sgd(model)
        scaler = InitScaleFirst(2.0**5, 4.0)
        trajectory = _train(scaler, model, optimizer, range(3), overflow_at={1})
        disabled = InitScaleFirst(enabled=False)
        return trajectory, model.weight, disabled.get_scale(), disabled.state_dict()

    assert_same_outcome(scenario)


# ----------------------------------------------------------------- writing torch's attributes


IN_PLACE_WRITES = {
    "scale-fill": lambda s, step: s._scale.fill_(4.0) if step == 1 else None,
    "scale-clamp-min": lambda s, step: s._scale.clamp_(min=2.0**12),
    "scale-clamp-max": lambda s, step: s._scale.clamp_(max=2.0**10),
    "scale-mul": lambda s, step: s._scale.mul_(0.5) if step % 2 else None,
    "scale-copy": lambda s, step: s._scale.copy_(torch.tensor(2.0**9)) if step == 2 else None,
    "tracker-fill": lambda s, step: s._growth_tracker.fill_(2) if step == 0 else None,
    "tracker-zero": lambda s, step: s._growth_tracker.zero_(),
    "both": lambda s, step: (
        (s._scale.fill_(2.0**8), s._growth_tracker.fill_(1)) if step == 2 else None
    ),
}


@pytest.mark.parametrize("write", IN_PLACE_WRITES.values(), ids=IN_PLACE_WRITES.keys())
@pytest.mark.parametrize("optimizer_name", ["sgd", "fused-adam"])
def test_in_place_writes_to_scale_and_growth_tracker_are_honoured(write, optimizer_name) -> None:
    """Before the fix ours kept a host copy of the scale for unscaling: after
    ``scaler._scale.fill_(4.0)`` gradients were divided by the stale 2**16 (4 / 16384 of the
    true value) and the growth tracker writes were ignored."""

    def scenario(scaler_class):
        model = linear()
        if optimizer_name == "sgd":
            optimizer = sgd(model, momentum=0.9)
        else:
            optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
        scaler = scaler_class("cpu", 2.0**11, growth_interval=3)
        grads, trajectory = [], []
        for step in range(6):
            optimizer.zero_grad()
            backward(scaler, model, step)
            if step == 4:
                model.weight.grad[0, 1] = float("inf")
            scaler.unscale_(optimizer)
            grads.append(model.weight.grad.clone())
            scaler.step(optimizer)
            scaler.update()
            write(scaler, step)
            trajectory.append((scaler.get_scale(), scaler._get_growth_tracker()))
        return trajectory, grads, model.weight, torch_keys(scaler.state_dict())

    assert_same_outcome(scenario)


def test_assigning_a_scale_tensor_each_step_like_a_floor_clamp() -> None:
    """User code in the wild: ``if scaler._scale < m: scaler._scale = torch.tensor(m).to(...)``."""

    def scenario(scaler_class):
        def floor_at_one_eighth(scaler, step):
            if scaler._scale < 0.125:
                scaler._scale = torch.tensor(0.125).to(scaler._scale)

        model = linear()
        optimizer = sgd(model)
        scaler = scaler_class("cpu", 2.0**-2)
        trajectory = _train(
            scaler, model, optimizer, range(6), overflow_at={0, 1, 2}, between=floor_at_one_eighth
        )
        return trajectory, model.weight, torch_keys(scaler.state_dict())

    trajectory, _, _ = assert_same_outcome(scenario)
    assert trajectory[2][0] == 0.125


def test_copying_scale_and_tracker_between_scalers_like_mmengine() -> None:
    """MMEngine keeps two optimizer wrappers in step by assigning one scaler's ``_scale`` and
    ``_growth_tracker`` to the other's after stepping.

    A documented difference: torch's assignment aliases the tensors, so from then on both
    scalers' ``update()`` advance the same scale (twice per iteration here). Ours copies the
    value in (its scale tensor is shared with fused optimizers and a captured update, so it
    cannot be replaced); that is torch's behaviour when the assigned tensors are clones.
    """

    def scenario(scaler_class, assign):
        head, body = linear(0), linear(1)
        head_optimizer, body_optimizer = sgd(head), sgd(body)
        head_scaler = scaler_class("cpu", 2.0**10, growth_interval=2)
        body_scaler = scaler_class("cpu", 2.0**3, growth_interval=2)
        trajectory = []
        for step in range(6):
            for optimizer in (head_optimizer, body_optimizer):
                optimizer.zero_grad()
            backward(head_scaler, head, step)
            if step == 3:
                head.weight.grad[0, 0] = float("inf")
            head_scaler.step(head_optimizer)
            head_scaler.update()
            body_scaler._scale = assign(head_scaler._scale)
            body_scaler._growth_tracker = assign(head_scaler._growth_tracker)
            backward(body_scaler, body, step)
            body_scaler.step(body_optimizer)
            body_scaler.update()
            trajectory.append((head_scaler.get_scale(), body_scaler.get_scale()))
        return trajectory, head.weight, body.weight, torch_keys(body_scaler.state_dict())

    ours = scenario(GradScaler, lambda tensor: tensor)
    assert_same(ours, scenario(TorchScaler, torch.Tensor.clone))
    assert_same(ours, scenario(GradScaler, torch.Tensor.clone))
    aliased = scenario(TorchScaler, lambda tensor: tensor)
    assert aliased[0][0][0] == 2.0**11  # the body's update grew the head's scale too
    assert ours[0][0][0] == 2.0**10


def test_in_place_writes_add_no_sync_beyond_torchs() -> None:
    def syncs(scaler_class):
        model = linear()
        optimizer = sgd(model)
        scaler = scaler_class("cpu")
        backward(scaler, model)
        scaler.step(optimizer)
        scaler.update()
        with count_syncs() as counter:
            for step in range(4):
                optimizer.zero_grad()
                backward(scaler, model, step)
                scaler.unscale_(optimizer)
                scaler.step(optimizer)
                scaler.update()
                scaler._scale.clamp_(max=2.0**15)
                scaler._growth_tracker.add_(1)
        return counter.count

    assert syncs(GradScaler) <= syncs(TorchScaler)


def test_assigned_values_must_be_one_element() -> None:
    scaler = GradScaler("cpu")
    scaler.scale(torch.ones(1))
    with pytest.raises(ValueError, match="_scale must be a 1-element tensor"):
        scaler._scale = torch.ones(2)
    with pytest.raises(ValueError, match="_growth_tracker must be an int >= 0"):
        scaler._growth_tracker = -1
    assert scaler.get_scale() == 2.0**16
    assert scaler._get_growth_tracker() == 0


def test_assigning_before_the_first_scale_sets_the_initial_values() -> None:
    """torch needs both tensors assigned before ``scale()`` or it fails later; ours takes either
    (and plain numbers) as the initial values."""
    scaler = GradScaler("cpu")
    scaler._scale = 8.0
    scaler._growth_tracker = 3
    assert scaler.get_scale() == 8.0
    assert scaler._get_growth_tracker() == 3
    tensor_first = GradScaler("cpu")
    tensor_first._scale = torch.tensor(16.0)
    assert_same(tensor_first.scale(torch.ones(2)), torch.full((2,), 16.0))


def test_monitoring_sees_a_scale_written_in_place() -> None:
    scaler = GradScaler("cpu")
    model = linear()
    backward(scaler, model)
    scaler.step(sgd(model))
    scaler.update()
    scaler._scale.fill_(4.0)
    scaler._growth_tracker.fill_(5)
    assert scaler.peek_scale() == 4.0
    assert scaler.stats().scale == 4.0
    assert scaler._get_growth_tracker() == 5
    assert torch_keys(scaler.state_dict())["_growth_tracker"] == 5


def test_isinstance_checks_for_torchs_class_pass() -> None:
    """User code guards checkpoint loading with ``isinstance(scaler, torch.amp.GradScaler)``;
    a scaler failing it would silently not be restored."""
    assert isinstance(GradScaler("cpu"), torch.amp.GradScaler)
    assert isinstance(GradScaler("cpu", enabled=False), torch.amp.GradScaler)


def test_every_method_of_torchs_class_is_overridden() -> None:
    """A method inherited from torch would run torch's code on our state. A torch release that
    adds one fails here, naming it, until ours implements it."""
    inherited = [
        name
        for name, member in vars(TorchScaler).items()
        if callable(member) and name not in vars(GradScaler) and name != "__init_subclass__"
    ]
    assert inherited == []


def test_a_flag_passed_to_unscale_grads_is_not_written() -> None:
    """torch copies the ``found_inf`` it is given; code that unscales several optimizers
    through ``_unscale_grads_`` with one zero flag must not see one optimizer's inf in the
    next one's result."""

    def scenario(scaler_class):
        scaler = scaler_class("cpu")
        models = linear(0), linear(1)
        optimizers = [sgd(model) for model in models]
        for model in models:
            backward(scaler, model)
        models[0].weight.grad[0, 0] = float("inf")
        flag, inv_scale = torch.zeros(()), torch.tensor(0.5)
        found = [
            dict(scaler._unscale_grads_(optimizer, inv_scale, flag, False))
            for optimizer in optimizers
        ]
        return found, flag

    found, flag = assert_same_outcome(scenario)
    assert flag.item() == 0.0
    assert [sum(f.values()).item() for f in found] == [1.0, 0.0]
