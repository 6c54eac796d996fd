"""precision_plugin and LossScaleMonitor with the real Lightning Trainer and Fabric on CPU."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import torch
from framework_required import need
from overflow_injection import GradientOverflow, Overflow

need("lightning")

import lightning.pytorch as pl  # noqa: E402
from lightning.fabric import Fabric  # noqa: E402
from lightning.pytorch.loggers import CSVLogger  # noqa: E402
from lightning.pytorch.plugins.precision import MixedPrecision  # noqa: E402
from lightning.pytorch.utilities.exceptions import MisconfigurationException  # noqa: E402
from scaler_reads import counting_reads, syncs_per_read  # noqa: E402

from scaler import GradScaler, ScaleBelowOneError, SyncCounter  # noqa: E402
from scaler.integrations.lightning import LossScaleMonitor, precision_plugin  # noqa: E402

FIELDS = ("loss_scale", "skipped_steps", "steps_below_one", "floor_hits")


class TinyModule(pl.LightningModule):
    def __init__(self, overflow_times: int = 0, fused: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)
        )
        self.fused = fused
        if overflow_times:
            Overflow(self.net[0], overflow_times)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        inputs, targets = batch
        return torch.nn.functional.mse_loss(self.net(inputs).float(), targets)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-3, fused=self.fused)


def _data() -> torch.utils.data.DataLoader:
    generator = torch.Generator().manual_seed(0)
    inputs, targets = (
        torch.randn(32, 8, generator=generator),
        torch.randn(32, 1, generator=generator),
    )
    return torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(inputs, targets), batch_size=4
    )


class Probe(pl.Callback):
    """The scaler's stats when training starts."""

    stats_at_start: Any = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.stats_at_start = trainer.precision_plugin.scaler.stats()


def _trainer(root: Path, callbacks: list[pl.Callback], plugin: Any = None, **kwargs: Any):
    settings: dict[str, Any] = {
        "accelerator": "cpu",
        "max_epochs": 1,
        "log_every_n_steps": 2,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "enable_checkpointing": False,
        "default_root_dir": str(root),
        "logger": CSVLogger(str(root)),
        **kwargs,
    }
    plugin = precision_plugin(device="cpu", init_scale=64.0) if plugin is None else plugin
    return pl.Trainer(plugins=[plugin], callbacks=callbacks, **settings)


def _csv_rows(trainer: pl.Trainer) -> list[dict[str, str]]:
    trainer.logger.save()
    with open(Path(trainer.logger.log_dir) / "metrics.csv", newline="") as file:
        return list(csv.DictReader(file))


def test_the_plugin_holds_our_scaler_with_the_given_settings() -> None:
    plugin = precision_plugin(device="cpu", below_one="warn", min_scale=1.0)
    assert isinstance(plugin, MixedPrecision)
    assert type(plugin.scaler) is GradScaler
    assert plugin.scaler._below_one == "warn"
    assert plugin.precision == "16-mixed"
    with pytest.raises(ValueError, match="only fp16 needs a loss scaler"):
        precision_plugin("bf16-mixed", device="cpu")  # type: ignore[arg-type]


def test_monitor_writes_the_columns_at_log_every_n_steps(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, [LossScaleMonitor()])
    trainer.fit(TinyModule(overflow_times=1), _data())
    rows = [row for row in _csv_rows(trainer) if row["loss_scale"]]
    # 8 batches, logged every 2: after batches 2, 4, 6, 8 (Lightning's steps 1, 3, 5, 7).
    assert [row["step"] for row in rows] == ["1", "3", "5", "7"]
    assert [float(row["loss_scale"]) for row in rows] == [32.0] * 4
    assert {row["skipped_steps"] for row in rows} == {"1"}
    assert {row["steps_below_one"] for row in rows} == {"0"}
    assert {row["floor_hits"] for row in rows} == {"0"}


def test_monitor_logs_once_per_epoch_with_epoch_interval(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, [LossScaleMonitor("epoch")], max_epochs=2)
    trainer.fit(TinyModule(), _data())
    rows = [row for row in _csv_rows(trainer) if row["loss_scale"]]
    assert [row["step"] for row in rows] == ["7", "15"]
    assert set(FIELDS) <= set(rows[0])


