"""The scaler on CUDA: the sync contract under sync-debug mode, and CUDA-graph capture.

Skipped without CUDA (CI has none); run on a GPU machine with
``python -m pytest tests/gpu -p no:cacheprovider``.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

from scaler import GradScaler

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@contextmanager
def sync_is_an_error():
    """Any device-to-host sync inside the block raises (torch's own instrument for it)."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    ).cuda()


def train_step(model, optimizer, scaler, inputs, poison: bool = False, unscale: bool = False):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(inputs).float().square().mean()
    scaler.scale(loss).backward()
    if poison:
        model[0].weight.grad.view(-1)[5].fill_(float("inf"))  # a kernel, no host copy
    if unscale:
        scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()


@pytest.mark.parametrize("optimizer_name", ["Adam", "AdamW"])
@pytest.mark.parametrize(
    "options",
    [{}, {"min_scale": 1.0, "max_scale": 2.0**20, "hysteresis": 2, "below_one": "warn"}],
    ids=["default", "policy"],
)
@pytest.mark.parametrize("unscale", [False, True], ids=["step", "unscale_then_step"])
def test_fused_training_never_syncs(optimizer_name, options, unscale) -> None:
    model = make_model()
    optimizer = getattr(torch.optim, optimizer_name)(model.parameters(), lr=1e-3, fused=True)
    scaler = GradScaler("cuda", **options)
    inputs = 0.1 * torch.randn(8, 16, device="cuda")
    with sync_is_an_error():
        for step in range(6):
            train_step(model, optimizer, scaler, inputs, poison=step in (0, 3), unscale=unscale)
    assert scaler.get_scale() == 2.0**16 / (4 if not options else 2)


def test_get_scale_and_a_non_fused_step_are_the_documented_syncs() -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
    scaler = GradScaler("cuda")
    inputs = 0.1 * torch.randn(8, 16, device="cuda")
    with sync_is_an_error():
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(inputs).float().square().mean()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)  # no sync
        with pytest.raises(RuntimeError, match="synchroniz"):
            scaler.step(optimizer)  # the one sync a non-fused optimizer needs
        with pytest.raises(RuntimeError, match="synchroniz"):
            scaler.get_scale()


def test_cuda_graph_capture_replays_with_overflows() -> None:
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=True, capturable=True)
    scaler = GradScaler("cuda")
    static_inputs = 0.1 * torch.randn(8, 16, device="cuda")

    # Warm up on a side stream (lazy state, optimizer state), as torch's capture recipe asks.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            train_step(model, optimizer, scaler, static_inputs)
    torch.cuda.current_stream().wait_stream(side)
    assert scaler.get_scale() == 2.0**16

    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(static_inputs).float().square().mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    steps_before = int(scaler._state.counters[0])

    clean = 0.1 * torch.randn(8, 16, device="cuda")
    overflowing = clean.clone()
    overflowing[0, 0] = float("inf")
    for inputs, expect_skip in ((overflowing, True), (clean, False), (overflowing, True)):
        weights = [p.detach().clone() for p in model.parameters()]
        scale = scaler.get_scale()
        static_inputs.copy_(inputs)
        graph.replay()
        torch.cuda.synchronize()
        unchanged = all(torch.equal(w, p) for w, p in zip(weights, model.parameters(), strict=True))
        assert unchanged == expect_skip
        assert scaler.get_scale() == (scale / 2 if expect_skip else scale)
        assert all(torch.isfinite(p).all() for p in model.parameters())
    # The counters advanced inside the graph too.
    counters = scaler._state.counters.tolist()
    assert counters[0] == steps_before + 3
    assert counters[1] == 2  # skipped steps: the two overflowing replays


def test_peek_scale_never_waits_and_catches_up() -> None:
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    scaler = GradScaler("cuda", below_one="warn")
    inputs = 0.1 * torch.randn(8, 16, device="cuda")
    assert scaler.peek_scale() is None  # no scale yet
    train_step(model, optimizer, scaler, inputs)
    scaler.peek_scale()  # starts the pinned copies (allocates pinned memory once)
    with sync_is_an_error():
        for step in range(5):
            train_step(model, optimizer, scaler, inputs, poison=step % 2 == 0)
            peeked = scaler.peek_scale()
            assert peeked is None or peeked >= 2.0**13
    torch.cuda.synchronize()
    assert scaler.peek_scale() == scaler.get_scale() == 2.0**13
    # A scale below 1 is reported through the same channel, within a few steps.
    scaler.update(1.0)
    train_step(model, optimizer, scaler, inputs, poison=True)
    torch.cuda.synchronize()
    with pytest.warns(UserWarning, match="fell below 1"):
        assert scaler.peek_scale() == 0.5


def test_stats_is_one_transfer_and_step_skipped_none() -> None:
    import warnings

    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    scaler = GradScaler("cuda")
    inputs = 0.1 * torch.randn(8, 16, device="cuda")
    with sync_is_an_error():
        train_step(model, optimizer, scaler, inputs, poison=True)
        skipped = scaler.step_skipped(optimizer)
        assert skipped.device.type == "cuda"
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stats = scaler.stats()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) == 1
    assert (stats.steps, stats.skipped_steps, bool(skipped)) == (1, 1, True)
