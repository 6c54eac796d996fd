"""Edge cases of the public API, run through torch's GradScaler and ours side by side.

Each scenario takes the scaler class and returns what a user can observe (values, tensors,
scales, state dicts); ``assert_same_outcome`` demands equal results, or the same exception type
and message from both.
"""

from __future__ import annotations

import copy
import pickle
import warnings

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

from scaler import GradScaler

# ----------------------------------------------------------------- scale()


def _scaled(outputs_factory):
    def scenario(scaler_class):
        scaled = scaler_class("cpu").scale(outputs_factory())
        return list(scaled) if type(scaled).__name__ == "map" else scaled

    return scenario


@pytest.mark.parametrize(
    "outputs",
    [
        pytest.param(lambda: torch.ones(2, dtype=torch.float16), id="fp16"),
        pytest.param(lambda: torch.ones(2, dtype=torch.bfloat16), id="bf16"),
        pytest.param(lambda: torch.ones(2, dtype=torch.float64), id="fp64"),
        pytest.param(lambda: torch.arange(3), id="int64"),
        pytest.param(lambda: torch.ones(2, dtype=torch.bool), id="bool"),
        pytest.param(lambda: torch.ones(2, dtype=torch.complex64), id="complex"),
        pytest.param(lambda: torch.ones(2, requires_grad=True).sum(), id="requires-grad"),
        pytest.param(lambda: torch.ones(2, device="meta"), id="meta-device"),
        pytest.param(
            lambda: [torch.ones(2), (torch.ones(1, dtype=torch.float16), [torch.arange(2)])],
            id="nested-list-tuple",
        ),
        pytest.param(lambda: (torch.ones(1) * i for i in range(3)), id="generator"),
        pytest.param(lambda: iter([torch.ones(1), [torch.ones(2)]]), id="iterator"),
        pytest.param(lambda: {torch.ones(1): "key"}, id="dict-iterates-keys"),
        pytest.param(lambda: [torch.ones(1), torch.ones(1, device="meta")], id="two-devices"),
        pytest.param(lambda: [], id="empty-list"),
        pytest.param(lambda: (), id="empty-tuple"),
        pytest.param(lambda: 3.0, id="float-error"),
        pytest.param(lambda: None, id="none-error"),
        pytest.param(lambda: [torch.ones(1), 3], id="list-with-int-error"),
    ],
)
def test_scale_outputs_of_every_shape_and_dtype(outputs) -> None:
    assert_same_outcome(_scaled(outputs))


def test_scale_grads_flow_to_outputs_and_the_scale_lives_on_the_first_device() -> None:
    def scenario(scaler_class):
        scaler = scaler_class("cpu", init_scale=8.0)
        leaf = torch.ones(3, requires_grad=True)
        scaled = scaler.scale([leaf.sum(), (leaf * 2).sum()])
        sum(scaled).backward()
        return leaf.grad, scaler._scale

    assert_same_outcome(scenario)


def test_scale_does_not_modify_its_input() -> None:
    def scenario(scaler_class):
        outputs = torch.full((2,), 3.0)
        scaler_class("cpu").scale(outputs)
        return outputs

    assert_same_outcome(scenario)


# ----------------------------------------------------------------- enabled=False


def test_disabled_scaler_passes_everything_through() -> None:
    def scenario(scaler_class):
        scaler = scaler_class("cpu", enabled=False)
        model = linear()
        optimizer = sgd(model)
        loss = model(torch.ones(4, 3)).sum()
        assert scaler.scale(loss) is loss
        outputs = [loss]
        assert scaler.scale(outputs) is outputs
        loss.backward()
        grad = model.weight.grad.clone()
        scaler.unscale_(optimizer)
        unscaled = model.weight.grad.clone()
        returned = scaler.step(optimizer)
        scaler.update()
        scaler.update(4.0)
        scaler.load_state_dict({})
        restored = pickle.loads(pickle.dumps(scaler))
        return (
            grad,
            unscaled,
            returned,
            model.weight,
            scaler.get_scale(),
            scaler.state_dict(),
            scaler._get_growth_tracker(),
            scaler.is_enabled(),
            restored.is_enabled(),
            restored.get_scale(),
            copy.deepcopy(scaler).state_dict(),
        )

    value = assert_same_outcome(scenario)
    assert value[4] == 1.0
    assert value[5] == {}


