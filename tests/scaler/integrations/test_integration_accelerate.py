"""use_ampscale with a real accelerate loop on CPU, before and after ``prepare()``.

accelerate builds no scaler on CPU, so each test installs ``torch.amp.GradScaler("cpu")`` as
``Accelerator(mixed_precision="fp16")`` installs torch's scaler on a GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from framework_required import need
from overflow_injection import GradientOverflow, Overflow

need("accelerate")

from accelerate import Accelerator  # noqa: E402
from accelerate.tracking import GeneralTracker  # noqa: E402

from scaler import GradScaler, SyncCounter  # noqa: E402
from scaler.integrations.accelerate import use_ampscale  # noqa: E402


def _accelerator(**torch_scaler: float) -> Accelerator:
    accelerator = Accelerator(mixed_precision="fp16", cpu=True)
    accelerator.scaler = torch.amp.GradScaler("cpu", **torch_scaler)
    accelerator.native_amp = True  # autocast fp16, as on a GPU
    return accelerator


def _model_and_optimizer(fused: bool = False) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused)


def _train(accelerator: Accelerator, model: torch.nn.Module, optimizer, steps: int) -> None:
    inputs, targets = torch.randn(16, 8), torch.randn(16, 1)
    for _ in range(steps):
        with accelerator.autocast():
            loss = torch.nn.functional.mse_loss(model(inputs).float(), targets)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()


@pytest.mark.parametrize("when", ["before_prepare", "after_prepare"])
def test_every_prepared_optimizer_uses_the_new_scaler(when: str) -> None:
    accelerator = _accelerator(init_scale=256.0, growth_interval=2)
    original = accelerator.scaler
    model, optimizer = _model_and_optimizer()
    _, other_optimizer = _model_and_optimizer()
    if when == "before_prepare":
        scaler = use_ampscale(accelerator)
    model, optimizer, other_optimizer = accelerator.prepare(model, optimizer, other_optimizer)
    if when == "after_prepare":
        scaler = use_ampscale(accelerator)
    assert scaler is original is accelerator.scaler
    assert type(scaler) is GradScaler
    assert optimizer.scaler is scaler
    assert other_optimizer.scaler is scaler
    Overflow(model[0], times=1)
    _train(accelerator, model, optimizer, steps=5)
    stats = scaler.stats()
    # 256 → 128 at the overflow, then 2 clean steps per doubling: 256, 512.
    assert (stats.steps, stats.skipped_steps, stats.scale) == (5, 1, 512.0)
    assert optimizer.step_was_skipped is False


def test_kwargs_override_the_carried_settings() -> None:
    accelerator = _accelerator(init_scale=256.0, growth_interval=2)
    scaler = use_ampscale(accelerator, growth_interval=100, min_scale=1.0, hysteresis=2)
    assert scaler.get_growth_interval() == 100
    assert scaler.get_scale() == 256.0
    model, optimizer = accelerator.prepare(*_model_and_optimizer())
    Overflow(model[0], times=-1)
    _train(accelerator, model, optimizer, steps=12)
    stats = scaler.stats()
    assert stats.scale == 1.0
    assert stats.floor_hits > 0


def test_init_scale_applies_until_the_scaler_has_stepped() -> None:
    accelerator = _accelerator(init_scale=256.0)
    assert use_ampscale(accelerator, init_scale=8.0).get_scale() == 8.0

    accelerator = _accelerator(init_scale=256.0)
    model, optimizer = accelerator.prepare(*_model_and_optimizer())
    _train(accelerator, model, optimizer, steps=1)
    assert use_ampscale(accelerator, init_scale=8.0).get_scale() == 256.0


def test_state_a_stepped_torch_scaler_reached_is_carried_over() -> None:
    accelerator = _accelerator(init_scale=64.0, growth_interval=3)
    model, optimizer = accelerator.prepare(*_model_and_optimizer())
    _train(accelerator, model, optimizer, steps=4)  # 64 → 128 after 3, tracker 1
    torch_state = accelerator.scaler.state_dict()
    scaler = use_ampscale(accelerator)
    assert {key: scaler.state_dict()[key] for key in torch_state} == torch_state
    _train(accelerator, model, optimizer, steps=2)
    assert scaler.get_scale() == 256.0


def test_save_state_and_load_state_round_trip_the_counters(tmp_path: Path) -> None:
    accelerator = _accelerator(init_scale=1024.0)
    scaler = use_ampscale(accelerator)
    model, optimizer = accelerator.prepare(*_model_and_optimizer())
    Overflow(model[0], times=2)
    _train(accelerator, model, optimizer, steps=3)
    accelerator.save_state(str(tmp_path))
    saved = scaler.stats()

    accelerator = _accelerator(init_scale=1.0)
    fresh = use_ampscale(accelerator)  # before load_state, so it loads our counters too
    model, optimizer = accelerator.prepare(*_model_and_optimizer())
    accelerator.load_state(str(tmp_path))
    assert fresh.stats() == saved
    assert (saved.scale, saved.skipped_steps) == (256.0, 2)


def test_a_scaler_already_ours_is_returned_unchanged() -> None:
    accelerator = _accelerator()
    scaler = use_ampscale(accelerator)
    assert use_ampscale(accelerator) is scaler


def test_an_accelerator_without_a_scaler_is_a_clear_error() -> None:
    accelerator = Accelerator(mixed_precision="fp16", cpu=True)
    with pytest.raises(ValueError, match=r"no loss scaler to replace \(mixed_precision='fp16'"):
        use_ampscale(accelerator)
    with pytest.raises(TypeError, match=r"expected an accelerate\.Accelerator"):
        use_ampscale(object())  # type: ignore[arg-type]


def test_replacing_mid_iteration_is_refused() -> None:
    accelerator = _accelerator()
    model, _ = accelerator.prepare(*_model_and_optimizer())
    loss = model(torch.randn(2, 8)).sum()
    accelerator.backward(loss)
    accelerator.unscale_gradients()
    with pytest.raises(RuntimeError, match="between iterations"):
        use_ampscale(accelerator)


def test_a_fused_step_through_accelerate_makes_no_sync() -> None:
    accelerator = _accelerator()
    use_ampscale(accelerator)
    model, optimizer = accelerator.prepare(*_model_and_optimizer(fused=True))
    _train(accelerator, model, optimizer, steps=1)  # first step: lazy state creation
    with SyncCounter() as syncs:
        _train(accelerator, model, optimizer, steps=5)
    assert syncs.count == 0


def _train_scheduled(accelerator: Accelerator, model, optimizer, scheduler, steps: int) -> None:
    inputs, targets = torch.randn(16, 8), torch.randn(16, 1)
    for _ in range(steps):
        with accelerator.autocast():
            loss = torch.nn.functional.mse_loss(model(inputs).float(), targets)
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
@pytest.mark.parametrize("when", ["before_prepare", "after_prepare"])
def test_a_skipped_step_does_not_advance_the_prepared_scheduler(when: str, fused: bool) -> None:
    accelerator = _accelerator(init_scale=256.0)
    model, optimizer = _model_and_optimizer(fused=fused)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    if when == "before_prepare":
        use_ampscale(accelerator)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    if when == "after_prepare":
        use_ampscale(accelerator)
    Overflow(model[0], times=2)
    _train_scheduled(accelerator, model, optimizer, scheduler, steps=6)
    assert accelerator.scaler.stats().skipped_steps == 2
    assert scheduler.get_last_lr()[0] == pytest.approx(1e-3 / 5, rel=1e-6)
    assert scheduler.scheduler.last_epoch == 4  # 6 steps, 2 skipped (after the read above)
    saved = scheduler.state_dict()
    assert saved["last_epoch"] == 4
    assert "step" not in saved  # only the scheduler's own state is saved


def test_torch_scaler_with_a_fused_optimizer_advances_the_schedule_on_skips() -> None:
    # The failure use_ampscale fixes (accelerate #4242), shown on accelerate itself.
    accelerator = _accelerator(init_scale=256.0)
    model, optimizer = _model_and_optimizer(fused=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    Overflow(model[0], times=2)
    _train_scheduled(accelerator, model, optimizer, scheduler, steps=6)
    assert accelerator.scaler.get_scale() == 64.0  # two skips
    assert scheduler.scheduler.last_epoch == 6


def test_skip_aware_schedule_can_be_turned_off() -> None:
    accelerator = _accelerator(init_scale=256.0)
    use_ampscale(accelerator, skip_aware_schedule=False)
    model, optimizer = _model_and_optimizer(fused=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    Overflow(model[0], times=2)
    _train_scheduled(accelerator, model, optimizer, scheduler, steps=6)
    assert scheduler.scheduler.last_epoch == 6


def test_a_fused_step_with_a_skip_aware_schedule_makes_no_sync() -> None:
    accelerator = _accelerator(init_scale=256.0)
    use_ampscale(accelerator)
    model, optimizer = _model_and_optimizer(fused=True)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    _train_scheduled(accelerator, model, optimizer, scheduler, steps=1)
    with SyncCounter() as syncs:
        _train_scheduled(accelerator, model, optimizer, scheduler, steps=5)
    assert syncs.count == 0
    assert accelerator.scaler.stats().skipped_steps == 0
    assert scheduler.state_dict()["last_epoch"] == 6


# --------------------------------------------------------------------------- issue 45


class Recorder(GeneralTracker):
    """An in-memory tracker: what ``accelerator.log`` wrote, step by step."""

    name = "recorder"
    requires_logging_directory = False

    def __init__(self) -> None:
        super().__init__()
        self.logged: list[tuple[int | None, dict]] = []

    @property
    def tracker(self) -> Recorder:
        return self

    def log(self, values: dict, step: int | None = None, **kwargs: object) -> None:
        self.logged.append((step, dict(values)))


def _tracked_accelerator(when: str, track: bool = True):
    recorder = Recorder()
    accelerator = Accelerator(mixed_precision="fp16", cpu=True, log_with=[recorder])
    accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=64.0)
    accelerator.native_amp = True
    accelerator.init_trackers("overflows")
    model, optimizer = _model_and_optimizer(fused=True)
    if when == "before_prepare":
        use_ampscale(accelerator, track_overflows=track)
    model, optimizer = accelerator.prepare(model, optimizer)
    if when == "after_prepare":
        use_ampscale(accelerator, track_overflows=track)
    return accelerator, model, optimizer, recorder


@pytest.mark.parametrize("when", ["before_prepare", "after_prepare"])
def test_accelerator_log_carries_the_parameters_whose_gradients_overflowed(when: str) -> None:
    accelerator, model, optimizer, recorder = _tracked_accelerator(when)
    GradientOverflow(model[2].weight, {1, 3})
    for step in range(5):
        _train(accelerator, model, optimizer, steps=1)
        accelerator.log({"loss": 0.0}, step=step)
    assert [step for step, _ in recorder.logged] == [0, 1, 2, 3, 4]
    logged = [values for _, values in recorder.logged]
    assert [values["overflowed_tensors"] for values in logged] == [0, 1, 1, 1, 1]
    assert [values.get("overflow/2.weight/nonfinite_steps") for values in logged] == [
        None,
        1,
        1,
        2,
        2,
    ]
    assert logged[-1]["overflow/2.weight/first_step"] == 1
    assert logged[-1]["overflow/2.weight/last_step"] == 3
    assert all(values["loss"] == 0.0 for values in logged)  # the user's values are kept
    assert accelerator.scaler.stats().skipped_steps == 2


def test_accelerator_log_is_unchanged_without_tracking() -> None:
    accelerator, model, optimizer, recorder = _tracked_accelerator("after_prepare", track=False)
    _train(accelerator, model, optimizer, steps=1)
    accelerator.log({"loss": 1.0}, step=0)
    assert recorder.logged == [(0, {"loss": 1.0})]


def test_tracked_fused_steps_through_accelerate_make_no_sync() -> None:
    accelerator, model, optimizer, _ = _tracked_accelerator("after_prepare")
    GradientOverflow(model[2].weight, {2})
    _train(accelerator, model, optimizer, steps=1)
    with SyncCounter() as syncs:
        _train(accelerator, model, optimizer, steps=5)
    assert syncs.count == 0
    with SyncCounter() as syncs:
        accelerator.log({}, step=6)
    assert syncs.count == 1  # the report, at the log
