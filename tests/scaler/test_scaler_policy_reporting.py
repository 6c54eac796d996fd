"""How a recorded below-one event reaches the user: once, at the user's line, and never from
saving a checkpoint — on both the host path (non-fused SGD) and the device path (fused Adam)."""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable

import pytest
import torch
from scaler_harness import forward_backward, make_model, poison_grads

from scaler import GradScaler, ScaleBelowOneError, ScaleBelowOneWarning
from scaler._scale_update import give_up_capturing
from scaler._validation import HYSTERESIS_KEY

PATHS = pytest.mark.parametrize("fused", [False, True], ids=["host_path", "device_path"])
#: The calls that report a pending event, each called from this file.
READERS: dict[str, Callable[[GradScaler], object]] = {
    "peek_scale": lambda scaler: scaler.peek_scale(),
    "get_scale": lambda scaler: scaler.get_scale(),
    "stats": lambda scaler: scaler.stats(),
    "check": lambda scaler: scaler.check(),
}


def collapsing(fused: bool, pattern: str = "x", **options) -> tuple[GradScaler, Callable]:
    """A scaler at scale 1 after ``pattern`` ("x" = overflow); and a function running more."""
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused, foreach=not fused)
    scaler = GradScaler("cpu", init_scale=1.0, **options)

    def run(steps: str) -> None:
        for step, char in enumerate(steps):
            optimizer.zero_grad()
            forward_backward(model, scaler, step)
            if char == "x":
                poison_grads(model, float("inf"))
            scaler.step(optimizer)
            scaler.update()

    run(pattern)
    return scaler, run


@PATHS
@pytest.mark.parametrize("reader", sorted(READERS))
def test_each_reader_warns_once_at_the_callers_line(fused: bool, reader: str) -> None:
    scaler, _ = collapsing(fused, below_one="warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        READERS[reader](scaler)
        READERS[reader](scaler)  # reported already: silent
    below_one = [w for w in caught if w.category is ScaleBelowOneWarning]
    assert [w.filename for w in below_one] == [__file__]


@PATHS
def test_state_dict_warns_at_the_callers_line(fused: bool) -> None:
    scaler, _ = collapsing(fused, below_one="warn")
    with pytest.warns(ScaleBelowOneWarning) as caught:
        scaler.state_dict()
    assert caught[0].filename == __file__


@PATHS
@pytest.mark.parametrize("reader", sorted(READERS))
def test_raise_survives_saving_and_raises_at_the_next_reader(fused: bool, reader: str) -> None:
    scaler, _ = collapsing(fused, below_one="raise")
    saved = scaler.state_dict()  # a collapsing run can be saved ...
    restored = pickle.loads(pickle.dumps(scaler))  # ... and pickled
    assert saved["scale"] == 0.5
    with pytest.raises(ScaleBelowOneError, match="fell below 1"):
        READERS[reader](scaler)  # ... and still hears about it
    READERS[reader](scaler)  # once
    assert restored.get_scale() == 0.5


@PATHS
def test_a_new_event_after_a_report_is_reported_again(fused: bool) -> None:
    scaler, run = collapsing(fused, below_one="raise")
    with pytest.raises(ScaleBelowOneError):
        scaler.peek_scale()
    run("x")
    with pytest.raises(ScaleBelowOneError, match=r"now 0\.25"):
        scaler.peek_scale()


@PATHS
def test_a_floor_hit_at_exactly_one_says_floor(fused: bool) -> None:
    scaler, _ = collapsing(fused, "x", min_scale=1.0, below_one="raise")
    with pytest.raises(ScaleBelowOneError, match=r"hit the min_scale floor \(now 1\)"):
        scaler.check()


def test_future_warning_of_a_step_taking_grad_scaler_points_at_the_caller() -> None:
    param = torch.nn.Parameter(torch.ones(2))

    class TakesScaler(torch.optim.SGD):
        _step_supports_amp_scaling = True

        def step(self, closure=None, grad_scaler=None):  # the pre-2.0 fused contract
            return None

    optimizer = TakesScaler([param], lr=0.1)
    scaler = GradScaler("cpu")
    scaler.scale(torch.ones(()))
    param.grad = torch.ones(2)
    with pytest.warns(FutureWarning, match="stop passing itself") as caught:
        scaler.step(optimizer)
    assert caught[0].filename == __file__


def test_cuda_unavailable_warning_points_at_the_caller() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: the scaler is not disabled")
    with pytest.warns(UserWarning, match="CUDA is not available") as caught:
        GradScaler("cuda")
    assert caught[0].filename == __file__


@pytest.mark.parametrize("loaded", [2, 5])
def test_a_loaded_hysteresis_tracker_above_this_scalers_hysteresis_is_capped(loaded: int) -> None:
    # A checkpoint from a run with more hysteresis must not buy more tolerance here: with
    # hysteresis=2 the second overflow backs off, whatever the checkpoint held.
    source = GradScaler("cpu", init_scale=8.0, hysteresis=5).state_dict()
    source[HYSTERESIS_KEY] = loaded
    scaler = GradScaler("cpu", hysteresis=2)
    scaler.load_state_dict(source)
    assert scaler.state_dict()[HYSTERESIS_KEY] == 2
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([param], lr=0.1)
    history = []
    for _ in range(2):
        scaler.scale(torch.ones(()))
        param.grad = torch.full((2,), float("inf"))
        scaler.step(optimizer)
        scaler.update()
        history.append(scaler.get_scale())
    assert history == [8.0, 4.0]


def test_fused_step_skips_when_several_devices_overflow(monkeypatch) -> None:
    # torch's fused kernels skip only when found_inf == 1.0: the per-device flags summed over
    # two devices that both overflowed (2.0) must be clamped to 1, or the step runs with infs.
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=True)
    scaler = GradScaler("cpu")
    unscale = scaler._unscale_grads_

    def as_if_on_two_devices(optimizer, inv_scale, found_inf, allow_fp16):
        (flag,) = unscale(optimizer, inv_scale, found_inf, allow_fp16).values()
        return {torch.device("cpu"): flag, torch.device("cpu", 1): flag.clone()}

    monkeypatch.setattr(scaler, "_unscale_grads_", as_if_on_two_devices)
    forward_backward(model, scaler, 0)
    poison_grads(model, float("inf"))
    before = [p.detach().clone() for p in model.parameters()]
    scaler.step(optimizer)
    scaler.update()
    assert all(torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
    assert bool(scaler.step_skipped(optimizer))


def test_a_failed_cuda_graph_capture_is_said_once_at_the_callers_line() -> None:
    # The CUDA path itself is tested in tests/gpu; here the part that runs everywhere.
    scaler = GradScaler("cpu")
    scaler.scale(torch.ones(()))
    state = scaler._state
    with pytest.warns(RuntimeWarning, match=r"could not capture .*\(capture refused\)") as caught:
        give_up_capturing(state, RuntimeError("capture refused"))
    assert caught[0].filename == __file__
    assert state.update_graph is False  # _update_graph_for never tries again