def test_disabled_step_calls_optimizer_step_with_closure_and_arguments() -> None:
    class Recording(torch.optim.SGD):
        def step(self, closure=None, *args, **kwargs):
            return ("stepped", closure() if closure else None, args, kwargs)

    def scenario(scaler_class):
        scaler = scaler_class("cpu", enabled=False)
        optimizer = Recording(linear().parameters(), lr=0.1)
        return (
            scaler.step(optimizer, closure=lambda: 1.5),
            scaler.step(optimizer, None, 7, flag=True),
        )

    assert_same_outcome(scenario)


# ----------------------------------------------------------------- before the first scale()


@pytest.mark.parametrize("init_scale", [2.0**16, 3.5, 2.0**-10])
def test_get_scale_and_state_dict_before_the_first_scale(init_scale: float) -> None:
    def scenario(scaler_class):
        scaler = scaler_class("cpu", init_scale, 3.0, 0.25, 7)
        return (
            scaler.get_scale(),
            torch_keys(scaler.state_dict()),
            scaler._get_growth_tracker(),
            scaler._scale,
            scaler._growth_tracker,
            scaler._get_scale_async(),
            scaler._init_scale,
            scaler._init_growth_tracker,
        )

    assert_same_outcome(scenario)


def test_an_early_state_dict_loads_into_a_fresh_scaler_that_then_continues() -> None:
    def scenario(scaler_class):
        source = scaler_class("cpu", 2.0**6, 4.0, 0.125, 3)
        saved = torch_keys(source.state_dict())
        scaler = scaler_class("cpu")
        scaler.load_state_dict(saved)
        model = linear()
        optimizer = sgd(model)
        trajectory = [scaler.get_scale()]
        for step in range(8):
            optimizer.zero_grad()
            backward(scaler, model, step)
            if step == 4:
                model.weight.grad[0, 0] = float("inf")
            scaler.step(optimizer)
            scaler.update()
            trajectory.append(scaler.get_scale())
        return trajectory, torch_keys(scaler.state_dict()), model.weight

    assert_same_outcome(scenario)


def test_a_mid_training_state_dict_round_trips_between_the_two() -> None:
    def train(scaler, model, optimizer, steps: range):
        for step in steps:
            optimizer.zero_grad()
            backward(scaler, model, step)
            if step % 4 == 1:
                model.bias.grad[0] = float("nan")
            scaler.step(optimizer)
            scaler.update()

    def scenario(first_class):
        second_class = GradScaler if first_class is TorchScaler else TorchScaler
        model = linear()
        optimizer = sgd(model, momentum=0.9)
        first = first_class("cpu", 2.0**8, growth_interval=2)
        train(first, model, optimizer, range(5))
        second = second_class("cpu")
        second.load_state_dict(torch_keys(first.state_dict()))
        train(second, model, optimizer, range(5, 11))
        return second.get_scale(), torch_keys(second.state_dict()), model.weight

    assert_same_outcome(scenario)


# ----------------------------------------------------------------- growth, update(new_scale)


@pytest.mark.parametrize(
    ("growth_factor", "backoff_factor", "growth_interval"),
    [(2.0, 0.5, 1), (3.0, 0.25, 3), (1.5, 0.9, 4), (10.0, 0.1, 2)],
)
def test_growth_after_exactly_growth_interval_clean_steps(
    growth_factor: float, backoff_factor: float, growth_interval: int
) -> None:
    overflow_at = {2 * growth_interval + 1, 2 * growth_interval + 2, 4 * growth_interval}

    def scenario(scaler_class):
        scaler = scaler_class("cpu", 2.0**5, growth_factor, backoff_factor, growth_interval)
        model = linear()
        optimizer = sgd(model)
        trajectory = []
        for step in range(5 * growth_interval + 3):
            optimizer.zero_grad()
            backward(scaler, model, step)
            if step in overflow_at:
                model.weight.grad[1, 2] = float("-inf")
            scaler.step(optimizer)
            scaler.update()
            trajectory.append((scaler.get_scale(), scaler._get_growth_tracker()))
        return trajectory, model.weight

    trajectory, _ = assert_same_outcome(scenario)
    assert trajectory[growth_interval - 1][0] == 2.0**5 * growth_factor


