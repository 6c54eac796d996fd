"""Gradients grouped by device and dtype, with the grouping cached between steps.

torch's GradScaler rebuilds a device → dtype → list mapping in a Python loop over every parameter
on every step (most of ``unscale_``'s host time). We collect the gradients with one comprehension
and compare a cheap per-gradient signature (dtype, layout, device index) with last step's; only
when it differs — a gradient appeared or vanished, changed dtype or device, or became sparse — is
the grouping rebuilt. A gradient that changes device type but keeps its index (-1 for both CPU
and meta) is not noticed; we know of no training loop that does that. Gradients are read afresh
every step, so a replaced ``.grad`` (the usual ``zero_grad(set_to_none=True)``) is always the one
unscaled; the cache holds indices, never gradient tensors, so it keeps no memory alive.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable

import torch

_dtype_and_layout = operator.attrgetter("dtype", "layout")
_device_index = torch.Tensor.get_device


class GradGroups:
    """One optimizer's gradients, split by (device, dtype); the split is cached by signature."""

    __slots__ = ("_devices", "_has_sparse", "_indices", "_kinds", "_split")

    def __init__(self) -> None:
        self._kinds: list[tuple[torch.dtype, torch.layout]] | None = None
        self._devices: list[int] | None = None
        #: (device, dtype, indices into the gradient list) for each group.
        self._split: list[tuple[torch.device, torch.dtype, list[int]]] = []
        #: Each group's indices alone (for ``indices()``); a new list at every rebuild.
        self._indices: list[list[int]] = []
        self._has_sparse = False

    def group(
        self, param_groups: Iterable[dict], allow_fp16: bool
    ) -> list[tuple[torch.device, torch.dtype, list[torch.Tensor]]]:
        """The tensors to unscale, as (device, dtype, tensors); sparse grads give their values.

        Raises torch's ``ValueError`` for fp16 gradients unless ``allow_fp16``, before touching
        anything. fp16 sparse gradients are coalesced (replacing ``param.grad``): duplicate
        indices summed in fp16 may overflow, and the inf check must see the sums.
        """
        grads = [g for group in param_groups for p in group["params"] if (g := p.grad) is not None]
        kinds = list(map(_dtype_and_layout, grads))
        devices = list(map(_device_index, grads))
        if kinds != self._kinds or devices != self._devices:
            self._rebuild(grads, kinds, devices)
        if not allow_fp16 and any(dtype is torch.float16 for _, dtype, _ in self._split):
            raise ValueError("Attempting to unscale FP16 gradients.")
        if self._has_sparse:
            return self._group_with_sparse(param_groups)
        if len(self._split) == 1:
            device, dtype, _ = self._split[0]
            return [(device, dtype, grads)]
        return [
            (device, dtype, [grads[i] for i in indices]) for device, dtype, indices in self._split
        ]

    def devices_and_dtypes(self) -> list[tuple[torch.device, torch.dtype]]:
        """The (device, dtype) of each group at the last ``group()``, without touching grads."""
        return [(device, dtype) for device, dtype, _ in self._split]

    def indices(self) -> list[list[int]]:
        """Each group's positions in the list of present gradients (parameters in
        ``param_groups`` order, those without a gradient left out) at the last ``group()``;
        the same list object until the grouping is rebuilt, so callers that cache something per
        layout can compare it by identity. Sparse gradients are grouped in the same order."""
        return self._indices

    def _rebuild(
        self,
        grads: list[torch.Tensor],
        kinds: list[tuple[torch.dtype, torch.layout]],
        devices: list[int],
    ) -> None:
        # Grouped by the full device: the signature's index alone is -1 for both CPU and meta
        # (and 0 for cuda:0 and xpu:0), and one kernel call must not mix devices.
        split: dict[tuple[torch.device, torch.dtype], list[int]] = {}
        for i, (dtype, _) in enumerate(kinds):
            split.setdefault((grads[i].device, dtype), []).append(i)
        self._split = [(device, dtype, indices) for (device, dtype), indices in split.items()]
        self._indices = [indices for _, _, indices in self._split]
        self._has_sparse = any(layout is not torch.strided for _, layout in kinds)
        self._kinds = kinds
        self._devices = devices

    @staticmethod
    def _group_with_sparse(
        param_groups: Iterable[dict],
    ) -> list[tuple[torch.device, torch.dtype, list[torch.Tensor]]]:
        # Rare (sparse embeddings), so the plain loop: it may replace param.grad.
        split: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
        for group in param_groups:
            for param in group["params"]:
                grad = param.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    if grad.dtype is torch.float16:
                        grad = param.grad = grad.coalesce()
                    # Private API, as torch's own scaler uses it: the values of a coalesced
                    # sparse tensor, a dense view the unscale kernel can write in place.
                    grad = grad._values()
                split.setdefault((grad.device, grad.dtype), []).append(grad)
        return [(device, dtype, tensors) for (device, dtype), tensors in split.items()]
