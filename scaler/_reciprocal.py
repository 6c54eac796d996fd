"""``1/scale`` for unscaling: torch's value to the bit, without fp64 where the device lacks it.

torch computes the inverse scale as ``scale.double().reciprocal().float()``. MPS has no fp64, nor
do Intel Arc GPUs (pytorch #147731), where that line fails. On those devices we divide in fp32,
which gives the same bits wherever fp32 division is correctly rounded (IEEE 754, as on CPU and
these GPUs): rounding the exact quotient to fp64 and then to fp32 equals rounding it to fp32
directly, because fp64 carries 53 >= 2 * 24 + 2 significand bits (Figueroa, "When is double
rounding innocuous?", 1995). tests/scaler/test_reciprocal.py checks the fp32 path against torch's
on CPU, bit for bit, over every power of two and a sweep of other fp32 scales. Elsewhere we keep
torch's fp64 line, so that no device's division rounding can differ from torch's.
"""

from __future__ import annotations

import torch

#: Device types known to have no fp64 on any device.
_NO_FP64_TYPES = frozenset({"mps"})
#: Per device: whether it has fp64 (XPU: a property of the device; asked once).
_HAS_FP64: dict[torch.device, bool] = {}


def device_has_fp64(device: torch.device) -> bool:
    """Whether ``device`` computes in fp64 (no for MPS and Intel GPUs without it)."""
    known = _HAS_FP64.get(device)
    if known is None:
        if device.type in _NO_FP64_TYPES:
            known = False
        elif device.type == "xpu":
            known = bool(getattr(torch.xpu.get_device_properties(device), "has_fp64", True))
        else:
            known = True
        _HAS_FP64[device] = known
    return known


def inverse_scale(scale: torch.Tensor, *, fp64: bool | None = None) -> torch.Tensor:
    """``1/scale`` as an fp32 tensor on the scale's device, no sync.

    ``fp64``: compute through fp64 (torch's way) or in fp32; default: fp64 where the device has it.
    """
    if fp64 is None:
        fp64 = device_has_fp64(scale.device)
    if fp64:
        return scale.double().reciprocal().float()
    return torch.reciprocal(scale.float())