def _update_with(new_scale_factory):
    def scenario(scaler_class):
        scaler = scaler_class("cpu")
        model = linear()
        optimizer = sgd(model)
        backward(scaler, model)
        scaler.step(optimizer)
        new_scale = new_scale_factory()
        scaler.update(new_scale)
        if isinstance(new_scale, torch.Tensor):
            new_scale.fill_(123.0)  # the scaler copied the value; later changes do not leak in
        optimizer.zero_grad()
        backward(scaler, model, 1)
        grad = model.weight.grad.clone()
        scaler.step(optimizer)
        scaler.update()
        return scaler.get_scale(), grad, model.weight, torch_keys(scaler.state_dict())

    return scenario


@pytest.mark.parametrize(
    "new_scale",
    [
        pytest.param(lambda: 8.0, id="float"),
        pytest.param(lambda: 2.0**-3, id="float-below-one"),
        pytest.param(lambda: torch.tensor(8.0), id="0-dim"),
        pytest.param(lambda: torch.tensor(8.0, dtype=torch.float64), id="0-dim-fp64"),
        pytest.param(lambda: torch.tensor(8.0, dtype=torch.float16), id="0-dim-fp16"),
        pytest.param(lambda: torch.tensor(8), id="0-dim-int"),
        pytest.param(lambda: torch.tensor([8.0, 1.0]), id="two-elements-error"),
        pytest.param(lambda: torch.tensor(8.0, requires_grad=True), id="requires-grad-error"),
        pytest.param(lambda: torch.tensor(8.0, device="meta"), id="other-device-error"),
        pytest.param(lambda: torch.ones(0), id="empty-error"),
    ],
)
def test_update_with_a_new_scale(new_scale) -> None:
    assert_same_outcome(_update_with(new_scale))


def test_update_new_scale_before_any_step_and_before_scale() -> None:
    def after_scale(scaler_class):
        scaler = scaler_class("cpu")
        scaler.scale(torch.ones(1))
        scaler.update(4.0)
        return scaler.get_scale(), scaler._get_growth_tracker()

    def before_scale(scaler_class):
        scaler_class("cpu").update(4.0)

    assert_same_outcome(after_scale)
    assert_same_outcome(before_scale)


# ----------------------------------------------------------------- state-machine misuse


def _misuse(calls):
    def scenario(scaler_class):
        scaler = scaler_class("cpu")
        model = linear()
        optimizer = sgd(model)
        calls(scaler, model, optimizer)

    return scenario


def _fwd(scaler, model, optimizer):
    backward(scaler, model)


def _no_grads(scaler, model, optimizer):
    scaler.scale(torch.ones(1))


