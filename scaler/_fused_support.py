"""Which fused optimizers' ``found_inf`` handling we trust, by device, torch version and dtype.

Optimizers that set ``_step_supports_amp_scaling`` receive the scale and the found-inf flag and
are expected to unscale and skip inside their own kernel, with no host sync. That is only safe if
a skipped step leaves every bit of optimizer state as if the step had never been called, and
whether it does depends on the kernel: the device type, the torch release and the dtype of the
optimizer state (fused Adam on MPS updated parameters with found_inf=1 until pytorch PR #186360;
XPU's in-kernel ``grad_scale`` is still moving, intel/torch-xpu-ops #3413; CUDA fused Adam with
bf16 moment buffers is new in torch 2.14). So trust is data: :data:`TRUST_TABLE`, one row per
(device type, torch version range, optimizer, state dtype). Every combination with no trusted row
is decided on the host: check the gradients, read the flag (one sync, as for a non-fused
optimizer) and call the fused ``step()`` only when they are finite; its kernel still unscales
them, so fp16 parameters work as on torch's fused path. Optimizers outside ``torch.optim`` that
opt into the contract are trusted, as torch trusts them: they wrote their own kernel.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import torch

#: What a row says about a skipped fused step: "trusted" (the kernel skips bit-exactly),
#: "trusted-once-state-exists" (only after the optimizer state exists; decided on the host before
#: that), "host" (known not to skip correctly: always decided on the host) or "unverified"
#: (nobody measured it: decided on the host).
Verdict = Literal["trusted", "trusted-once-state-exists", "host", "unverified"]

#: What a row's verdict rests on: "measured" (this repository's tests measure it on the torch
#: that runs them), "torch-source" (not measured here: torch's kernel source and torch's own
#: tests, cited in the row) or "none" (nothing: the verdict is "unverified").
Basis = Literal["measured", "torch-source", "none"]

#: The state dtypes a row may name (torch's fused optimizers keep their state in the parameters'
#: dtype).
STATE_DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")


@dataclass(frozen=True, slots=True)
class TrustRow:
    """One measured (or explicitly unmeasured) combination of the fused-optimizer contract."""

    #: Device type, as ``torch.device.type`` spells it ("cpu", "cuda", "mps", "xpu").
    device: str
    #: The first torch release the row covers (inclusive).
    torch_from: str
    #: The first torch release it no longer covers (exclusive).
    torch_before: str
    #: The optimizer class, as ``torch.optim`` spells it.
    optimizer: str
    #: The optimizer state's dtype, as ``torch`` spells it ("float32", "bfloat16", "float16").
    state_dtype: str
    #: See :data:`Verdict`.
    verdict: Verdict
    #: See :data:`Basis`.
    basis: Basis
    #: What was measured, where, and which test reproduces it; or the torch source and tests it
    #: rests on; or why nothing was.
    evidence: str

    def covers(self, version: str) -> bool:
        """Whether torch ``version`` (e.g. ``torch.__version__``) is in this row's range."""
        return release(self.torch_from) <= release(version) < release(self.torch_before)


def release(version: str) -> tuple[int, int, int]:
    """A torch version's release numbers: "2.15.0a0+git1234" -> (2, 15, 0).

    Pre-release and local parts are dropped on purpose: a 2.15 nightly runs 2.15's kernels, so
    it must not count as "before 2.15" (as PEP 440 ordering would have it).
    """
    match = _RELEASE.match(version)
    if match is None:
        raise ValueError(f"not a torch version: {version!r}")
    major, minor, patch = match.groups(default="0")
    return int(major), int(minor), int(patch)


_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


