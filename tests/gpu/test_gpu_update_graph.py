"""On CUDA the update is replayed as one captured graph: it must equal the eager ops exactly.

Skipped without CUDA (CI has none); run on a GPU machine with
``python -m pytest tests/gpu -p no:cacheprovider``.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from scaler import GradScaler, _scale_update
from scaler._scale_update import SAFETY_FLOOR, ScaleState, UpdateGraph, update_scale_

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

# Overflow pattern: a run of overflows long enough to reach the floor, then growth.
FOUND = [1, 0, 1, 1, 0, 0, 0, 0, 1, *[1] * 30, *[0] * 12, 1, 0, 0]


def run_updates(use_graph: bool, monkeypatch: pytest.MonkeyPatch, hysteresis: int) -> list:
    monkeypatch.setattr(_scale_update, "USE_CUDA_GRAPH", use_graph)
    state = ScaleState(torch.device("cuda"), 2.0**4, 0, hysteresis, floor=2.0**-3)
    factors = {"backoff_factor": 0.5, "growth_interval": 3, "hysteresis": hysteresis}
    history = []
    for step, found in enumerate(FOUND):
        # Changing a factor half-way must re-capture, not replay the old factor.
        growth = 2.0 if step < len(FOUND) // 2 else 4.0
        update_scale_(
            state,
            torch.full((), float(found), device="cuda"),
            growth_factor=growth,
            floor=2.0**-3,
            cap=2.0**10,
            **factors,
        )
        history.append(state.to_host())
    assert isinstance(state.update_graph, UpdateGraph) is use_graph
    return history


@pytest.mark.parametrize("hysteresis", [1, 3])
def test_graph_replay_equals_eager_ops_step_for_step(monkeypatch, hysteresis) -> None:
    replayed = run_updates(True, monkeypatch, hysteresis)
    eager = run_updates(False, monkeypatch, hysteresis)
    assert replayed == eager
    assert replayed[-1]["counters"][_scale_update.FLOOR_HITS] > 0  # the floor was exercised


def test_scaler_trajectory_with_graph_matches_torch() -> None:
    torch.manual_seed(0)
    models = [torch.nn.Linear(8, 8).cuda() for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-3, fused=True) for m in models]
    scalers = [
        GradScaler("cuda", growth_interval=2),
        torch.amp.GradScaler("cuda", growth_interval=2),
    ]
    inputs = torch.randn(4, 8, device="cuda")
    scales = [[], []]
    for step in range(12):
        for model, optimizer, scaler, seen in zip(models, optimizers, scalers, scales, strict=True):
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(inputs).float().square().mean()
            scaler.scale(loss).backward()
            if step % 4 == 1:
                model.weight.grad.view(-1)[3].fill_(float("nan"))
            scaler.step(optimizer)
            scaler.update()
            seen.append(scaler.get_scale())
    assert scales[0] == scales[1]
    assert isinstance(scalers[0]._state.update_graph, UpdateGraph)
    for ours, theirs in zip(models[0].parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-7)


def test_floor_is_respected_by_the_replayed_update() -> None:
    state = ScaleState(torch.device("cuda"), 1.0, 0, 1)
    for _ in range(200):
        update_scale_(
            state,
            torch.ones((), device="cuda"),
            growth_factor=2.0,
            backoff_factor=0.5,
            growth_interval=2000,
            hysteresis=1,
            floor=SAFETY_FLOOR,
            cap=torch.finfo(torch.float32).max,
        )
    assert state.to_host()["scale"] == SAFETY_FLOOR
    assert torch.isfinite(1 / state.scale)


def test_a_failed_capture_warns_once_and_updates_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self, *args, **kwargs):
        raise RuntimeError("capture refused")

    monkeypatch.setattr(torch.cuda.CUDAGraph, "capture_begin", refuse)
    scaler = GradScaler("cuda", growth_interval=1)
    param = torch.nn.Parameter(torch.ones(2, device="cuda"))
    optimizer = torch.optim.Adam([param], fused=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            scaler.scale(param.sum()).backward()
            scaler.step(optimizer)
            scaler.update()
    failed = [w for w in caught if "capture refused" in str(w.message)]
    assert [(w.category, w.filename) for w in failed] == [(RuntimeWarning, __file__)]
    assert scaler.get_scale() == 2.0**19