MISUSES = {
    "unscale-before-scale": lambda s, m, o: s.unscale_(o),
    "step-before-scale": lambda s, m, o: s.step(o),
    "update-before-scale": lambda s, m, o: s.update(),
    "unscale-twice": lambda s, m, o: (_fwd(s, m, o), s.unscale_(o), s.unscale_(o)),
    "unscale-after-step": lambda s, m, o: (_fwd(s, m, o), s.step(o), s.unscale_(o)),
    "step-twice": lambda s, m, o: (_fwd(s, m, o), s.step(o), s.step(o)),
    "step-twice-after-unscale": lambda s, m, o: (
        _fwd(s, m, o),
        s.unscale_(o),
        s.step(o),
        s.step(o),
    ),
    "update-without-step": lambda s, m, o: (_fwd(s, m, o), s.update()),
    "step-without-grads": lambda s, m, o: (_no_grads(s, m, o), s.step(o)),
    "unscale-without-grads-then-update": lambda s, m, o: (
        _no_grads(s, m, o),
        s.unscale_(o),
        s.update(),
    ),
    "closure-keyword": lambda s, m, o: (_fwd(s, m, o), s.step(o, closure=lambda: 1.0)),
    "closure-keyword-none": lambda s, m, o: (_fwd(s, m, o), s.step(o, closure=None)),
    "update-after-update": lambda s, m, o: (_fwd(s, m, o), s.step(o), s.update(), s.update()),
    "step-after-update-without-backward": lambda s, m, o: (
        _fwd(s, m, o),
        s.step(o),
        s.update(),
        o.zero_grad(),
        s.step(o),
    ),
    "load-empty-state-dict": lambda s, m, o: s.load_state_dict({}),
}


@pytest.mark.parametrize("calls", MISUSES.values(), ids=MISUSES.keys())
def test_state_machine_misuse_raises_torchs_error_and_message(calls) -> None:
    theirs_raised = assert_same_outcome(_misuse(calls)) is None
    assert theirs_raised


def test_a_failed_call_leaves_the_iteration_usable_as_in_torch() -> None:
    def scenario(scaler_class):
        scaler = scaler_class("cpu")
        model = linear()
        optimizer = sgd(model)
        backward(scaler, model)
        errors = []
        for bad in (lambda: scaler.step(optimizer, closure=lambda: 0), scaler.update):
            try:
                bad()
            except Exception as error:  # collected and compared
                errors.append(str(error))
        scaler.step(optimizer)
        scaler.update()
        return errors, model.weight, scaler.get_scale()

    assert_same_outcome(scenario)


# ----------------------------------------------------------------- step()


def test_step_passes_positional_closure_arguments_and_returns_the_value() -> None:
    class Recording(torch.optim.SGD):
        def step(self, closure=None, *args, **kwargs):
            loss = closure() if closure is not None else None
            super().step()
            return ("stepped", loss, args, kwargs)

    def scenario(scaler_class):
        scaler = scaler_class("cpu")
        model = linear()
        optimizer = Recording(model.parameters(), lr=0.1)
        backward(scaler, model)
        returned = scaler.step(optimizer, lambda: "closure ran", 5, lr_scale=0.5)
        scaler.update()
        optimizer.zero_grad()
        backward(scaler, model)
        model.weight.grad[0, 0] = float("nan")
        skipped = scaler.step(optimizer, lambda: "closure ran")
        scaler.update()
        return returned, skipped, model.weight, scaler.get_scale()

    assert_same_outcome(scenario)


def test_lbfgs_with_a_positional_closure() -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
        scaler = scaler_class("cpu", 2.0**4)

        def closure():
            optimizer.zero_grad()
            loss = model(torch.ones(4, 3)).pow(2).sum()
            scaler.scale(loss).backward()
            return loss

        closure()
        losses = []
        for _ in range(3):
            losses.append(scaler.step(optimizer, closure))
            scaler.update()
            closure()
        return losses, model.weight, scaler.get_scale()

    assert_same_outcome(scenario)


def test_params_without_grads_are_left_alone() -> None:
    def scenario(scaler_class):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
        model[0].bias.requires_grad_(False)
        unused = torch.nn.Parameter(torch.ones(2))
        optimizer = torch.optim.Adam([*model.parameters(), unused], lr=0.1)
        scaler = scaler_class("cpu")
        for step in range(3):
            optimizer.zero_grad()
            scaler.scale(model(torch.ones(2, 3) * step).sum()).backward()
            scaler.unscale_(optimizer)
            found = scaler._found_inf_per_device(optimizer)
            scaler.step(optimizer)
            scaler.update()
        return list(model.parameters()), unused, found, scaler.get_scale()

    assert_same_outcome(scenario)


