"""LossScaleCallback with the real HF Trainer on CPU: a 2-layer GPT-2 built from a config.

On CPU accelerate builds no scaler for fp16 (and does not autocast), so most tests install a
``torch.amp.GradScaler("cpu")`` in the Trainer's accelerator and turn on its native AMP, which is
what ``Accelerator(mixed_precision="fp16")`` does on a GPU; the callback must replace it.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from framework_required import need
from overflow_injection import GradientOverflow, Overflow

need("transformers")
need("accelerate")

from scaler_reads import counting_reads, syncs_per_read  # noqa: E402
from transformers import (  # noqa: E402
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from scaler import GradScaler, ScaleBelowOneWarning, SyncCounter  # noqa: E402
from scaler.integrations.transformers import LossScaleCallback  # noqa: E402

FIELDS = ("loss_scale", "skipped_steps", "steps_below_one", "floor_hits")


def _data() -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 32, (16, 8), generator=generator)
    return [{"input_ids": row, "labels": row} for row in ids]


class Probe(TrainerCallback):
    """Records what the Trainer's scaler holds when training begins and every log it sees."""

    def __init__(self) -> None:
        self.at_begin: dict[str, Any] | None = None
        self.stats_at_begin: Any = None
        self.logs: list[dict[str, Any]] = []

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        scaler = kwargs["optimizer"].scaler
        self.at_begin = scaler.state_dict()
        self.stats_at_begin = scaler.stats() if isinstance(scaler, GradScaler) else None

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        self.logs.append(dict(logs))


def make_trainer(
    out: Path,
    callbacks: list[TrainerCallback],
    *,
    torch_scaler: dict[str, Any] | None = None,
    overflow_times: int = 0,
    **args: Any,
) -> Trainer:
    """A Trainer with fp16=True on CPU; ``torch_scaler`` installs torch's scaler with those
    arguments as accelerate would on a GPU."""
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2, n_embd=16, n_head=2, vocab_size=32, n_positions=8, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    if overflow_times:
        Overflow(model.transformer.h[0].mlp, overflow_times)
    settings: dict[str, Any] = {
        "fp16": True,
        "use_cpu": True,
        "per_device_train_batch_size": 4,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "disable_tqdm": True,
        "optim": "adamw_torch",
        **args,
    }
    trainer = Trainer(
        model=model,
        args=TrainingArguments(str(out), **settings),
        train_dataset=_data(),
        callbacks=callbacks,
    )
    if torch_scaler is not None:
        trainer.accelerator.scaler = torch.amp.GradScaler("cpu", **torch_scaler)
        trainer.accelerator.native_amp = True  # autocast fp16 and unscale before clipping
    return trainer


def _train_logs(trainer: Trainer) -> list[dict[str, Any]]:
    return [entry for entry in trainer.state.log_history if "loss" in entry]


def test_without_a_scaler_the_callback_warns_and_adds_nothing(tmp_path: Path) -> None:
    callback = LossScaleCallback()
    trainer = make_trainer(tmp_path, [callback], max_steps=2)
    with pytest.warns(RuntimeWarning, match="uses no loss scaler"):
        trainer.train()
    assert trainer.accelerator.scaler is None
    assert callback.scaler is None
    assert all("loss_scale" not in entry for entry in trainer.state.log_history)


def test_replaces_torch_scaler_in_place_for_accelerator_and_optimizer(tmp_path: Path) -> None:
    callback = LossScaleCallback()
    trainer = make_trainer(
        tmp_path, [callback], max_steps=4, torch_scaler={"init_scale": 512.0, "growth_interval": 3}
    )
    original = trainer.accelerator.scaler
    trainer.train()
    assert trainer.accelerator.scaler is original
    assert type(original) is GradScaler
    assert trainer.optimizer.scaler is original
    assert callback.scaler is original
    stats = original.stats()
    assert stats.steps == 4
    assert stats.scale == 1024.0  # torch's init scale and growth interval carried over
    assert original.get_growth_interval() == 3