#: The measured range on CPU: torch 2.13 is what CI runs (constraints.txt), and the suite that
#: measures these rows passed on 2.4.1 (pyproject's lower bound) and 2.14.1. A release after it
#: falls back to the host until the tests are run there and the bound moves.
_CPU_RANGE = ("2.4.1", "2.15")
_CPU_EVIDENCE = (
    "a skipped step (found_inf=1) leaves parameters and every state tensor bit-equal to not "
    "calling step(), for a skipped first step and a later one "
    "(tests/scaler/test_fused_trust.py measures each CPU row)"
)
_CPU_SGD_EVIDENCE = (
    "with momentum, a skipped first step allocates momentum buffers with empty_like and the "
    "kernel returns before writing them; the next real step uses the garbage (10 of 10 trials "
    "deviated from foreach by 0.59 to 5e34). Once the buffers exist a skipped step is bit-exact "
    "(tests/scaler/test_fused_trust.py; tests/scaler/test_scaler_fused_sgd.py)"
)
_UNMEASURED = "not measured: no device of this type has run the tests"

#: CUDA fused Adam/AdamW with fp32 state: trusted on the strength of torch's source and tests,
#: which nothing here has measured (no GPU in CI). Trusting them is what the CUDA sync contract
#: (0 syncs on a fused step, tests/gpu/test_gpu_scaler.py) and CUDA-graph capture of the fused
#: step rest on; with the host fallback both would break.
_CUDA_ADAM_EVIDENCE = (
    "not measured here. torch's source: FusedAdamMathFunctor (aten/src/ATen/native/cuda/"
    "fused_adam_utils.cuh, which Adam and AdamW share) returns before it reads or writes any "
    "tensor when *found_inf_ptr == 1, in the kernel as introduced (pytorch PR #81705, torch "
    "1.13) and in the later versions read; _fused_adam in torch 2.13's torch/optim/adam.py then "
    "subtracts found_inf from the step counts it incremented, so a skip leaves the state as if "
    "step() was never called. torch's tests: test_cuda.py's test_grad_scaling_autocast_fused "
    "trains fused Adam/AdamW through GradScaler with an inf injected at one iteration against "
    "a control that skips it. tests/gpu passed once on an H200 with torch 2.11 (commit "
    "c1db410); 2.12-2.14 not measured"
)
_CUDA_BF16_EVIDENCE = f"{_UNMEASURED} (bf16 moment buffers on CUDA are new in torch 2.14)"

TRUST_TABLE: tuple[TrustRow, ...] = (
    *(
        TrustRow("cpu", *_CPU_RANGE, optimizer, dtype, "trusted", "measured", _CPU_EVIDENCE)
        for optimizer in ("Adam", "AdamW", "Adagrad")
        for dtype in STATE_DTYPES
    ),
    TrustRow(
        "cpu",
        *_CPU_RANGE,
        "SGD",
        "float32",
        "trusted-once-state-exists",
        "measured",
        _CPU_SGD_EVIDENCE,
    ),
    *(
        TrustRow(
            "cpu",
            *_CPU_RANGE,
            "SGD",
            dtype,
            "host",
            "measured",
            "with momentum in bf16/fp16, two identical runs of fused SGD already hold different "
            "momentum buffers after their first step (2 of 3 trials on torch 2.13), so no skip "
            "can be shown bit-exact; the first-step bug of the fp32 row applies too "
            "(tests/scaler/test_fused_trust.py checks the host decision these rows take)",
        )
        for dtype in ("bfloat16", "float16")
    ),
    *(
        TrustRow(
            "cuda",
            "2.11",
            "2.15",
            optimizer,
            "float32",
            "trusted",
            "torch-source",
            _CUDA_ADAM_EVIDENCE,
        )
        for optimizer in ("Adam", "AdamW")
    ),
    *(
        TrustRow(
            "cuda", "2.4.1", "2.15", optimizer, dtype, "unverified", "none", _CUDA_BF16_EVIDENCE
        )
        for optimizer in ("Adam", "AdamW")
        for dtype in ("bfloat16", "float16")
    ),
    *(
        TrustRow("cuda", "2.4.1", "2.15", optimizer, dtype, "unverified", "none", _UNMEASURED)
        for optimizer in ("SGD", "Adagrad")
        for dtype in STATE_DTYPES
    ),
    *(
        TrustRow(
            "mps",
            "2.4.1",
            "2.15",
            optimizer,
            dtype,
            "unverified",
            "none",
            f"{_UNMEASURED}; fused Adam on MPS updated parameters with found_inf=1 until pytorch "
            "PR #186360 (2026-06), and MPS unscaling zeroed fp16/bf16 gradients until PR #184286",
        )
        for optimizer in ("Adam", "AdamW")
        for dtype in STATE_DTYPES
    ),
    *(
        TrustRow(
            "xpu",
            "2.4.1",
            "2.15",
            optimizer,
            dtype,
            "unverified",
            "none",
            f"{_UNMEASURED}; XPU's in-kernel grad_scale handling is still changing "
            "(intel/torch-xpu-ops #3413)",
        )
        for optimizer in ("Adam", "AdamW", "SGD")
        for dtype in STATE_DTYPES
    ),
)