def test_two_scalers_on_one_optimizer_keep_separate_state() -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = sgd(model)
        first, second = scaler_class("cpu"), scaler_class("cpu", init_scale=2.0**10)
        trajectory = []
        for step in range(3):
            for scaler in (first, second):
                optimizer.zero_grad()
                backward(scaler, model, step)
                if step == 1 and scaler is second:
                    model.weight.grad[0, 0] = float("inf")
                scaler.step(optimizer)
                scaler.update()
            trajectory.append((first.get_scale(), second.get_scale()))
        return trajectory, model.weight

    assert_same_outcome(scenario)


def test_scheduler_after_a_skipped_first_step_warns_as_in_torch() -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = sgd(model)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        scaler = scaler_class("cpu")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            backward(scaler, model)
            model.weight.grad[0, 0] = float("inf")
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
        return [str(w.message) for w in caught], optimizer.param_groups[0]["lr"]

    messages, _ = assert_same_outcome(scenario)
    assert any("lr_scheduler.step()" in message for message in messages)


# ----------------------------------------------------------------- unscale_()


def test_fp16_params_refuse_unscale_and_step_as_in_torch() -> None:
    def via_unscale(scaler_class):
        model = linear(dtype=torch.float16)
        scaler = scaler_class("cpu")
        backward(scaler, model)
        scaler.unscale_(sgd(model))

    def via_step(scaler_class):
        model = linear(dtype=torch.float16)
        scaler = scaler_class("cpu")
        backward(scaler, model)
        grad = model.weight.grad.clone()
        try:
            scaler.step(sgd(model))
        except ValueError as error:
            return str(error), grad, model.weight.grad

    assert_same_outcome(via_unscale)
    assert_same_outcome(via_step)


def test_fused_adam_accepts_fp16_params_as_in_torch() -> None:
    def scenario(scaler_class):
        model = linear(dtype=torch.float16)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
        scaler = scaler_class("cpu")
        for step in range(3):
            optimizer.zero_grad()
            backward(scaler, model, step)
            if step == 1:
                model.weight.grad[0, 0] = float("inf")
            scaler.step(optimizer)
            scaler.update()
        return model.weight, optimizer.state[model.weight]["step"], scaler.get_scale()

    assert_same_outcome(scenario)


def test_mixed_dtype_grads_are_unscaled_per_dtype() -> None:
    def scenario(scaler_class):
        first, second = linear(0), linear(1, dtype=torch.bfloat16)
        optimizer = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=0.1)
        scaler = scaler_class("cpu")
        loss = first(torch.ones(4, 3)).sum() + second(torch.ones(4, 3, dtype=torch.bfloat16)).sum()
        scaler.scale(loss.float()).backward()
        scaler.unscale_(optimizer)
        grads = [p.grad.clone() for p in optimizer.param_groups[0]["params"]]
        scaler.step(optimizer)
        scaler.update()
        return grads, scaler._found_inf_per_device(optimizer), first.weight, second.weight

    assert_same_outcome(scenario)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_gradient_clipping_after_unscale_is_bit_identical(norm_type: float) -> None:
    def scenario(scaler_class):
        torch.manual_seed(3)
        model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
        scaler = scaler_class("cpu")
        norms = []
        for step in range(4):
            optimizer.zero_grad()
            inputs = torch.randn(6, 5, generator=torch.Generator().manual_seed(step))
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(inputs).float().pow(2).mean()
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05, norm_type))
            scaler.step(optimizer)
            scaler.update()
        return norms, list(model.parameters()), scaler.get_scale()

    assert_same_outcome(scenario)