def test_ckpt_path_resume_keeps_scale_and_counters(tmp_path: Path) -> None:
    first = _trainer(tmp_path / "a", [LossScaleMonitor()], enable_checkpointing=True)
    first.fit(TinyModule(overflow_times=3), _data())
    saved = first.precision_plugin.scaler.stats()
    assert (saved.scale, saved.skipped_steps, saved.steps) == (8.0, 3, 8)
    checkpoint = next((tmp_path / "a").rglob("*.ckpt"))

    probe = Probe()
    second = _trainer(tmp_path / "b", [LossScaleMonitor(), probe], max_epochs=2)
    second.fit(TinyModule(), _data(), ckpt_path=str(checkpoint))
    assert probe.stats_at_start == saved
    assert second.precision_plugin.scaler.stats().steps == 16


def test_raise_policy_stops_the_run_at_the_monitors_read(tmp_path: Path) -> None:
    plugin = precision_plugin(device="cpu", init_scale=4.0, below_one="raise")
    trainer = _trainer(tmp_path, [LossScaleMonitor()], plugin=plugin, log_every_n_steps=1)
    with pytest.raises(ScaleBelowOneError, match=r"fell below 1 \(now 0\.5\)"):
        trainer.fit(TinyModule(overflow_times=-1), _data())
    assert trainer.global_step == 3  # read after the third overflow, the first below 1


def test_monitor_refuses_a_trainer_without_our_scaler(tmp_path: Path) -> None:
    torch_plugin = MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu"))
    trainer = _trainer(tmp_path, [LossScaleMonitor()], plugin=torch_plugin)
    with pytest.raises(MisconfigurationException, match="needs ampscale's GradScaler"):
        trainer.fit(TinyModule(), _data())


def test_monitor_refuses_a_trainer_without_a_logger(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, [LossScaleMonitor()], logger=False)
    with pytest.raises(MisconfigurationException, match="no logger"):
        trainer.fit(TinyModule(), _data())


def test_bad_logging_interval_is_refused() -> None:
    with pytest.raises(MisconfigurationException, match="logging_interval must be"):
        LossScaleMonitor("batch")  # type: ignore[arg-type]


def _syncs(root: Path, plugin: Any, callbacks: list[pl.Callback]) -> int:
    trainer = _trainer(root, callbacks, plugin=plugin, log_every_n_steps=1)
    with SyncCounter() as syncs:
        trainer.fit(TinyModule(fused=True), _data())
    return syncs.count


def test_fused_steps_with_the_monitor_add_no_sync_beyond_lightnings_own(tmp_path: Path) -> None:
    torch_plugin = MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu"))
    baseline = _syncs(tmp_path / "torch", torch_plugin, [])
    with counting_reads() as reads:
        ours = _syncs(tmp_path / "ours", precision_plugin(device="cpu"), [LossScaleMonitor()])
    cost = syncs_per_read()
    # Only the monitor's own reads: a CPU-only peek (0 on CUDA) and one stats() per log.
    assert reads["stats"] > 0
    assert ours <= baseline + sum(reads[name] * cost[name] for name in cost)


def test_fabric_steps_through_our_scaler() -> None:
    plugin = precision_plugin(device="cpu", fabric=True, init_scale=16.0)
    fabric = Fabric(accelerator="cpu", devices=1, plugins=[plugin])
    module = TinyModule(overflow_times=1)
    model, optimizer = fabric.setup(module.net, module.configure_optimizers())
    for inputs, targets in _data():
        with fabric.autocast():
            loss = torch.nn.functional.mse_loss(model(inputs).float(), targets)
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    stats = plugin.scaler.stats()
    assert (stats.steps, stats.skipped_steps, stats.scale) == (8, 1, 8.0)


class ScheduledModule(TinyModule):
    """TinyModule with a per-step schedule (and, optionally, a per-epoch one beside it)."""

    def __init__(self, *args: Any, epoch_schedule: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.epoch_schedule = epoch_schedule

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.AdamW(self.parameters(), lr=1e-3, fused=self.fused)
        step = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 1.0 / (k + 1))
        schedulers = [{"scheduler": step, "interval": "step"}]
        if self.epoch_schedule:
            epoch = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
            schedulers.append({"scheduler": epoch, "interval": "epoch"})
        return [optimizer], schedulers


