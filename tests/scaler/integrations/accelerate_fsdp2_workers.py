"""accelerate's own FSDP2 ``save_state``/``load_state`` on gloo (spawned processes import this).

accelerate turns FSDP on only for GPU-like devices (``AcceleratorState.__init__`` lists the
``MULTI_*`` types and ``MULTI_CPU`` is not among them), so :func:`fsdp2_accelerator` marks a
CPU accelerator as FSDP2 after building it, on both of accelerate's state singletons (a later
``AcceleratorState()`` copies ``PartialState``'s fields over its own). Everything after that is
accelerate's code: ``prepare()`` shards the model with ``fully_shard``, ``save_state`` writes the
model and optimizer through ``torch.distributed.checkpoint``, and ``load_state`` loads the scaler
first and then the optimizer with ``get/set_optimizer_state_dict``, whose dummy ``step()`` on an
empty optimizer state goes through ``AcceleratedOptimizer.step`` into ``scaler.step`` and
``scaler.update`` (accelerate #4289).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the gloo tests' helpers
from scaler_dist_workers import _run

#: Steps trained before the checkpoint; the growth interval makes the last one leave the growth
#: tracker one short of growing, so a dummy step counted as clean would double the scale.
STEPS = 4
GROWTH_INTERVAL = 3
INIT_SCALE = 1024.0
#: The step whose gradient overflows, on the last rank only (every rank must skip it).
POISONED_STEP = 1
#: How ``load_state`` runs in each restore: torch's scaler as accelerate builds it; ours with
#: accelerate's ``load_state`` itself (the class's, not ``use_ampscale``'s); ours as installed.
RESTORES = ("torch", "ours-unwrapped", "ours")


def fsdp2_accelerator(rank: int, world: int) -> Any:
    """A CPU ``Accelerator(mixed_precision="fp16")`` on FSDP2 over the process group already
    initialised, with torch's scaler installed as accelerate installs it on a GPU."""
    from accelerate import Accelerator
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
        OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
    )
    plugin = FullyShardedDataParallelPlugin(fsdp_version=2, state_dict_type="SHARDED_STATE_DICT")
    accelerator = Accelerator(mixed_precision="fp16", cpu=True)
    accelerator.state.distributed_type = PartialState().distributed_type = DistributedType.FSDP
    accelerator.state.fsdp_plugin = plugin
    accelerator.scaler = torch.amp.GradScaler(
        "cpu", init_scale=INIT_SCALE, growth_interval=GROWTH_INTERVAL
    )
    accelerator.native_amp = True  # autocast fp16, as on a GPU
    return accelerator


def _prepared(accelerator: Any, seed: int) -> tuple[torch.nn.Module, Any]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    return accelerator.prepare(model, optimizer)


def _fresh_accelerate_state() -> None:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)  # the process group stays up
    GradientState._reset_state()


def _count_steps(scaler: Any) -> list[None]:
    """Record each ``scaler.step`` call from now on (an instance attribute shadows the method
    until it is deleted), to show that the restore did step through the scaler."""
    calls: list[None] = []
    step = scaler.step

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(None)
        return step(*args, **kwargs)

    scaler.step = counted
    return calls


def _save_and_restore(rank: int, world: int, out_dir: str) -> dict:
    from accelerate import Accelerator

    from scaler.integrations.accelerate import use_ampscale

    checkpoint = str(Path(out_dir) / "checkpoint")
    accelerator = fsdp2_accelerator(rank, world)
    scaler = use_ampscale(accelerator)
    model, optimizer = _prepared(accelerator, seed=0)
    generator = torch.Generator().manual_seed(rank)
    inputs, target = torch.randn(8, 8, generator=generator), torch.randn(8, 4, generator=generator)
    for step in range(STEPS):
        with accelerator.autocast():
            loss = torch.nn.functional.mse_loss(model(inputs).float(), target)
        accelerator.backward(loss)
        if step == POISONED_STEP and rank == world - 1:
            model[0].weight.grad.to_local().view(-1)[0] = float("inf")
        optimizer.step()
        optimizer.zero_grad()
    accelerator.save_state(checkpoint)
    result: dict[str, Any] = {"saved": scaler.state_dict()}

    for restore in RESTORES:
        _fresh_accelerate_state()
        accelerator = fsdp2_accelerator(rank, world)
        restored = accelerator.scaler if restore == "torch" else use_ampscale(accelerator)
        _prepared(accelerator, seed=rank + 1)  # other weights, an empty optimizer state
        steps = _count_steps(restored)
        if restore == "ours-unwrapped":
            Accelerator.load_state(accelerator, checkpoint)
        else:
            accelerator.load_state(checkpoint)
        del restored.step
        result[restore] = {"state": restored.state_dict(), "steps_during_load": len(steps)}
    return result


def save_and_restore(rank: int, world: int, init_file: str, out_dir: str) -> None:
    _run(
        rank, world, init_file, out_dir, lambda rank, world: _save_and_restore(rank, world, out_dir)
    )
