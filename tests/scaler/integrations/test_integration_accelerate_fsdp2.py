"""accelerate #4289 on accelerate itself: ``load_state`` of an FSDP2 fp16 checkpoint takes a dummy
optimizer step through the scaler after loading it. ``use_ampscale`` runs ``load_state`` inside
``scaler.restoring()``, so the restored state is the saved one exactly (gloo, CPU processes; see
accelerate_fsdp2_workers for how a CPU accelerator is put on FSDP2)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from framework_required import need

need("accelerate")

import accelerate_fsdp2_workers as workers  # noqa: E402

pytestmark = pytest.mark.skipif(
    not dist.is_available() or sys.platform == "win32", reason="needs torch.distributed (gloo)"
)

WORLD = 2


@pytest.fixture(scope="module")
def restores(tmp_path_factory) -> list[dict]:
    from torch.distributed import fsdp

    if not hasattr(fsdp, "fully_shard"):
        pytest.skip("this torch has no public fully_shard (FSDP2 is public from torch 2.6)")
    out = tmp_path_factory.mktemp("accelerate-fsdp2")
    mp.spawn(
        workers.save_and_restore, args=(WORLD, str(out / "init"), str(out)), nprocs=WORLD, join=True
    )
    results = [torch.load(Path(out) / f"rank{rank}.pt") for rank in range(WORLD)]
    for result in results:
        assert "error" not in result, result.get("error")
    return results


def test_the_checkpoint_is_one_clean_step_short_of_growing(restores) -> None:
    for rank in restores:
        saved = rank["saved"]
        # Every rank skipped the one rank's overflow (1024 -> 512), then 2 clean steps of 3.
        assert (saved["scale"], saved["_growth_tracker"]) == (workers.INIT_SCALE / 2, 2)
        assert saved["_ampscale_stats"]["counters"][:2] == [workers.STEPS, 1]  # steps, skipped


@pytest.mark.parametrize("restore", ["torch", "ours-unwrapped", "ours"])
def test_load_state_steps_through_the_scaler(restores, restore: str) -> None:
    for rank in restores:
        assert rank[restore]["steps_during_load"] >= 1


@pytest.mark.parametrize("restore", ["torch", "ours-unwrapped"])
def test_without_restoring_the_dummy_step_grows_the_restored_scale(restores, restore) -> None:
    for rank in restores:
        restored = rank[restore]["state"]
        # The dummy step counted as the third clean step: 512 -> 1024, tracker back to 0.
        assert (restored["scale"], restored["_growth_tracker"]) == (workers.INIT_SCALE, 0)


def test_use_ampscale_load_state_restores_the_saved_state_exactly(restores) -> None:
    for rank in restores:
        assert rank["ours"]["state"] == rank["saved"]
