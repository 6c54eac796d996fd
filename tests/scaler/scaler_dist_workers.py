"""Worker functions for the gloo tests (spawned processes import them by module name)."""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import traceback
from pathlib import Path

import torch
import torch.distributed as dist
from scaler_harness import SyncCounter

from scaler import GradScaler, SkipAwareScheduler

STEPS = 5
POISONED_STEP = 1
#: The FSDP2 test's second overflow, in a parameter FSDP does not shard.
LOCAL_POISONED_STEP = 3


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _batch(step: int, rank: int | None = None, world: int = 1):
    generator = torch.Generator().manual_seed(100 + step)
    inputs, target = (
        torch.randn(16, 8, generator=generator),
        torch.randn(16, 4, generator=generator),
    )
    if rank is None:
        return inputs, target
    return inputs.chunk(world)[rank], target.chunk(world)[rank]


def _loss(model, inputs, target):
    with torch.autocast("cpu", dtype=torch.float16):
        return torch.nn.functional.mse_loss(model(inputs).float(), target)


def _run(rank: int, world: int, init_file: str, out_dir: str, body) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        result = body(rank, world)
        dist.barrier()  # no rank tears down while another still has a collective in flight
    except Exception:  # report to the parent, which asserts on it
        result = {"error": traceback.format_exc()}
    finally:
        dist.destroy_process_group()
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")
    _exit_without_finalizing()