def test_logs_carry_the_counters_for_every_logger_and_the_history(tmp_path: Path) -> None:
    probe = Probe()  # a user callback listed before ours still sees the fields
    trainer = make_trainer(
        tmp_path, [probe, LossScaleCallback()], max_steps=3, torch_scaler={"init_scale": 64.0}
    )
    trainer.train()
    step_logs = [log for log in probe.logs if "loss" in log]
    assert len(step_logs) == 3
    for log in step_logs:
        assert {field: log[field] for field in FIELDS} == {
            "loss_scale": 64.0,
            "skipped_steps": 0,
            "steps_below_one": 0,
            "floor_hits": 0,
        }
    assert [entry["loss_scale"] for entry in _train_logs(trainer)] == [64.0, 64.0, 64.0]


def test_init_scale_given_to_the_callback_wins_on_a_fresh_run(tmp_path: Path) -> None:
    trainer = make_trainer(
        tmp_path, [LossScaleCallback(init_scale=8.0)], max_steps=1, torch_scaler={}
    )
    trainer.train()
    assert _train_logs(trainer)[0]["loss_scale"] == 8.0


def test_overflowing_module_drives_scale_below_one_and_warn_policy_fires(tmp_path: Path) -> None:
    callback = LossScaleCallback(below_one="warn")
    trainer = make_trainer(
        tmp_path, [callback], max_steps=5, torch_scaler={"init_scale": 4.0}, overflow_times=-1
    )
    with pytest.warns(ScaleBelowOneWarning) as caught:
        trainer.train()
    below = [w for w in caught if issubclass(w.category, ScaleBelowOneWarning)]
    assert len(below) == 1  # once per episode, not once per step
    message = str(below[0].message)
    assert "fell below 1" in message
    assert "bf16=True" in message
    assert "check_fp16_compat" in message
    assert trainer.state.global_step == 5
    last = _train_logs(trainer)[-1]
    assert last["skipped_steps"] == 5
    assert last["steps_below_one"] == 3  # 4 → 2 → 1 → 0.5 → 0.25 → 0.125
    assert last["loss_scale"] == 0.125
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())


def test_raise_policy_stops_training_with_the_message(tmp_path: Path) -> None:
    callback = LossScaleCallback(below_one="raise")
    trainer = make_trainer(
        tmp_path, [callback], max_steps=20, torch_scaler={"init_scale": 4.0}, overflow_times=-1
    )
    with pytest.warns(ScaleBelowOneWarning, match="stopping training"):
        trainer.train()
    assert trainer.state.global_step == 3  # the first step that left the scale below 1
    assert callback.below_one_message is not None
    assert callback.below_one_message.startswith("stopping training: the loss scale fell below 1")


def test_ignore_policy_neither_warns_nor_stops(tmp_path: Path) -> None:
    trainer = make_trainer(
        tmp_path,
        [LossScaleCallback(below_one="ignore")],
        max_steps=4,
        torch_scaler={"init_scale": 2.0},
        overflow_times=-1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScaleBelowOneWarning)
        trainer.train()
    assert trainer.state.global_step == 4


def test_save_and_resume_keep_the_scale_and_the_counters(tmp_path: Path) -> None:
    first = make_trainer(
        tmp_path,
        [LossScaleCallback()],
        max_steps=4,
        save_strategy="steps",
        save_steps=4,
        torch_scaler={"init_scale": 1024.0},
        overflow_times=2,
    )
    first.train()
    saved = first.accelerator.scaler.stats()
    assert (saved.scale, saved.skipped_steps, saved.steps) == (256.0, 2, 4)

    probe = Probe()
    second = make_trainer(
        tmp_path, [LossScaleCallback(), probe], max_steps=6, torch_scaler={"init_scale": 1024.0}
    )
    second.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    assert probe.stats_at_begin == saved
    end = second.accelerator.scaler.stats()
    assert (end.steps, end.skipped_steps, end.longest_overflow_streak) == (6, 2, 2)


def test_checkpoint_saved_with_torch_scaler_resumes_under_ours(tmp_path: Path) -> None:
    first = make_trainer(
        tmp_path,
        [],
        max_steps=4,
        save_strategy="steps",
        save_steps=4,
        torch_scaler={"init_scale": 64.0, "growth_interval": 3},
    )
    first.train()
    torch_state = first.accelerator.scaler.state_dict()
    assert type(first.accelerator.scaler) is torch.amp.GradScaler
    assert (torch_state["scale"], torch_state["_growth_tracker"]) == (128.0, 1)

    probe = Probe()
    second = make_trainer(
        tmp_path, [LossScaleCallback(), probe], max_steps=6, torch_scaler={"init_scale": 64.0}
    )
    second.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    assert probe.at_begin is not None
    assert {k: probe.at_begin[k] for k in torch_state} == torch_state
    assert probe.stats_at_begin.steps == 0  # torch saved no counters: they start here
    scaler = second.accelerator.scaler
    assert type(scaler) is GradScaler
    assert scaler.get_scale() == 256.0  # 1 + 2 clean steps completed the interval of 3


