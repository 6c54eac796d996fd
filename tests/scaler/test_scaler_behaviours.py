"""The behaviours torch's own GradScaler tests cover, checked on ours (and on torch where the
point is that both agree)."""

from __future__ import annotations

import warnings

import pytest
import torch
from scaler_harness import forward_backward, make_model, poison_grads, twin

from scaler import GradScaler

BOTH = pytest.mark.parametrize(
    "make_scaler",
    [lambda **kw: GradScaler("cpu", **kw), lambda **kw: torch.amp.GradScaler("cpu", **kw)],
    ids=["ours", "torch"],
)


def one_param(value: float = 1.0, n: int = 4) -> tuple[torch.nn.Parameter, torch.optim.SGD]:
    param = torch.nn.Parameter(torch.full((n,), value))
    return param, torch.optim.SGD([param], lr=1.0)


# --------------------------------------------------------------------------- unscale_


def test_unscale_divides_grads_by_the_scale_and_records_no_inf() -> None:
    scaler = GradScaler("cpu", init_scale=8.0)
    param, optimizer = one_param()
    scaler.scale(torch.ones(()))
    param.grad = torch.tensor([8.0, 16.0, -24.0, 0.0])
    scaler.unscale_(optimizer)
    assert param.grad.tolist() == [1.0, 2.0, -3.0, 0.0]
    (found_inf,) = scaler._found_inf_per_device(optimizer).values()
    assert found_inf.item() == 0.0


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_unscale_records_inf_and_nan(bad: float) -> None:
    scaler = GradScaler("cpu")
    param, optimizer = one_param()
    scaler.scale(torch.ones(()))
    param.grad = torch.tensor([1.0, bad, 1.0, 1.0])
    scaler.unscale_(optimizer)
    (found_inf,) = scaler._found_inf_per_device(optimizer).values()
    assert found_inf.item() == 1.0


def test_unscale_refuses_fp16_grads_before_touching_any() -> None:
    scaler = GradScaler("cpu", init_scale=4.0)
    fp32 = torch.nn.Parameter(torch.ones(2))
    fp16 = torch.nn.Parameter(torch.ones(2, dtype=torch.float16))
    optimizer = torch.optim.SGD([fp32, fp16], lr=1.0)
    fp32.grad, fp16.grad = torch.full((2,), 4.0), torch.full((2,), 4.0, dtype=torch.float16)
    scaler.scale(torch.ones(()))
    with pytest.raises(ValueError, match=r"Attempting to unscale FP16 gradients\."):
        scaler.unscale_(optimizer)
    assert fp32.grad.tolist() == [4.0, 4.0]


@BOTH
def test_unscale_twice_and_after_step_are_errors(make_scaler) -> None:
    scaler = make_scaler()
    param, optimizer = one_param()
    scaler.scale(torch.ones(()))
    param.grad = torch.ones(4)
    scaler.unscale_(optimizer)
    with pytest.raises(
        RuntimeError, match=r"unscale_\(\) has already been called on this optimizer"
    ):
        scaler.unscale_(optimizer)
    scaler.step(optimizer)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step\(\)."):
        scaler.unscale_(optimizer)
    with pytest.raises(
        RuntimeError, match=r"step\(\) has already been called since the last update"
    ):
        scaler.step(optimizer)
    scaler.update()
    scaler.unscale_(optimizer)  # a new iteration starts READY


@BOTH
def test_methods_before_scale_and_update_without_step_are_errors(make_scaler) -> None:
    scaler = make_scaler()
    _, optimizer = one_param()
    for call in (lambda: scaler.unscale_(optimizer), lambda: scaler.step(optimizer), scaler.update):
        with pytest.raises(AssertionError, match="_scale is None"):
            call()
    scaler.scale(torch.ones(()))
    with pytest.raises(AssertionError, match=r"No inf checks were recorded prior to update\."):
        scaler.update()


@BOTH
def test_step_with_no_grads_is_an_error(make_scaler) -> None:
    scaler = make_scaler()
    _, optimizer = one_param()
    scaler.scale(torch.ones(()))
    with pytest.raises(AssertionError, match=r"No inf checks were recorded for this optimizer\."):
        scaler.step(optimizer)