def test_only_the_overflowing_optimizer_skips_and_the_scale_backs_off_once() -> None:
    def scenario(scaler_class):
        first, second = linear(0), linear(1)
        optimizers = sgd(first, momentum=0.9), sgd(second, momentum=0.9)
        scaler = scaler_class("cpu")
        for step in range(3):
            for optimizer in optimizers:
                optimizer.zero_grad()
            backward(scaler, first, step)
            backward(scaler, second, step)
            if step == 1:
                second.bias.grad[1] = float("nan")
            returned = [scaler.step(optimizer) for optimizer in optimizers]
            scaler.update()
        return returned, first.weight, second.weight, scaler.get_scale()

    assert_same_outcome(scenario)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_between_unscale_and_step(set_to_none: bool) -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = sgd(model, momentum=0.9)
        scaler = scaler_class("cpu")
        backward(scaler, model)
        scaler.unscale_(optimizer)
        optimizer.zero_grad(set_to_none=set_to_none)
        scaler.step(optimizer)
        scaler.update()
        return model.weight, optimizer.state[model.weight], scaler.get_scale()

    assert_same_outcome(scenario)


# ----------------------------------------------------------------- pickling and copying


def test_pickle_and_deepcopy_between_iterations_continue_identically() -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = sgd(model)
        scaler = scaler_class("cpu", 2.0**6, growth_interval=2)
        copies = []
        for step in range(4):
            optimizer.zero_grad()
            backward(scaler, model, step)
            scaler.step(optimizer)
            scaler.update()
            copies.append(pickle.loads(pickle.dumps(scaler)))
            copies.append(copy.deepcopy(scaler))
        continued = []
        for restored in copies[-2:]:
            optimizer.zero_grad()
            backward(restored, model)
            restored.step(optimizer)
            restored.update()
            continued.append((restored.get_scale(), restored._get_growth_tracker()))
        return [torch_keys(c.state_dict()) for c in copies], continued, copies[0]._scale

    assert_same_outcome(scenario)


@pytest.mark.parametrize("stage", ["after-scale", "after-unscale", "after-step"])
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_pickling_mid_iteration_raises_torchs_error(stage: str, how: str) -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = sgd(model)
        scaler = scaler_class("cpu")
        backward(scaler, model)
        if stage != "after-scale":
            scaler.unscale_(optimizer)
        if stage == "after-step":
            scaler.step(optimizer)
        restored = pickle.loads(pickle.dumps(scaler)) if how == "pickle" else copy.deepcopy(scaler)
        return restored.get_scale()

    if stage == "after-scale":  # no optimizer state recorded yet: allowed by both
        assert assert_same_outcome(scenario) is not None
    else:
        assert assert_same_outcome(scenario) is None


# ----------------------------------------------------------------- documented differences


def test_update_accepts_an_int_and_any_one_element_tensor_where_torch_fails() -> None:
    """torch's ``update(8)`` dies on ``int.device`` and a shape-(1,) tensor on ``copy_``'s
    broadcast, although its own message asks for "a float or a 1-element tensor". Ours takes
    both, as the message says."""
    for new_scale in (lambda: 8, lambda: torch.tensor([8.0]), lambda: torch.tensor([[8.0]])):
        scenario = _update_with(new_scale)
        with pytest.raises((AttributeError, RuntimeError)):
            scenario(TorchScaler)
        expected = _update_with(lambda: 8.0)(TorchScaler)
        assert_same(scenario(GradScaler), expected)


def test_a_torch_device_object_is_taken_as_its_type() -> None:
    """torch stores ``torch.device("cpu")`` as is and then compares it with a tensor's device
    *type*, so ``update(tensor)`` always fails; ``torch.device("cuda")`` without CUDA does not
    warn or disable. Ours uses the device's type everywhere."""
    scaler = GradScaler(device=torch.device("cpu"))
    model = linear()
    backward(scaler, model)
    scaler.step(sgd(model))
    scaler.update(torch.tensor(4.0))
    assert scaler.get_scale() == 4.0
    theirs = TorchScaler(device=torch.device("cpu"))
    theirs.scale(torch.ones(1))
    with pytest.raises(AssertionError, match="new_scale should be a float"):
        theirs.update(torch.tensor(4.0))
    if not torch.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available.  Disabling."):
            assert not GradScaler(device=torch.device("cuda")).is_enabled()