def _exit_without_finalizing() -> None:
    """Leave the worker with exit code 0 once its result is on disk, skipping interpreter
    finalization.

    Why: a worker sometimes died with SIGABRT, "terminate called without an active exception",
    after writing a correct result (about 1 run in 3 of this file on a loaded 2-core machine,
    issue 14; torch 2.13 and 2.14.1). tools/gloo_exit_abort_repro.py reproduces it every time,
    and gdb on its core dump shows the cause, in a gloo worker thread: ``runLoop`` ->
    ``~AsyncAllreduceWork`` -> a tensor's ``TensorImpl::decref_pyobject() noexcept`` ->
    ``gil_scoped_acquire`` -> ``take_gil`` -> ``PyThread_exit_thread`` -> ``pthread_exit`` ->
    forced unwind -> ``std::terminate``. The thread releases an async collective's work (our
    found-inf flags, DDP's buckets, FSDP's reduce-scatter outputs) after ``wait()`` returns;
    its tensors' Python objects are decref'd under the GIL (torch 2.13's c10/util/intrusive_ptr.h,
    "Note [PyObject preservation for Tensor and Storages]"; torch 2.4 does not do this), and
    CPython ends any thread that asks for the GIL once finalization has begun. A thread starved
    of CPU on a loaded machine gets there late. Neither a barrier nor ``destroy_process_group``
    waits for those releases, and torch's own fix (an atexit ``destroy_process_group``,
    pytorch#179291) was abandoned. Nothing after the result is written needs finalization.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


#: torch 2.4.1's own ShardedGradScaler with fused Adam fails inside the optimizer on CPU:
#: its found-inf flag has shape [1] and fused Adam's ``_foreach_sub_(state_steps, found_inf)``
#: cannot write that into the 0-dim step counts (torch 2.13 and 2.14.1 pass).
TORCH_SHARDED_FUSED_BUG = "output with shape [] doesn't match the broadcast shape [1]"


def _one_rank_overflows(rank: int, world: int) -> dict:
    """An inf on rank 1 only, at one step: record scales and skips for each scaler/optimizer."""
    result = {}
    cases = {
        "ours-foreach": (lambda: GradScaler("cpu", process_group=dist.group.WORLD), False),
        "ours-fused": (lambda: GradScaler("cpu", process_group=dist.group.WORLD), True),
        "torch-sharded-fused": (_sharded_grad_scaler, True),
    }
    for name, (make_scaler, fused) in cases.items():
        try:
            result[name] = _train_with_one_overflow(rank, make_scaler(), fused)
        except RuntimeError as error:
            # Only torch's comparison case may hit torch's own bug; it fails the same way on
            # every rank, at the first step, so no rank is left waiting in a collective.
            if name.startswith("ours") or TORCH_SHARDED_FUSED_BUG not in str(error):
                raise
            result[name] = {"torch_bug": str(error)}
    return result


def _train_with_one_overflow(rank: int, scaler, fused: bool) -> dict:
    model = _model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=fused, foreach=not fused)
    scales, skipped, weights, syncs = [], [], [], []
    for step in range(STEPS):
        optimizer.zero_grad()
        inputs, target = _batch(step)
        scaler.scale(_loss(model, inputs, target)).backward()
        if rank == 1 and step == POISONED_STEP:
            model[0].weight.grad.view(-1)[0] = float("inf")
        before = [p.detach().clone() for p in model.parameters()]
        with SyncCounter() as counter:  # the all-reduce included
            scaler.step(optimizer)
            scaler.update()
        syncs.append(counter.count)
        after = model.parameters()
        skipped.append(all(torch.equal(b, p) for b, p in zip(before, after, strict=True)))
        scales.append(scaler.get_scale())
        weights.append(sum(float(p.detach().double().sum()) for p in model.parameters()))
    result = {"scales": scales, "skipped": skipped, "weights": weights, "syncs": syncs}
    if isinstance(scaler, GradScaler):
        result["stats_skipped"] = scaler.stats().skipped_steps
    return result


def _sharded_grad_scaler():
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    return ShardedGradScaler("cpu", process_group=dist.group.WORLD)


def _ddp_matches_single_process(rank: int, world: int) -> dict:
    """DDP over two ranks vs one process accumulating the same two half batches."""
    reference = _model()
    model = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(reference))
    reference_scaler = GradScaler("cpu", growth_interval=2)
    scaler = GradScaler("cpu", growth_interval=2, process_group=dist.group.WORLD)
    reference_opt = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        reference_opt.zero_grad()
        for shard in range(world):
            inputs, target = _batch(step, shard, world)
            reference_scaler.scale(_loss(reference, inputs, target) / world).backward()
        optimizer.zero_grad()
        inputs, target = _batch(step, rank, world)
        scaler.scale(_loss(model, inputs, target)).backward()
        if step == POISONED_STEP:  # an inf on rank 0 only; the reference sees it too
            reference[0].weight.grad.view(-1)[0] = float("inf")
            if rank == 0:
                model.module[0].weight.grad.view(-1)[0] = float("inf")
        reference_scaler.step(reference_opt)
        reference_scaler.update()
        scaler.step(optimizer)
        scaler.update()
    return {
        "max_diff": max(
            float((p - q).detach().abs().max())
            for p, q in zip(reference.parameters(), model.module.parameters(), strict=True)
        ),
        "scales": (reference_scaler.get_scale(), scaler.get_scale()),
        "skipped": scaler.stats().skipped_steps,
    }


def _fsdp_matches_single_process(rank: int, world: int) -> dict:
    """FSDP2 (fully_shard) over two ranks vs one process accumulating the two half batches.

    FSDP2's gradients are DTensors, and DTensor reduces the found-inf flag of
    ``_amp_foreach_non_finite_check_and_unscale_`` across the mesh by itself (torch's
    ``found_inf_reduce_handler`` in torch/distributed/tensor/_dispatch.py), so an inf in a
    sharded gradient reaches every rank even without the scaler's all-reduce: with the reduce
    removed from ``GradScaler._reduce_found_inf``, the first poisoned step alone still passed. The
    second one is an inf in a parameter FSDP does not manage (a plain tensor, e.g. a gain kept
    outside the sharded modules, stepped by a second optimizer), on rank 0 only: only the
    scaler's all-reduce makes rank 1 skip it too, and the test fails without it.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    # An explicit CPU mesh: on a machine with CUDA, fully_shard would otherwise move to the GPU.
    mesh = init_device_mesh("cpu", (world,))
    reference = _model()
    model = copy.deepcopy(reference)
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    reference_gain, gain = torch.nn.Parameter(torch.ones(())), torch.nn.Parameter(torch.ones(()))
    reference_scaler = GradScaler("cpu")
    scaler = GradScaler("cpu", process_group=dist.group.WORLD)
    reference_opts = [
        torch.optim.Adam(reference.parameters(), lr=1e-2),
        torch.optim.SGD([reference_gain], lr=0.1),
    ]
    optimizers = [torch.optim.Adam(model.parameters(), lr=1e-2), torch.optim.SGD([gain], lr=0.1)]
    for step in range(STEPS):
        for optimizer in (*reference_opts, *optimizers):
            optimizer.zero_grad()
        for shard in range(world):
            inputs, target = _batch(step, shard, world)
            reference_scaler.scale(_loss(reference, inputs, target) / world).backward()
        inputs, target = _batch(step, rank, world)
        scaler.scale(_loss(model, inputs, target)).backward()
        # The same (scaled) gradient for the unsharded gain on every rank and in the reference.
        reference_gain.grad = reference_scaler.scale(torch.tensor(0.5))
        gain.grad = scaler.scale(torch.tensor(0.5))
        if step == POISONED_STEP:  # an inf in rank 1's shard only; the reference sees one too
            reference[0].weight.grad.view(-1)[0] = float("inf")
            if rank == 1:
                model[0].weight.grad.to_local().view(-1)[0] = float("inf")
        if step == LOCAL_POISONED_STEP:  # an inf in rank 0's unsharded gain only
            reference_gain.grad.fill_(float("inf"))
            if rank == 0:
                gain.grad.fill_(float("inf"))
        for optimizer in reference_opts:
            reference_scaler.step(optimizer)
        reference_scaler.update()
        for optimizer in optimizers:
            scaler.step(optimizer)
        scaler.update()
    full = [p.full_tensor() for p in model.parameters()]
    return {
        "max_diff": max(
            float((p - q).detach().abs().max())
            for p, q in zip([*reference.parameters(), reference_gain], [*full, gain], strict=True)
        ),
        "scales": (reference_scaler.get_scale(), scaler.get_scale()),
        "skipped": scaler.stats().skipped_steps,
    }