@BOTH
def test_closure_is_refused(make_scaler) -> None:
    scaler = make_scaler()
    param, optimizer = one_param()
    scaler.scale(torch.ones(()))
    param.grad = torch.ones(4)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(optimizer, closure=lambda: None)


# --------------------------------------------------------------------------- update


@BOTH
def test_update_backs_off_on_inf_and_grows_after_the_interval(make_scaler) -> None:
    scaler = make_scaler(init_scale=4.0, growth_interval=3)
    param, optimizer = one_param()
    history = []
    for step in range(9):
        scaler.scale(torch.ones(()))
        param.grad = torch.full((4,), float("inf") if step == 4 else 1.0)
        scaler.step(optimizer)
        scaler.update()
        history.append(scaler.get_scale())
    # Growth after 3 clean steps; an overflow halves and restarts the count.
    assert history == [4.0, 4.0, 8.0, 8.0, 4.0, 4.0, 4.0, 8.0, 8.0]


@BOTH
def test_update_with_new_scale_float_and_tensor(make_scaler) -> None:
    scaler = make_scaler()
    scaler.scale(torch.ones(()))
    scaler.update(128.0)
    assert scaler.get_scale() == 128.0
    new = torch.tensor(32.0)
    scaler.update(new)
    new.fill_(1.0)  # copied, not aliased
    assert scaler.get_scale() == 32.0


@BOTH
@pytest.mark.parametrize(
    "bad",
    [torch.ones(2), torch.ones((), requires_grad=True)],
    ids=["two-elements", "requires-grad"],
)
def test_update_rejects_a_bad_new_scale_tensor(make_scaler, bad: torch.Tensor) -> None:
    scaler = make_scaler()
    scaler.scale(torch.ones(()))
    with pytest.raises(AssertionError, match="new_scale should be a float or a 1-element"):
        scaler.update(bad)


def test_scale_is_updated_in_place() -> None:
    scaler = GradScaler("cpu", min_scale=1.0, hysteresis=2)
    param, optimizer = one_param()
    scaler.scale(torch.ones(()))
    scale_tensor, pointer = scaler._scale, scaler._scale.data_ptr()
    for value in (float("inf"), float("inf"), 1.0):
        scaler.scale(torch.ones(()))
        param.grad = torch.full((4,), value)
        scaler.step(optimizer)
        scaler.update()
    scaler.update(3.0)
    assert scaler._scale is scale_tensor
    assert scaler._scale.data_ptr() == pointer
    assert scale_tensor.item() == 3.0


@BOTH
def test_a_scale_that_never_overflows_grows_every_interval(make_scaler) -> None:
    scaler = make_scaler(init_scale=1.0, growth_interval=2)
    param, optimizer = one_param()
    for _ in range(10):
        scaler.scale(torch.ones(()))
        param.grad = torch.ones(4) * scaler._scale  # a true gradient of 1
        assert scaler.step(optimizer) is None  # SGD returns None: stepped
        scaler.update()
    assert scaler.get_scale() == 2.0**5
    assert param.tolist() == [-9.0] * 4


# --------------------------------------------------------------------------- scale()


def test_scale_multiplies_nested_outputs_and_keeps_their_types() -> None:
    scaler = GradScaler("cpu", init_scale=4.0)
    a, b, c = torch.ones(2), torch.full((2,), 2.0), torch.full((1,), 3.0)
    scaled = scaler.scale([a, (b, [c])])
    assert isinstance(scaled, list)
    assert isinstance(scaled[1], tuple)
    assert scaled[0].tolist() == [4.0, 4.0]
    assert scaled[1][0].tolist() == [8.0, 8.0]
    assert scaled[1][1][0].tolist() == [12.0]
    lazily = scaler.scale(t for t in (a, b))
    assert [t.tolist() for t in lazily] == [[4.0, 4.0], [8.0, 8.0]]
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        scaler.scale([a, 3])


def test_scale_creates_an_fp32_scale_on_the_outputs_device() -> None:
    scaler = GradScaler("cpu")
    scaled = scaler.scale(torch.ones(3, dtype=torch.float16))
    assert scaler._scale.dtype == torch.float32
    assert scaler._scale.device.type == "cpu"
    # A 0-dim fp32 scale does not promote: fp16 outputs stay fp16, and at the default 2**16
    # even a 1 overflows, one reason why the first steps are often skipped.
    assert scaled.dtype == torch.float16
    assert scaled.isinf().all()