def test_factor_errors_start_with_torchs_message_and_name_the_argument() -> None:
    for kwargs in ({"growth_factor": 1.0}, {"backoff_factor": 1.0}):
        with pytest.raises(AssertionError) as theirs:
            TorchScaler("cpu", **kwargs)
        with pytest.raises(AssertionError) as ours:
            GradScaler("cpu", **kwargs)
        assert isinstance(ours.value, ValueError)
        assert str(ours.value).startswith(str(theirs.value))
        assert next(iter(kwargs)) in str(ours.value)


def test_a_state_dict_missing_keys_names_them_all() -> None:
    """torch raises ``KeyError`` for the first missing key after applying the keys before it;
    ours checks first, names every missing key, and applies nothing."""
    with pytest.raises(KeyError):
        TorchScaler("cpu").load_state_dict({"scale": 2.0})
    scaler = GradScaler("cpu", init_scale=8.0)
    with pytest.raises(ValueError, match="'growth_factor', 'backoff_factor', 'growth_interval'"):
        scaler.load_state_dict({"scale": 2.0})
    assert scaler.get_scale() == 8.0


@pytest.mark.parametrize("enabled", [0, 1])
def test_enabled_as_an_int_zero_or_one_works_as_in_torch(enabled: int) -> None:
    def scenario(scaler_class):
        scaler = scaler_class("cpu", enabled=enabled)
        model = linear()
        optimizer = sgd(model)
        backward(scaler, model)
        scaler.step(optimizer)
        scaler.update()
        return bool(scaler.is_enabled()), scaler.get_scale(), model.weight, scaler.state_dict()

    theirs = scenario(TorchScaler)
    ours = scenario(GradScaler)
    assert_same(ours[:3], theirs[:3])
    assert torch_keys(ours[3]) == theirs[3]
    assert GradScaler("cpu", enabled=enabled).is_enabled() is bool(enabled)


# ----------------------------------------------------------------- optimizers torch accepts


class _ComparableSGD(torch.optim.SGD):
    """Defining ``__eq__`` makes instances unhashable, which torch's ``id()`` keys tolerate."""

    def __eq__(self, other: object) -> bool:
        return self is other


class _DuckOptimizer:
    """Not a ``torch.optim.Optimizer``, with ``__slots__``: no weak references, no ``__dict__``."""

    __slots__ = ("param_groups", "state")

    def __init__(self, params) -> None:
        self.param_groups = [{"params": list(params)}]
        self.state: dict = {}

    def step(self) -> str:
        with torch.no_grad():
            for param in self.param_groups[0]["params"]:
                param.add_(param.grad, alpha=-0.1)
        return "duck stepped"


@pytest.mark.parametrize(
    "make_optimizer",
    [lambda params: _ComparableSGD(params, lr=0.1), _DuckOptimizer],
    ids=["unhashable", "duck-typed-slots"],
)
def test_optimizers_that_cannot_be_weakly_keyed(make_optimizer) -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = make_optimizer(model.parameters())
        scaler = scaler_class("cpu")
        returned = []
        for step in range(3):
            for param in model.parameters():
                param.grad = None
            backward(scaler, model, step)
            if step == 1:
                model.bias.grad[0] = float("inf")
            returned.append(scaler.step(optimizer))
            scaler.update()
        return returned, model.weight, scaler.get_scale()

    assert_same_outcome(scenario)
    model = linear()
    optimizer = make_optimizer(model.parameters())
    scaler = GradScaler("cpu")
    backward(scaler, model)
    scaler.step(optimizer)
    assert not scaler.step_skipped(optimizer)