#: The verdict of every combination without a row.
NO_ROW: Verdict = "unverified"


def trust_row(device: str, version: str, optimizer: str, state_dtype: str) -> TrustRow | None:
    """The table's row for this combination, or None (which means "unverified")."""
    for row in TRUST_TABLE:
        if (
            row.device == device
            and row.optimizer == optimizer
            and row.state_dtype == state_dtype
            and row.covers(version)
        ):
            return row
    return None


@functools.cache
def verdict(device: str, version: str, optimizer: str, state_dtype: str) -> Verdict:
    """The verdict for one combination: its row's, or "unverified" when there is none."""
    row = trust_row(device, version, optimizer, state_dtype)
    return NO_ROW if row is None else row.verdict


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> "float32", the table's spelling."""
    return str(dtype).removeprefix("torch.")


def fused_step_is_safe(
    optimizer: torch.optim.Optimizer,
    devices_and_dtypes: Iterable[tuple[torch.device, torch.dtype]] | None = None,
) -> bool:
    """Whether this step may use the optimizer's fused found_inf handling (no sync).

    ``devices_and_dtypes``: where the gradients (hence the state) live and their dtypes, as the
    scaler's cached grouping already knows them; read from the parameters when not given.
    """
    if devices_and_dtypes is None:
        devices_and_dtypes = {
            (grad.device, grad.dtype)
            for group in optimizer.param_groups
            for param in group["params"]
            if (grad := param.grad) is not None
        }
    decision = _decision(type(optimizer), tuple(devices_and_dtypes))
    if decision == "once-state-exists":
        return all(_momentum_ready(optimizer, group) for group in optimizer.param_groups)
    return decision == "fused"


@functools.cache
def _decision(
    cls: type, where: tuple[tuple[torch.device, torch.dtype], ...]
) -> Literal["fused", "once-state-exists", "host"]:
    """The table's answer for one optimizer class over these (device, dtype) pairs, made once
    per combination: the scaler asks on every fused step."""
    if cls.__module__.split(".")[0] != "torch":
        return "fused"
    found = {verdict(d.type, torch.__version__, cls.__name__, dtype_name(t)) for d, t in where}
    if not found <= {"trusted", "trusted-once-state-exists"}:
        return "host"
    return "once-state-exists" if "trusted-once-state-exists" in found else "fused"


def clear_caches() -> None:
    """Forget every cached answer (after the table changed, in tests)."""
    verdict.cache_clear()
    _decision.cache_clear()


def _momentum_ready(optimizer: torch.optim.Optimizer, group: dict) -> bool:
    # torch's fused SGD treats a step as the first one when no parameter has a buffer yet.
    if group.get("momentum", 0) == 0:
        return True
    for param in group["params"]:
        if param.grad is not None:
            return optimizer.state.get(param, {}).get("momentum_buffer") is not None
    return True