# --------------------------------------------------------------------------- skipping


@BOTH
def test_an_overflowing_optimizer_skips_while_the_other_steps(make_scaler) -> None:
    scaler = make_scaler(init_scale=2.0)
    first, first_opt = one_param()
    second, second_opt = one_param()
    scaler.scale(torch.ones(()))
    first.grad = torch.full((4,), float("inf"))
    second.grad = torch.full((4,), 2.0)
    assert scaler.step(first_opt) is None
    scaler.step(second_opt)
    scaler.update()
    assert first.tolist() == [1.0] * 4  # skipped
    assert second.tolist() == [0.0] * 4  # stepped with the unscaled grad 1
    assert scaler.get_scale() == 1.0  # one backoff for the iteration


def test_multiple_models_and_optimizers_match_torch() -> None:
    models = [make_model(0), make_model(1)]
    twins = [twin(m) for m in models]
    ours = GradScaler("cpu", growth_interval=2)
    reference = torch.amp.GradScaler("cpu", growth_interval=2)
    runs = []
    for group, scaler in ((models, ours), (twins, reference)):
        optimizers = [
            torch.optim.SGD(group[0].parameters(), lr=0.1, momentum=0.5),
            torch.optim.Adam(group[1].parameters(), lr=1e-2),
        ]
        runs.append((group, optimizers, scaler))
    for step in range(8):
        for group, optimizers, scaler in runs:
            for opt in optimizers:
                opt.zero_grad()
            inputs, target = torch.randn(8, 8, generator=torch.Generator().manual_seed(step)), None
            with torch.autocast("cpu", dtype=torch.float16):
                loss0 = group[0](inputs).float().square().mean()
                loss1 = group[1](inputs).float().abs().mean()
            scaler.scale(loss0 + loss1).backward()
            if step in (2, 5):
                poison_grads(group[step % 2], float("inf"))
            scaler.unscale_(optimizers[0])
            for opt in optimizers:
                scaler.step(opt)
            scaler.update()
            del target
        assert ours.get_scale() == reference.get_scale()
    for mine, theirs in zip(models, twins, strict=True):
        for p, q in zip(mine.parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(p, q, atol=1e-7, rtol=1e-5)


# --------------------------------------------------------------------------- training patterns


def train_pattern(scaler, pattern: str, steps: int = 6) -> torch.nn.Module:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        optimizer.zero_grad()
        inputs = torch.randn(16, 8, generator=torch.Generator().manual_seed(step))
        if pattern == "accumulate":
            for chunk in inputs.chunk(4):
                with torch.autocast("cpu", dtype=torch.float16):
                    loss = model(chunk).float().square().mean() / 4
                scaler.scale(loss).backward()
            scaler.step(optimizer)
        elif pattern == "clip_unscaled":
            forward_backward(model, scaler, step)
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            scaler.step(optimizer)
        elif pattern == "clip_scaled":
            forward_backward(model, scaler, step)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1 * scaler.get_scale())
            scaler.step(optimizer)
        elif pattern == "penalty":
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(inputs).float().square().mean()
            scaled_grads = torch.autograd.grad(
                scaler.scale(loss), list(model.parameters()), create_graph=True
            )
            inv_scale = 1.0 / scaler.get_scale()
            grads = [g * inv_scale for g in scaled_grads]
            with torch.autocast("cpu", dtype=torch.float16):
                penalty = sum(g.square().sum() for g in grads).sqrt()
                total = loss + penalty
            scaler.scale(total).backward()
            scaler.step(optimizer)
        scaler.update()
    return model


@pytest.mark.parametrize("pattern", ["accumulate", "clip_unscaled", "clip_scaled", "penalty"])
def test_training_patterns_match_torch(pattern: str) -> None:
    ours = train_pattern(GradScaler("cpu", growth_interval=2), pattern)
    theirs = train_pattern(torch.amp.GradScaler("cpu", growth_interval=2), pattern)
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-7, rtol=1e-5)