def test_checkpoint_saved_with_ours_resumes_under_torch(tmp_path: Path) -> None:
    first = make_trainer(
        tmp_path,
        [LossScaleCallback(growth_interval=3)],
        max_steps=4,
        save_strategy="steps",
        save_steps=4,
        torch_scaler={"init_scale": 64.0},
    )
    first.train()
    ours = first.accelerator.scaler.state_dict()

    probe = Probe()
    second = make_trainer(tmp_path, [probe], max_steps=5, torch_scaler={"init_scale": 1.0})
    second.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    assert type(second.accelerator.scaler) is torch.amp.GradScaler
    assert probe.at_begin == {key: ours[key] for key in probe.at_begin}
    assert probe.at_begin["scale"] == 128.0


def _syncs(tmp_path: Path, callbacks: list[TrainerCallback]) -> int:
    trainer = make_trainer(
        tmp_path, callbacks, max_steps=4, torch_scaler={}, optim="adamw_torch_fused"
    )
    with SyncCounter() as syncs:
        trainer.train()
    assert trainer.state.global_step == 4
    return syncs.count


def test_fused_optimizer_steps_add_no_sync_beyond_the_trainers_own(tmp_path: Path) -> None:
    baseline = _syncs(tmp_path / "torch", [])
    with counting_reads() as reads:
        with_callback = _syncs(tmp_path / "ours", [LossScaleCallback()])
    cost = syncs_per_read()
    # Only the callback's own reads: a CPU-only peek (0 on CUDA) and one stats() per log.
    assert reads["stats"] >= 4  # a log per step (logging_steps=1), and the summary
    assert with_callback <= baseline + sum(reads[name] * cost[name] for name in cost)
    assert baseline > 0  # the Trainer's own reads (loss, grad norm at each log) were counted


def test_bad_arguments_fail_when_the_callback_is_made() -> None:
    with pytest.raises(ValueError, match="below_one must be one of"):
        LossScaleCallback(below_one="sometimes")
    with pytest.raises(ValueError, match="min_scale"):
        LossScaleCallback(min_scale=-1.0)
    with pytest.raises(TypeError, match="'device' is set by the Trainer"):
        LossScaleCallback(device="cuda")


def _linear_lr(applied: int, total: int = 6, peak: float = 5e-5) -> float:
    """HF's default schedule (linear decay, no warmup) after ``applied`` steps."""
    return peak * (1 - applied / total)


@pytest.mark.parametrize("optim", ["adamw_torch", "adamw_torch_fused"])
def test_a_skipped_step_does_not_advance_the_trainers_schedule(tmp_path: Path, optim: str) -> None:
    callback = LossScaleCallback()
    trainer = make_trainer(
        tmp_path,
        [callback],
        max_steps=6,
        torch_scaler={"init_scale": 256.0},
        overflow_times=2,
        optim=optim,
    )
    trainer.train()
    assert trainer.accelerator.scaler.stats().skipped_steps == 2
    assert callback.schedule is not None
    assert trainer.lr_scheduler.state_dict()["last_epoch"] == 4  # 6 steps, 2 skipped
    # The logged LR is the one each step used: held at the start while steps 1-2 are skipped.
    logged = [entry["learning_rate"] for entry in _train_logs(trainer)]
    expected = [_linear_lr(k) for k in (0, 0, 0, 1, 2, 3)]
    assert logged == pytest.approx(expected, rel=1e-6)


def test_without_the_callback_a_fused_skip_advances_the_schedule(tmp_path: Path) -> None:
    # The Trainer's own check cannot see a fused optimizer's skip: the failure the callback fixes.
    trainer = make_trainer(
        tmp_path,
        [],
        max_steps=6,
        torch_scaler={"init_scale": 256.0},
        overflow_times=2,
        optim="adamw_torch_fused",
    )
    trainer.train()
    assert trainer.accelerator.scaler.get_scale() == 64.0
    assert trainer.lr_scheduler.state_dict()["last_epoch"] == 6