@pytest.mark.parametrize("fused", [False, True])
def test_a_step_patched_on_the_instance_sees_skips_like_accelerate(fused: bool) -> None:
    """accelerate replaces ``optimizer.step`` on the instance with a wrapper that records the
    call, then calls ``scaler.step(optimizer, closure)``; no call means the step was skipped
    (a fused optimizer is always called and skips inside its kernel)."""

    def scenario(scaler_class):
        model = linear()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=fused)
        scaler = scaler_class("cpu")
        original = optimizer.step
        seen = []
        for step in range(3):
            called = []

            def patched(*args, called=called, **kwargs):
                called.append(args)
                return original(*args, **kwargs)

            optimizer.step = patched
            optimizer.zero_grad()
            backward(scaler, model, step)
            if step == 1:
                model.weight.grad[0, 0] = float("inf")
            scaler.step(optimizer, None)
            scaler.update()
            optimizer.step = original
            seen.append((called, scaler.get_scale()))
        return seen, model.weight

    assert_same_outcome(scenario)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_fused_sgd_with_momentum_matches_torch_when_no_first_step_is_skipped(dtype) -> None:
    """Until its momentum buffers exist ours decides fused SGD's step on the host (torch's
    kernel mishandles a skipped first step); the step it does take is torch's fused step, bit
    for bit, and fp16 parameters (which ``unscale_`` refuses) work as in torch."""

    def scenario(scaler_class):
        model = linear(dtype=dtype)
        optimizer = sgd(model, momentum=0.9, fused=True)
        scaler = scaler_class("cpu", 2.0**4)
        for step in range(4):
            optimizer.zero_grad()
            backward(scaler, model, step)
            if step == 2:
                model.weight.grad[1, 0] = float("inf")
            scaler.step(optimizer)
            scaler.update()
        return list(model.parameters()), optimizer.state[model.weight], scaler.get_scale()

    assert_same_outcome(scenario)


def test_grads_on_devices_sharing_an_index_are_unscaled_per_device() -> None:
    """CPU and meta tensors both report device index -1; grouping by the index alone once sent
    both to one kernel call and left the CPU gradients scaled by 2**16."""

    def scenario(scaler_class):
        on_cpu, on_meta = linear(0), torch.nn.Linear(3, 2, device="meta")
        optimizer = torch.optim.SGD([*on_cpu.parameters(), *on_meta.parameters()], lr=0.1)
        scaler = scaler_class("cpu")
        scaler.scale(on_cpu(torch.ones(4, 3)).sum()).backward()
        for param in on_meta.parameters():
            param.grad = torch.ones_like(param)
        scaler.unscale_(optimizer)
        return dict(scaler._found_inf_per_device(optimizer)), on_cpu.weight.grad

    assert_same_outcome(scenario)


FUSED = {
    "adam": lambda params: torch.optim.Adam(params, lr=0.1, fused=True),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.1, fused=True),
    "sgd-momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, fused=True),
}


@pytest.mark.parametrize("make_optimizer", FUSED.values(), ids=FUSED.keys())
@pytest.mark.parametrize("unscale_first", [False, True])
def test_a_fused_optimizer_without_grads_this_iteration(make_optimizer, unscale_first) -> None:
    """An idle optimizer (a frozen part, the other half of a GAN step) is stepped with nothing
    to check: torch calls it with ``found_inf`` 0; ours once failed with an IndexError."""

    def scenario(scaler_class):
        busy, idle = linear(0), linear(1)
        busy_optimizer, idle_optimizer = sgd(busy), make_optimizer(idle.parameters())
        scaler = scaler_class("cpu")
        returned = []
        for step in range(3):
            busy_optimizer.zero_grad()
            backward(scaler, busy, step)
            if step == 1:
                busy.weight.grad[0, 0] = float("nan")
            if unscale_first:
                scaler.unscale_(idle_optimizer)
            returned.append(scaler.step(idle_optimizer))
            returned.append(scaler.step(busy_optimizer))
            scaler.update()
        return returned, busy.weight, idle.weight, idle_optimizer.state, scaler.get_scale()

    assert_same_outcome(scenario)


def test_only_idle_fused_optimizers_then_update_is_torchs_error() -> None:
    def scenario(scaler_class):
        model = linear()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
        scaler = scaler_class("cpu")
        scaler.scale(torch.ones(1))
        scaler.step(optimizer)
        scaler.update()

    assert assert_same_outcome(scenario) is None