def test_clipping_scaled_grads_by_scaled_norm_equals_clipping_unscaled() -> None:
    unscaled = train_pattern(GradScaler("cpu"), "clip_unscaled")
    scaled = train_pattern(GradScaler("cpu"), "clip_scaled")
    for p, q in zip(unscaled.parameters(), scaled.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-4)


def test_accumulation_equals_one_big_batch() -> None:
    accumulated = train_pattern(GradScaler("cpu"), "accumulate", steps=1)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    inputs = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    with torch.autocast("cpu", dtype=torch.float16):
        model(inputs).float().square().mean().backward()
    optimizer.step()
    for p, q in zip(accumulated.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-4, rtol=1e-3)


@BOTH
def test_grads_changed_between_unscale_and_step_are_not_rechecked(make_scaler) -> None:
    # The inf decision is made at unscale_(); step() trusts it, as torch does.
    scaler = make_scaler()
    param, optimizer = one_param()
    scaler.scale(torch.ones(()))
    param.grad = torch.ones(4)
    scaler.unscale_(optimizer)
    param.grad = torch.full((4,), float("inf"))
    scaler.step(optimizer)
    scaler.update()
    assert torch.isinf(param).all()
    assert scaler.get_scale() == 2.0**16


# --------------------------------------------------------------------------- sparse


@BOTH
def test_sparse_grads_are_unscaled_and_checked(make_scaler) -> None:
    scaler = make_scaler(init_scale=2.0)
    param = torch.nn.Parameter(torch.zeros(5))
    optimizer = torch.optim.SGD([param], lr=1.0)
    scaler.scale(torch.ones(()))
    indices = torch.tensor([[0, 2, 2]])
    param.grad = torch.sparse_coo_tensor(
        indices, torch.tensor([2.0, 4.0, 6.0]), (5,), check_invariants=True
    )
    scaler.unscale_(optimizer)
    assert param.grad.to_dense().tolist() == [1.0, 0.0, 5.0, 0.0, 0.0]
    scaler.step(optimizer)
    scaler.update()
    assert param.tolist() == [-1.0, 0.0, -5.0, 0.0, 0.0]
    scaler.scale(torch.ones(()))
    param.grad = torch.sparse_coo_tensor(
        indices, torch.tensor([1.0, float("inf"), 1.0]), (5,), check_invariants=True
    )
    scaler.step(optimizer)
    scaler.update()
    assert param.tolist() == [-1.0, 0.0, -5.0, 0.0, 0.0]
    assert scaler.get_scale() == 1.0


@BOTH
def test_fp16_sparse_grads_are_coalesced_before_the_check(make_scaler) -> None:
    # 60000 + 60000 at one index overflows fp16 only once summed.
    scaler = make_scaler()
    param = torch.nn.Parameter(torch.zeros(3, dtype=torch.float16))
    optimizer = torch.optim.SGD([param], lr=1.0)
    scaler.scale(torch.ones(()))
    values = torch.tensor([60000.0, 60000.0], dtype=torch.float16)
    param.grad = torch.sparse_coo_tensor(
        torch.tensor([[1, 1]]), values, (3,), check_invariants=True
    )
    found = scaler._unscale_grads_(optimizer, torch.ones(()), torch.zeros(()), True)
    assert param.grad.is_coalesced()
    assert sum(f.item() for f in found.values()) == 1.0


# --------------------------------------------------------------------------- fused contract


class ScalingAwareSGD(torch.optim.SGD):
    """A stand-in for an optimizer that unscales and skips by itself, recording what it got."""

    def __init__(self, params) -> None:
        super().__init__(params, lr=1.0)
        self._step_supports_amp_scaling = True
        self.received: list[tuple] = []

    def step(self, closure=None):
        self.received.append((self.grad_scale, self.found_inf))
        return "stepped"


def test_fused_contract_sets_grad_scale_and_found_inf_then_removes_them() -> None:
    scaler = GradScaler("cpu", init_scale=4.0)
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = ScalingAwareSGD([param])
    scaler.scale(torch.ones(()))
    param.grad = torch.full((2,), float("inf"))
    assert scaler.step(optimizer) == "stepped"
    ((grad_scale, found_inf),) = optimizer.received
    assert grad_scale.item() == 4.0
    assert found_inf.item() == 1.0
    assert not hasattr(optimizer, "grad_scale")
    assert not hasattr(optimizer, "found_inf")
    assert param.grad.isinf().all()  # checked, not unscaled: the optimizer does that
    scaler.update()
    assert scaler.get_scale() == 2.0


