"""Issue 21, item 3: the inverse scale without fp64 is torch's, bit for bit (checked on CPU)."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import scaler._reciprocal as reciprocal
from scaler import GradScaler
from scaler._reciprocal import device_has_fp64, inverse_scale

FP32_TINY = torch.finfo(torch.float32).tiny


def torchs_inverse(scale: torch.Tensor) -> torch.Tensor:
    """torch.amp.GradScaler.unscale_'s line."""
    return scale.double().reciprocal().float()


def bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view(torch.int32)


class DtypesSeen(TorchDispatchMode):
    """Records the dtype of every tensor an op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.dtypes: set[torch.dtype] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for value in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(value, torch.Tensor):
                self.dtypes.add(value.dtype)
        return out


def sweep() -> torch.Tensor:
    """Every power of two a scale can be, and 200k other fp32 values, log-uniform across the
    scale's whole range (from the safety floor to the largest fp32), including the large ones
    whose reciprocal is subnormal."""
    powers = torch.tensor([2.0**e for e in range(-126, 128)], dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    exponents = torch.rand(200_000, generator=generator, dtype=torch.float64) * 254 - 126
    others = torch.exp2(exponents).float().clamp(min=FP32_TINY)
    return torch.cat((powers, others, torch.tensor([FP32_TINY, torch.finfo(torch.float32).max])))


def test_the_fp32_reciprocal_is_torchs_fp64_one_bit_for_bit() -> None:
    scales = sweep()
    assert torch.equal(bits(torch.reciprocal(scales)), bits(torchs_inverse(scales)))
    for scale in scales[:: len(scales) // 500]:  # the function itself, on 0-dim scales
        assert bits(inverse_scale(scale, fp64=False)) == bits(torchs_inverse(scale))


def test_scales_that_non_power_of_two_factors_reach_have_torchs_reciprocal() -> None:
    scale = torch.tensor(2.0**16)
    tracker = torch.zeros((), dtype=torch.int32)
    for step in range(400):
        found_inf = torch.tensor(float(step % 3 == 0))
        torch._amp_update_scale_(scale, tracker, found_inf, 1.7, 0.61, 1)
        assert bits(inverse_scale(scale, fp64=False)) == bits(torchs_inverse(scale))


def test_the_fp32_path_makes_no_fp64_tensor_and_the_default_on_cpu_is_torchs() -> None:
    scale = torch.tensor(3.0e4)
    with DtypesSeen() as seen:
        inverse_scale(scale, fp64=False)
    assert seen.dtypes == {torch.float32}
    with DtypesSeen() as seen:
        default = inverse_scale(scale)
    assert torch.float64 in seen.dtypes  # the CPU has fp64: torch's own line
    assert bits(default) == bits(torchs_inverse(scale))


def test_mps_has_no_fp64_and_the_cpu_has() -> None:
    assert not device_has_fp64(torch.device("mps"))
    assert device_has_fp64(torch.device("cpu"))


@pytest.fixture
def cpu_without_fp64(monkeypatch):
    """Pretend the CPU is a device without fp64 (as MPS, or an Intel Arc GPU)."""
    monkeypatch.setitem(reciprocal._HAS_FP64, torch.device("cpu"), False)


def test_unscale_on_a_device_without_fp64_matches_torch_and_uses_no_fp64(cpu_without_fp64):
    torch.manual_seed(0)
    grads = [torch.randn(64) * 3.0e3 for _ in range(3)]
    results = {}
    for kind, scaler in (("ours", GradScaler("cpu")), ("torch", torch.amp.GradScaler("cpu"))):
        params = [torch.nn.Parameter(torch.zeros(64)) for _ in grads]
        optimizer = torch.optim.Adam(params, fused=True)
        scaler.scale(torch.ones(()))
        scaler.update(1.7e3)  # a scale that is not a power of two
        for param, grad in zip(params, grads, strict=True):
            param.grad = grad.clone()
        if kind == "ours":
            scaler._hand_over_to_device(scaler._state)  # the device path, not the host mirror's
            with DtypesSeen() as seen:
                scaler.unscale_(optimizer)
            assert torch.float64 not in seen.dtypes
        else:
            scaler.unscale_(optimizer)
        results[kind] = [bits(p.grad) for p in params]
    for ours, theirs in zip(results["ours"], results["torch"], strict=True):
        assert torch.equal(ours, theirs)
