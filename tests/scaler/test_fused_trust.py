"""Issue 21, item 3: fused trust as data, its lookup, and the CPU measurements behind its rows."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
from scaler_harness import count_syncs, make_model

import scaler._fused_support as fused_support
from scaler import GradScaler
from scaler._fused_support import (
    STATE_DTYPES,
    TRUST_TABLE,
    TrustRow,
    fused_step_is_safe,
    release,
    trust_row,
    verdict,
)

VERDICTS = ("trusted", "trusted-once-state-exists", "host", "unverified")
CPU_ROWS = sorted({(row.optimizer, row.state_dtype) for row in TRUST_TABLE if row.device == "cpu"})
#: The CPU rows that trust the kernel, each measured below on the torch that runs the tests.
TRUSTED_CPU_ROWS = sorted(
    (row.optimizer, row.state_dtype)
    for row in TRUST_TABLE
    if row.device == "cpu" and row.verdict != "host"
)
HOST_CPU_ROWS = sorted(
    (row.optimizer, row.state_dtype)
    for row in TRUST_TABLE
    if row.device == "cpu" and row.verdict == "host"
)
#: The step of the later skip, once every optimizer has state.
LATER_SKIP = 3


@pytest.fixture
def table(monkeypatch):
    """Replace the table for one test (the verdict cache is cleared on both sides)."""

    def use(rows: tuple[TrustRow, ...]) -> None:
        monkeypatch.setattr(fused_support, "TRUST_TABLE", rows)
        fused_support.clear_caches()

    yield use
    fused_support.clear_caches()


# ----------------------------------------------------------------- the table itself


@pytest.mark.parametrize(
    "row", TRUST_TABLE, ids=lambda r: f"{r.device}-{r.optimizer}-{r.state_dtype}"
)
def test_every_row_names_a_fused_torch_optimizer_a_range_and_its_evidence(row: TrustRow) -> None:
    assert row.device in ("cpu", "cuda", "mps", "xpu")
    assert row.state_dtype in STATE_DTYPES
    assert row.verdict in VERDICTS
    assert row.basis in ("measured", "torch-source", "none")
    assert release(row.torch_from) < release(row.torch_before)
    assert len(row.evidence) > 20
    params = [torch.nn.Parameter(torch.ones(1))]
    assert getattr(torch.optim, row.optimizer)(params, fused=True).defaults["fused"]


def test_no_two_rows_cover_the_same_combination() -> None:
    def key(row: TrustRow) -> tuple[str, str, str]:
        return row.device, row.optimizer, row.state_dtype

    for _, rows in itertools.groupby(sorted(TRUST_TABLE, key=key), key=key):
        ranges = sorted((release(r.torch_from), release(r.torch_before)) for r in rows)
        for (_, end), (start, _) in itertools.pairwise(ranges):
            assert end <= start


def test_only_unverified_rows_rest_on_nothing() -> None:
    for row in TRUST_TABLE:
        assert (row.verdict == "unverified") == (row.basis == "none"), row


def test_every_cpu_row_is_measured_by_this_file() -> None:
    # Each is measured below on the torch that runs the tests: a trusting row by a skipped
    # fused step against one never called, a host row by the host decision it takes.
    assert sorted(TRUSTED_CPU_ROWS + HOST_CPU_ROWS) == CPU_ROWS
    for row in TRUST_TABLE:
        if row.device == "cpu":
            assert row.basis == "measured", row
            assert "tests/scaler/test_fused_trust.py" in row.evidence


def test_no_gpu_mps_or_xpu_row_claims_a_measurement_made_here() -> None:
    # No such device runs the tests here: a row for one trusts torch's source and tests (CUDA
    # fused Adam/AdamW with fp32 state, which the CUDA no-sync contract and CUDA-graph capture
    # need) or is unverified.
    for row in TRUST_TABLE:
        if row.device == "cpu":
            continue
        assert row.basis != "measured", row
        from_source = row.device == "cuda" and row.optimizer in ("Adam", "AdamW")
        from_source = from_source and row.state_dtype == "float32"
        assert (row.verdict, row.basis) == (
            ("trusted", "torch-source") if from_source else ("unverified", "none")
        ), row
        if from_source:
            assert row.evidence.startswith("not measured here")
            assert "fused_adam_utils.cuh" in row.evidence
            assert "found_inf" in row.evidence


# ----------------------------------------------------------------- lookup


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("2.4.1", (2, 4, 1)),
        ("2.13.0+cpu", (2, 13, 0)),
        ("2.15.0a0+git1234abc", (2, 15, 0)),
        ("2.14", (2, 14, 0)),
    ],
)
def test_release_reads_a_torch_version_without_its_prerelease_or_local_part(version, expected):
    assert release(version) == expected


def test_release_rejects_what_is_not_a_version() -> None:
    with pytest.raises(ValueError, match="not a torch version: 'nightly'"):
        release("nightly")


@pytest.mark.parametrize(
    ("combination", "expected"),
    [
        (("cpu", "2.13.0+cpu", "Adam", "float32"), "trusted"),
        (("cpu", "2.4.1", "AdamW", "bfloat16"), "trusted"),
        (("cpu", "2.14.1", "Adagrad", "float16"), "trusted"),
        (("cpu", "2.13.0", "SGD", "float32"), "trusted-once-state-exists"),
        # Outside the measured range: the bounds are exclusive above, inclusive below.
        (("cpu", "2.4.0", "Adam", "float32"), "unverified"),
        (("cpu", "2.15.0", "Adam", "float32"), "unverified"),
        (("cpu", "2.15.0a0+gitabc", "Adam", "float32"), "unverified"),
        # No row at all: an optimizer, a dtype or a device nobody listed.
        (("cpu", "2.13.0", "NAdam", "float32"), "unverified"),
        (("cpu", "2.13.0", "Adam", "float64"), "unverified"),
        (("meta", "2.13.0", "Adam", "float32"), "unverified"),
        (("cuda", "2.13.0", "Adam", "float32"), "trusted"),
        (("cuda", "2.10.0", "Adam", "float32"), "unverified"),
        (("cuda", "2.14.0", "AdamW", "bfloat16"), "unverified"),
        (("cuda", "2.13.0", "SGD", "float32"), "unverified"),
        (("mps", "2.13.0", "Adam", "float32"), "unverified"),
        (("xpu", "2.13.0", "AdamW", "float16"), "unverified"),
    ],
)
def test_lookup(combination: tuple[str, str, str, str], expected: str) -> None:
    assert verdict(*combination) == expected


def test_a_combination_without_a_row_has_none() -> None:
    assert trust_row("cpu", "2.13.0", "NAdam", "float32") is None
    assert trust_row("cpu", "2.13.0", "Adam", "float32").verdict == "trusted"


def test_the_decision_asks_the_table_for_every_device_and_dtype_of_the_step() -> None:
    params = list(make_model().parameters())
    adam = torch.optim.Adam(params, fused=True)
    cpu, cuda, mps = torch.device("cpu"), torch.device("cuda", 0), torch.device("mps")
    assert fused_step_is_safe(adam, [(cpu, torch.float32)])
    assert fused_step_is_safe(adam, [(cpu, torch.float32), (cpu, torch.bfloat16)])
    assert not fused_step_is_safe(adam, [(cpu, torch.float32), (cpu, torch.float64)])
    assert not fused_step_is_safe(adam, [(mps, torch.float32)])
    assert not fused_step_is_safe(adam, [(cuda, torch.bfloat16)])
    # The CUDA no-sync contract (tests/gpu) rests on this row, trusted from torch's source.
    assert fused_step_is_safe(adam, [(cuda, torch.float32)]) == (
        verdict("cuda", torch.__version__, "Adam", "float32") == "trusted"
    )
    assert fused_step_is_safe(adam, [])  # no gradients: nothing to skip


def test_an_optimizer_outside_torch_that_opts_in_is_trusted_as_torch_trusts_it(table) -> None:
    class OwnFusedAdam(torch.optim.Adam):
        pass

    table(())  # not even torch's own rows
    params = list(make_model().parameters())
    assert fused_step_is_safe(
        OwnFusedAdam(params, fused=True), [(torch.device("cpu"), torch.float32)]
    )
    assert not fused_step_is_safe(
        torch.optim.Adam(params, fused=True), [(torch.device("cpu"), torch.float32)]
    )


def test_the_table_covers_the_torch_these_tests_measure_on() -> None:
    # When CI moves to a torch outside the CPU rows' range, every fused step there would fall
    # back to the host: this fails first, so the measurements are run and the bound moved.
    for optimizer, dtype in CPU_ROWS:
        assert trust_row("cpu", torch.__version__, optimizer, dtype) is not None


# ----------------------------------------------------------------- the scaler uses the table


def _training(scaler: GradScaler, optimizer, model, poisoned: set[int], steps: int = 4):
    syncs, skipped = [], []
    for step in range(steps):
        optimizer.zero_grad()
        inputs = torch.randn(16, 8, generator=torch.Generator().manual_seed(step))
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(inputs).float().square().mean()
        scaler.scale(loss).backward()
        if step in poisoned:
            next(model.parameters()).grad.view(-1)[0] = float("inf")
        with count_syncs() as counter:
            scaler.step(optimizer)
        syncs.append(counter.count)
        skipped.append(bool(scaler.step_skipped(optimizer)))
        scaler.update()
    return syncs, skipped


def test_a_trusted_row_steps_without_a_sync() -> None:
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=True)
    syncs, skipped = _training(GradScaler("cpu"), optimizer, model, poisoned={1})
    assert syncs == [0, 0, 0, 0]
    assert skipped == [False, True, False, False]


def test_an_unverified_combination_is_decided_on_the_host(table) -> None:
    table(tuple(row for row in TRUST_TABLE if row.optimizer != "Adam"))
    model, reference = make_model(), make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=True)
    reference_opt = torch.optim.Adam(reference.parameters(), lr=1e-2, foreach=True)
    syncs, skipped = _training(GradScaler("cpu"), optimizer, model, poisoned={0, 2})
    _, reference_skipped = _training(GradScaler("cpu"), reference_opt, reference, poisoned={0, 2})
    assert syncs == [1, 1, 1, 1]  # the flag read on the host, as for a non-fused optimizer
    assert skipped == reference_skipped == [True, False, True, False]
    for ours, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-7, rtol=1e-5)
        assert optimizer.state[ours]["step"] == reference_opt.state[theirs]["step"] == 2


# ----------------------------------------------------------------- the CPU measurements


def _fused(optimizer: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    extra = {"momentum": 0.9} if optimizer == "SGD" else {}
    return getattr(torch.optim, optimizer)(model.parameters(), lr=1e-2, fused=True, **extra)


def _set_grads(model: torch.nn.Module, step: int) -> None:
    for param in model.parameters():
        param.grad = None
    inputs = torch.randn(32, 8, generator=torch.Generator().manual_seed(step))
    model(inputs.to(next(model.parameters()).dtype)).float().square().mean().backward()


def _skip_through_the_fused_contract(optimizer: torch.optim.Optimizer) -> None:
    """What the scaler does on the fused path for an overflowing step: found_inf = 1."""
    optimizer.grad_scale = None
    optimizer.found_inf = torch.ones(())
    try:
        optimizer.step()
    finally:
        del optimizer.grad_scale, optimizer.found_inf


def _skipped_vs_never_called(optimizer: str, dtype: str, skip_at: int):
    """Two fused optimizers over twin models: one skips at ``skip_at`` through the contract, the
    other is not called there; both step normally otherwise."""
    skipping_model = make_model().to(getattr(torch, dtype))
    plain_model = copy.deepcopy(skipping_model)
    skipping, plain = _fused(optimizer, skipping_model), _fused(optimizer, plain_model)
    for step in range(LATER_SKIP + 3):
        _set_grads(skipping_model, step)
        _set_grads(plain_model, step)
        if step == skip_at:
            _skip_through_the_fused_contract(skipping)
            if step == 0:  # SGD's buffers hold garbage, which may by chance be equal: the
                # deterministic sign of its bug is that the skip stored state at all.
                created = bool(skipping.state) and not plain.state
        else:
            skipping.step()
            plain.step()
    same_params = all(
        torch.equal(p, q)
        for p, q in zip(skipping_model.parameters(), plain_model.parameters(), strict=True)
    )
    same_state = all(
        skipping.state[p].keys() == plain.state[q].keys()
        and all(
            torch.equal(torch.as_tensor(skipping.state[p][k]), torch.as_tensor(v))
            for k, v in plain.state[q].items()
        )
        for p, q in zip(skipping_model.parameters(), plain_model.parameters(), strict=True)
    )
    return same_params and same_state, (created if skip_at == 0 else None)


@pytest.mark.parametrize(("optimizer", "dtype"), TRUSTED_CPU_ROWS)
def test_each_trusting_cpu_row_is_what_a_skipped_fused_step_does_on_this_torch(
    optimizer, dtype
) -> None:
    row = trust_row("cpu", torch.__version__, optimizer, dtype)
    assert row is not None
    later_exact, _ = _skipped_vs_never_called(optimizer, dtype, LATER_SKIP)
    first_exact, first_created_state = _skipped_vs_never_called(optimizer, dtype, 0)
    assert later_exact  # both verdicts trust a skip once the state exists
    if row.verdict == "trusted":
        # Adam(W) creates zeroed state and undoes its step count; Adagrad writes nothing.
        assert first_exact
    else:
        assert row.verdict == "trusted-once-state-exists"
        # torch's bug: the skipped first step stored state its kernel never wrote.
        assert first_created_state


@pytest.mark.parametrize(("optimizer", "dtype"), HOST_CPU_ROWS)
def test_a_host_row_reads_the_flag_on_every_step_and_never_calls_a_skipped_step(optimizer, dtype):
    model = make_model().to(getattr(torch, dtype))
    fused, scaler = _fused(optimizer, model), GradScaler("cpu")
    syncs, skipped = _training(scaler, fused, model, poisoned={0}, steps=1)
    assert (syncs, skipped) == ([1], [True])
    assert not fused.state  # the skipped first step stored no unwritten buffers
    before = [p.detach().clone() for p in model.parameters()]
    syncs, skipped = _training(scaler, fused, model, poisoned={1}, steps=3)
    assert (syncs, skipped) == ([1, 1, 1], [False, True, False])
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert not all(torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