def one_rank_overflows(rank, world, init_file, out_dir):
    _run(rank, world, init_file, out_dir, _one_rank_overflows)


def ddp_matches_single_process(rank, world, init_file, out_dir):
    _run(rank, world, init_file, out_dir, _ddp_matches_single_process)


def fsdp_matches_single_process(rank, world, init_file, out_dir):
    _run(rank, world, init_file, out_dir, _fsdp_matches_single_process)


#: Steps of the FSDP2 + fused-optimizer run; an inf in one rank's shard at each poisoned step.
FSDP2_STEPS = 6
#: Poisoned step -> the rank whose local gradient shard gets the inf (the last rank, then rank 0).
FSDP2_POISON = {1: -1, 3: 0}
#: Steps trained after the checkpoint, by the original run and by the restored one.
RESUMED_STEPS = 2


class SteppedThroughScaler(torch.optim.Optimizer):
    """accelerate's ``AcceleratedOptimizer`` in miniature: ``step()`` goes through the scaler.

    That is what makes accelerate #4289: ``set_optimizer_state_dict`` initialises the optimizer
    state with a dummy ``step()`` on zero gradients, which here reaches ``scaler.step`` and
    ``scaler.update``, after accelerate has already loaded the scaler (it must, since torch's
    ``step`` needs a scale to exist).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, scaler) -> None:
        self.optimizer = optimizer
        self.scaler = scaler

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    @property
    def defaults(self):
        return self.optimizer.defaults

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict) -> None:
        self.optimizer.load_state_dict(state_dict)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        self.scaler.step(self.optimizer)
        self.scaler.update()


def _sharded(mesh) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    from torch.distributed.fsdp import fully_shard

    model = _model()
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=1e-2, fused=True)


def fsdp2_schedule(optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler:
    """The FSDP2 run's schedule: a warm-up then a decay, so every position has its own LR.
    The test builds the same one on a plain optimizer as the reference."""
    schedules = torch.optim.lr_scheduler
    return schedules.SequentialLR(
        optimizer,
        [
            schedules.LinearLR(optimizer, start_factor=0.25, total_iters=3),
            schedules.ExponentialLR(optimizer, gamma=0.8),
        ],
        milestones=[3],
    )


def _fsdp2_step(model, optimizer, scaler, scheduler, rank: int, world: int, step: int) -> int:
    """One step on this rank's half of the batch; returns the syncs of ``step``, ``update`` and
    the scheduler's ``step``."""
    optimizer.zero_grad()
    inputs, target = _batch(step, rank, world)
    scaler.scale(_loss(model, inputs, target)).backward()
    if FSDP2_POISON.get(step) is not None and rank == FSDP2_POISON[step] % world:
        model[0].weight.grad.to_local().view(-1)[0] = float("inf")
    with SyncCounter() as counter:  # the found-inf all-reduce included
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    return counter.count


def _lrs_in_use(optimizer: torch.optim.Optimizer) -> list[float]:
    """The LRs the next step uses: the fused kernel's tensor LRs, read at the end of the run."""
    return [float(group["lr"]) for group in optimizer.param_groups]


def _local_shards(model) -> list[torch.Tensor]:
    return [p.detach().to_local().clone() for p in model.parameters()]