def test_fused_contract_after_unscale_passes_no_grad_scale() -> None:
    scaler = GradScaler("cpu", init_scale=4.0)
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = ScalingAwareSGD([param])
    scaler.scale(torch.ones(()))
    param.grad = torch.full((2,), 8.0)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    ((grad_scale, found_inf),) = optimizer.received
    assert grad_scale is None
    assert found_inf.item() == 0.0
    assert param.grad.tolist() == [2.0, 2.0]


class PassItselfOptimizer(torch.optim.SGD):
    """The deprecated contract: step() takes the scaler as a keyword argument."""

    def __init__(self, params) -> None:
        super().__init__(params, lr=1.0)
        self._step_supports_amp_scaling = True
        self.scalers: list = []

    def step(self, closure=None, grad_scaler=None):
        self.scalers.append(grad_scaler)


@BOTH
def test_passing_itself_warns_and_passes_the_scaler(make_scaler) -> None:
    scaler = make_scaler()
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = PassItselfOptimizer([param])
    scaler.scale(torch.ones(()))
    param.grad = torch.ones(2)
    with pytest.warns(FutureWarning, match="GradScaler is going to stop passing itself"):
        scaler.step(optimizer)
    assert optimizer.scalers == [scaler]


# --------------------------------------------------------------------------- construction


def test_torch_cuda_amp_style_construction_is_deprecated_in_torch() -> None:
    with pytest.warns(FutureWarning, match=r"torch.cuda.amp.GradScaler\(args...\)` is deprecated"):
        torch.cuda.amp.GradScaler(enabled=False)


def test_ours_has_one_constructor_and_cpu_construction_is_silent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GradScaler("cpu")
        GradScaler(device="cpu", enabled=False)
    assert not hasattr(GradScaler, "__wrapped__")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_requested_without_cuda_warns_and_disables() -> None:
    with pytest.warns(UserWarning, match="CUDA is not available.  Disabling."):
        scaler = GradScaler()
    assert not scaler.is_enabled()
    param, optimizer = one_param()
    loss = torch.ones(())
    assert scaler.scale(loss) is loss
    param.grad = torch.ones(4)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    assert param.tolist() == [0.0] * 4
    assert scaler.get_scale() == 1.0
    assert scaler.state_dict() == {}


def test_defaults_and_getters_setters_match_torch() -> None:
    ours, theirs = GradScaler("cpu"), torch.amp.GradScaler("cpu")
    for getter in ("get_growth_factor", "get_backoff_factor", "get_growth_interval", "get_scale"):
        assert getattr(ours, getter)() == getattr(theirs, getter)()
    ours.set_growth_factor(3.0)
    ours.set_backoff_factor(0.25)
    ours.set_growth_interval(7)
    assert (ours.get_growth_factor(), ours.get_backoff_factor(), ours.get_growth_interval()) == (
        3.0,
        0.25,
        7,
    )
    assert ours.is_enabled()


def test_step_returns_the_optimizers_return_value() -> None:
    class Returning(torch.optim.SGD):
        def step(self, closure=None):
            super().step()
            return 42

    scaler = GradScaler("cpu")
    param = torch.nn.Parameter(torch.ones(2))
    scaler.scale(torch.ones(()))
    param.grad = torch.ones(2)
    assert scaler.step(Returning([param], lr=1.0)) == 42


def test_skipped_step_keeps_model_identical_to_torch_under_autocast() -> None:
    model = make_model()
    reference = twin(model)
    for m, scaler in ((model, GradScaler("cpu")), (reference, torch.amp.GradScaler("cpu"))):
        optimizer = torch.optim.Adam(m.parameters())
        forward_backward(m, scaler, 0)
        poison_grads(m, float("nan"))
        scaler.step(optimizer)
        scaler.update()
        assert scaler.get_scale() == 2.0**15
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        assert torch.equal(p, q)