def test_skip_aware_schedule_can_be_turned_off(tmp_path: Path) -> None:
    callback = LossScaleCallback(skip_aware_schedule=False)
    trainer = make_trainer(
        tmp_path,
        [callback],
        max_steps=6,
        torch_scaler={"init_scale": 256.0},
        overflow_times=2,
        optim="adamw_torch_fused",
    )
    trainer.train()
    assert callback.schedule is None
    assert trainer.lr_scheduler.state_dict()["last_epoch"] == 6


def test_a_resumed_run_continues_the_schedule_at_the_applied_count(tmp_path: Path) -> None:
    first = make_trainer(
        tmp_path,
        [LossScaleCallback()],
        max_steps=4,
        save_strategy="steps",
        save_steps=4,
        torch_scaler={"init_scale": 256.0},
        overflow_times=2,
        optim="adamw_torch_fused",
    )
    first.train()
    assert torch.load(tmp_path / "checkpoint-4" / "scheduler.pt")["last_epoch"] == 2

    second = make_trainer(
        tmp_path,
        [LossScaleCallback()],
        max_steps=6,
        torch_scaler={"init_scale": 1.0},
        optim="adamw_torch_fused",
    )
    second.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    assert second.lr_scheduler.state_dict()["last_epoch"] == 4


# --------------------------------------------------------------------------- issue 45


#: The parameter whose gradient overflows in the tracking tests, and the steps it does.
TRACKED = "transformer.h.1.mlp.c_proj.weight"
TRACKED_STEPS = {1, 2}


def test_tracked_overflows_name_the_parameter_in_every_log(tmp_path: Path) -> None:
    probe = Probe()
    trainer = make_trainer(
        tmp_path,
        [probe, LossScaleCallback(track_overflows=True)],
        max_steps=4,
        torch_scaler={"init_scale": 64.0},
    )
    GradientOverflow(trainer.model.get_parameter(TRACKED), TRACKED_STEPS)
    trainer.train()
    scaler = trainer.accelerator.scaler
    assert scaler.stats().skipped_steps == 2
    logs = [log for log in probe.logs if "loss" in log]
    assert [log["overflowed_tensors"] for log in logs] == [0, 1, 1, 1]
    tracked = {name for name, p in trainer.model.named_parameters() if p.requires_grad}
    assert {log["tracked_tensors"] for log in logs} == {len(tracked)}
    key = f"overflow/{TRACKED}/"
    assert key + "first_step" not in logs[0]
    assert {field: logs[-1][key + field] for field in ("nonfinite_steps", "first_step")} == {
        "nonfinite_steps": 2,
        "first_step": 1,  # numbered as state.global_step was during the step
    }
    assert logs[-1][key + "last_step"] == 2
    assert logs[-1][key + "max_abs"] > 0
    assert _train_logs(trainer)[-1][key + "nonfinite_steps"] == 2  # the Trainer's history too
    assert [row.name for row in scaler.overflow_report().rows] == [TRACKED]


def test_without_tracking_the_logs_carry_no_overflow_fields(tmp_path: Path) -> None:
    probe = Probe()
    trainer = make_trainer(
        tmp_path, [probe, LossScaleCallback()], max_steps=2, torch_scaler={"init_scale": 64.0}
    )
    GradientOverflow(trainer.model.get_parameter(TRACKED), {1})
    trainer.train()
    assert not trainer.accelerator.scaler.is_tracking_overflows()
    for log in probe.logs:
        assert not any(key.startswith("overflow") for key in log)
        assert "tracked_tensors" not in log


def test_tracking_adds_only_the_reports_read_at_each_log(tmp_path: Path) -> None:
    baseline = _syncs(tmp_path / "torch", [])
    with counting_reads() as reads:
        tracked = _syncs(tmp_path / "ours", [LossScaleCallback(track_overflows=True)])
    cost = syncs_per_read()
    assert cost["overflow_report"] == 1
    assert reads["overflow_report"] >= 4  # once per log (logging_steps=1), none per step else
    assert tracked <= baseline + sum(reads[name] * cost[name] for name in cost)