def _fsdp2_fused_with_checkpoint(rank: int, world: int, out_dir: str) -> dict:
    """FSDP2 + fused Adam + our scaler on gloo; then a DCP save, and a restore shaped like
    accelerate's (the scaler first, then the optimizer state through a stepping wrapper)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (world,))
    model, optimizer = _sharded(mesh)
    scaler = GradScaler("cpu", growth_interval=3, process_group=dist.group.WORLD)
    scheduler = SkipAwareScheduler(fsdp2_schedule(optimizer), scaler)
    syncs, skipped, flags, scales, lrs = [], [], [], [], []
    for step in range(FSDP2_STEPS):
        before = _local_shards(model)
        syncs.append(_fsdp2_step(model, optimizer, scaler, scheduler, rank, world, step))
        after = _local_shards(model)
        skipped.append(all(torch.equal(b, a) for b, a in zip(before, after, strict=True)))
        flags.append(bool(scaler.step_skipped(optimizer)))
        scales.append(scaler.get_scale())
        lrs.append(_lrs_in_use(optimizer))  # after the syncs were counted: reads are fine here
    position = scheduler.last_epoch  # a host read: the wrapped scheduler catches up
    last_lrs = [float(lr) for lr in scheduler.get_last_lr()]

    checkpoint = str(Path(out_dir) / "checkpoint")
    model_state, optim_state = get_state_dict(model, optimizer)
    saved = scaler.state_dict()
    saved_schedule = scheduler.state_dict()
    dcp.save(
        {"model": model_state, "optim": optim_state, "scaler": saved, "schedule": saved_schedule},
        checkpoint_id=checkpoint,
    )
    saved_shards = _local_shards(model)

    def restore(make_scaler):
        torch.manual_seed(rank + 1)  # other weights than the checkpoint's
        restored_model, restored_opt = _sharded(mesh)
        restored_scaler = make_scaler()
        # Built before the load, as a training script does: on the fused path its LRs are
        # tensors, as in the checkpoint, and DCP loads a tensor only into a tensor.
        restored_scheduler = SkipAwareScheduler(fsdp2_schedule(restored_opt), restored_scaler)
        # accelerate's order (Accelerator.load_state with FSDP2): the scaler and its lazy init
        # first, then the optimizer through its wrapper, whose state DCP initialises with a
        # dummy step (inside get_state_dict) that goes through the scaler.
        scaler_state = {"scaler": restored_scaler.state_dict()}
        dcp.load(scaler_state, checkpoint_id=checkpoint)
        restored_scaler.load_state_dict(scaler_state["scaler"])
        restored_scaler._lazy_init_scale_growth_tracker(torch.device("cpu"))
        wrapped = SteppedThroughScaler(restored_opt, restored_scaler)
        # Ours: the documented recipe; torch's scaler has no such block.
        holding = getattr(restored_scaler, "restoring", contextlib.nullcontext)
        with holding():
            model_sd, optim_sd = get_state_dict(restored_model, wrapped)
            state = {"model": model_sd, "optim": optim_sd}
            dcp.load(state, checkpoint_id=checkpoint)
            set_state_dict(
                restored_model,
                wrapped,
                model_state_dict=state["model"],
                optim_state_dict=state["optim"],
            )
        schedule_state = {"schedule": restored_scheduler.state_dict()}
        dcp.load(schedule_state, checkpoint_id=checkpoint)
        restored_scheduler.load_state_dict(schedule_state["schedule"])
        return restored_model, restored_opt, restored_scaler, restored_scheduler

    restored_model, restored_opt, restored_scaler, restored_scheduler = restore(
        lambda: GradScaler("cpu", init_scale=8.0, process_group=dist.group.WORLD)
    )
    restored_state = restored_scaler.state_dict()
    restored_schedule = restored_scheduler.state_dict()
    restored_lrs = _lrs_in_use(restored_opt)
    restored_exact = all(
        torch.equal(a, b) for a, b in zip(saved_shards, _local_shards(restored_model), strict=True)
    )
    # torch's own scaler through the same restore: the dummy step moves its growth tracker.
    _, _, torch_scaler, _ = restore(lambda: torch.amp.GradScaler("cpu"))
    torch_restored = torch_scaler.state_dict()

    resumed_scales, resumed_lrs = [], []
    for step in range(FSDP2_STEPS, FSDP2_STEPS + RESUMED_STEPS):
        _fsdp2_step(model, optimizer, scaler, scheduler, rank, world, step)
        _fsdp2_step(
            restored_model, restored_opt, restored_scaler, restored_scheduler, rank, world, step
        )
        resumed_scales.append((scaler.get_scale(), restored_scaler.get_scale()))
        resumed_lrs.append((_lrs_in_use(optimizer), _lrs_in_use(restored_opt)))
    resumed_exact = all(
        torch.equal(a, b)
        for a, b in zip(_local_shards(model), _local_shards(restored_model), strict=True)
    )
    return {
        "syncs": syncs,
        "skipped": skipped,
        "flags": flags,
        "scales": scales,
        "lrs": lrs,
        "position": position,
        "last_lrs": last_lrs,
        "device_path": scheduler._device_path,
        "skipped_steps": scaler.stats().skipped_steps,
        "saved": saved,
        "restored": restored_state,
        "restored_exact": restored_exact,
        "saved_schedule": saved_schedule,
        "restored_schedule": restored_schedule,
        "restored_lrs": restored_lrs,
        "torch_saved_tracker": saved["_growth_tracker"],
        "torch_restored": torch_restored,
        "resumed_scales": resumed_scales,
        "resumed_lrs": resumed_lrs,
        "resumed_positions": (scheduler.last_epoch, restored_scheduler.last_epoch),
        "resumed_exact": resumed_exact,
    }


def fsdp2_fused_with_checkpoint(rank, world, init_file, out_dir):
    _run(
        rank,
        world,
        init_file,
        out_dir,
        lambda rank, world: _fsdp2_fused_with_checkpoint(rank, world, out_dir),
    )


# --- issue 45: overflow tracking on the process-group path -----------------------------------

#: The rank whose gradient of ``0.weight`` (its local shard, under FSDP2) is poisoned, and when.
TRACKED_POISON_RANK = 1


def _tracked_run(rank: int, make_model, fused: bool, track: bool) -> dict:
    """``STEPS`` steps with rank 1's ``0.weight`` gradient poisoned at ``POISONED_STEP``; the
    syncs of each step and, with tracking, the report and stats of this rank."""
    model, optimizer = make_model(fused)
    scaler = GradScaler("cpu", process_group=dist.group.WORLD, track_overflows=track)
    if track:
        scaler.watch(model)
    syncs, skipped = [], []
    for step in range(STEPS):
        optimizer.zero_grad()
        inputs, target = _batch(step, rank, dist.get_world_size())
        scaler.scale(_loss(model, inputs, target)).backward()
        if rank == TRACKED_POISON_RANK and step == POISONED_STEP:
            _local_grad(model[0].weight).view(-1)[0] = float("inf")
        with SyncCounter() as counter:  # the all-reduce included
            scaler.step(optimizer)
            scaler.update()
        syncs.append(counter.count)
        skipped.append(bool(scaler.step_skipped(optimizer)))
    result = {"syncs": syncs, "skipped": skipped}
    if track:
        report = scaler.overflow_report()
        result["rows"] = [
            (row.name, row.nonfinite_steps, row.first_step, row.last_step) for row in report.rows
        ]
        result["tracked_tensors"] = report.tracked_tensors
        result["stats_overflowed"] = scaler.stats().overflowed_tensors
    return result


def _local_grad(param: torch.Tensor) -> torch.Tensor:
    grad = param.grad
    return grad.to_local() if hasattr(grad, "to_local") else grad


def _plain(fused: bool):
    model = _model()
    return model, torch.optim.Adam(model.parameters(), lr=1e-2, fused=fused, foreach=not fused)


def _tracked_process_group(rank: int, world: int) -> dict:
    result = {}
    makers = {"plain": _plain}
    from torch.distributed import fsdp

    if hasattr(fsdp, "fully_shard"):  # FSDP2 (DTensor gradients), public from torch 2.6
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (world,))

        def sharded(fused: bool):
            model, _ = _sharded(mesh)
            return model, torch.optim.Adam(model.parameters(), lr=1e-2, fused=fused)

        makers["fsdp2"] = sharded
    for name, make_model in makers.items():
        for fused in (False, True):
            for track in (False, True):
                key = f"{name}-{'fused' if fused else 'foreach'}-{'tracked' if track else 'plain'}"
                result[key] = _tracked_run(rank, make_model, fused, track)
    return result


def tracked_process_group(rank, world, init_file, out_dir):
    _run(rank, world, init_file, out_dir, _tracked_process_group)