def _positions(trainer: pl.Trainer) -> list[int]:
    return [config.scheduler.state_dict()["last_epoch"] for config in trainer.lr_scheduler_configs]


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
def test_a_skipped_step_does_not_advance_a_per_step_schedule(tmp_path: Path, fused: bool) -> None:
    trainer = _trainer(tmp_path, [], enable_checkpointing=True)
    trainer.fit(ScheduledModule(overflow_times=3, fused=fused), _data())
    assert trainer.precision_plugin.scaler.stats().skipped_steps == 3
    assert _positions(trainer) == [5]  # 8 steps, 3 skipped
    saved = torch.load(next(tmp_path.rglob("*.ckpt")), weights_only=False)["lr_schedulers"]
    assert saved[0]["last_epoch"] == 5
    assert "step" not in saved[0]


def test_per_epoch_schedules_are_left_to_lightning(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, [], max_epochs=2)
    trainer.fit(ScheduledModule(overflow_times=3, fused=True, epoch_schedule=True), _data())
    assert _positions(trainer) == [13, 2]  # 16 steps, 3 skipped; 2 epochs


def test_with_torchs_scaler_a_skipped_step_still_advances_the_schedule(tmp_path: Path) -> None:
    # Lightning #21339, the failure the plugin fixes.
    torch_plugin = MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu", 64.0))
    trainer = _trainer(tmp_path, [], plugin=torch_plugin)
    trainer.fit(ScheduledModule(overflow_times=3, fused=True), _data())
    assert _positions(trainer) == [8]


def test_skip_aware_schedule_can_be_turned_off(tmp_path: Path) -> None:
    plugin = precision_plugin(device="cpu", init_scale=64.0, skip_aware_schedule=False)
    assert type(plugin) is MixedPrecision
    trainer = _trainer(tmp_path, [], plugin=plugin)
    trainer.fit(ScheduledModule(overflow_times=3, fused=True), _data())
    assert _positions(trainer) == [8]


def test_fused_steps_with_a_skip_aware_schedule_add_no_sync(tmp_path: Path) -> None:
    def syncs(root: Path, plugin: Any) -> int:
        trainer = _trainer(root, [], plugin=plugin, log_every_n_steps=1)
        with SyncCounter() as counter:
            trainer.fit(ScheduledModule(fused=True), _data())
        return counter.count

    plain = precision_plugin(device="cpu", skip_aware_schedule=False)
    assert syncs(tmp_path / "ours", precision_plugin(device="cpu")) == syncs(
        tmp_path / "plain", plain
    )


# --------------------------------------------------------------------------- issue 45


def test_monitor_logs_the_parameters_whose_gradients_overflowed(tmp_path: Path) -> None:
    plugin = precision_plugin(device="cpu", init_scale=64.0, track_overflows=True)
    trainer = _trainer(tmp_path, [LossScaleMonitor()], plugin=plugin)
    module = TinyModule()
    GradientOverflow(module.net[2].weight, {2, 5})
    trainer.fit(module, _data())
    rows = [row for row in _csv_rows(trainer) if row["loss_scale"]]
    # Logged after batches 2, 4, 6, 8 (steps 1, 3, 5, 7): the overflow of step 2 shows from the
    # second log on, the one of step 5 from the third.
    assert [row["overflowed_tensors"] for row in rows] == ["0", "1", "1", "1"]
    key = "overflow/net.2.weight/"
    assert [row[key + "nonfinite_steps"] for row in rows] == ["", "1", "2", "2"]
    assert [row[key + "first_step"] for row in rows] == ["", "2", "2", "2"]
    assert [row[key + "last_step"] for row in rows] == ["", "2", "5", "5"]
    assert {row["tracked_tensors"] for row in rows} == {"4"}
    assert plugin.scaler.stats().skipped_steps == 2


def test_monitor_logs_no_overflow_fields_without_tracking(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, [LossScaleMonitor()])
    module = TinyModule()
    GradientOverflow(module.net[2].weight, {2})
    trainer.fit(module, _data())
    columns = set(_csv_rows(trainer)[0])
    assert not {column for column in columns if "overflow" in column or "tracked" in column}


def test_tracking_with_the_monitor_adds_only_the_reports_read_per_log(tmp_path: Path) -> None:
    torch_plugin = MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu"))
    baseline = _syncs(tmp_path / "torch", torch_plugin, [])
    plugin = precision_plugin(device="cpu", track_overflows=True)
    with counting_reads() as reads:
        ours = _syncs(tmp_path / "ours", plugin, [LossScaleMonitor()])
    cost = syncs_per_read()
    assert reads["overflow_report"] == reads["stats"] > 0  # one of each per log
    assert ours <= baseline + sum(reads[name] * cost[name] for name in cost)
