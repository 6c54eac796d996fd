"""Which gradient tensors overflowed: a verdict per tensor, kept on the device every step.

Loss scalers — torch's, DeepSpeed's, Megatron's — read every gradient once per step to find
inf/NaN, and reduce the verdict to one flag per device: none can say which tensor tripped it.
With ``track_overflows=True`` ours keeps the verdict per tensor for the cost of one more foreach
reduction per (device, dtype) group — each gradient's largest magnitude,
``_foreach_norm(ord=inf)``, which is inf or NaN exactly when the gradient holds one — and three
in-place scatters into per-parameter vectors. Nothing reaches the host until ``report()``.

The step number the scatters write is itself a device tensor, advanced by ``update()``, so a
CUDA graph that captures a whole training step records the right step on every replay. Index
tensors are made only when the layout changes (a gradient appears or vanishes, a parameter group
is added), from pinned memory on CUDA: a copy from pageable memory would synchronise.
"""

from __future__ import annotations

import math
import struct
import weakref
from collections import abc
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from scaler._errors import ScalerTypeError
from scaler._grad_groups import GradGroups
from scaler._overflow_report import OverflowReport, OverflowRow
from scaler._per_optimizer import PerOptimizer
from scaler._scale_update import constant_on_device

#: Stored as the negated first step of a tensor that never overflowed: no run gets this far.
NEVER = 2**62


def named_tensors(what: object, prefix: str) -> list[tuple[str, torch.Tensor]]:
    """``watch()``'s argument as (name, tensor) pairs, all checked before any is used.

    Takes a module (its ``named_parameters()``), a mapping of names to tensors, or an iterable of
    (name, tensor) pairs such as ``model.named_parameters()``.
    """
    if not isinstance(prefix, str):
        raise ScalerTypeError(f"watch(): prefix must be a str, got {type(prefix).__name__}")
    if isinstance(what, torch.nn.Module):
        pairs: Iterable[Any] = what.named_parameters()
    elif isinstance(what, abc.Mapping):
        pairs = what.items()
    elif isinstance(what, abc.Iterable) and not isinstance(what, (str, bytes, torch.Tensor)):
        pairs = what
    else:
        raise ScalerTypeError(
            "watch() takes a torch.nn.Module, or (name, parameter) pairs such as "
            f"model.named_parameters(), got {type(what).__name__}"
        )
    named = []
    for number, pair in enumerate(pairs):
        if (
            not isinstance(pair, (tuple, list))
            or len(pair) != 2
            or not isinstance(pair[0], str)
            or not isinstance(pair[1], torch.Tensor)
        ):
            raise ScalerTypeError(
                "watch() takes (name, parameter) pairs such as model.named_parameters(); "
                f"item {number} is {_short_repr(pair)}"
            )
        named.append((prefix + pair[0], pair[1]))
    return named


def _short_repr(value: object) -> str:
    """One line, short: tensors by type and shape, pairs element by element."""
    if isinstance(value, torch.Tensor):
        text = f"{type(value).__name__} {tuple(value.shape)}"
    elif isinstance(value, tuple):
        text = "(" + ", ".join(map(_short_repr, value)) + ("," if len(value) == 1 else "") + ")"
    else:
        text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _local(grad: torch.Tensor) -> torch.Tensor:
    """A DTensor's shard on this rank (FSDP2): its norm needs no collective, and each rank
    reports its own tensors."""
    if type(grad) is torch.Tensor:
        return grad
    to_local = getattr(grad, "to_local", None)
    return grad if to_local is None else to_local()


def _index_on(device: torch.device, positions: list[int]) -> torch.Tensor:
    """An index tensor on ``device``, copied without a sync (from pinned memory on CUDA)."""
    host = torch.tensor(positions, dtype=torch.int64)
    if device.type == "cpu":
        return host
    if device.type == "cuda":
        host = host.pin_memory()
    return host.to(device, non_blocking=True)


class _DeviceStats:
    """One optimizer's per-parameter verdicts on one device, indexed by flat position."""

    __slots__ = ("counts", "max_abs", "steps")

    def __init__(self, size: int, device: torch.device) -> None:
        #: Steps in which the gradient was non-finite.
        self.counts = torch.zeros(size, dtype=torch.int64, device=device)
        #: ``[-first step, last step]`` of those steps; both rows grow with ``amax``.
        self.steps = torch.full((2, size), -1, dtype=torch.int64, device=device)
        self.steps[0].fill_(-NEVER)
        #: The largest finite magnitude, unscaled; -1 for a tensor that never had a gradient.
        self.max_abs = torch.full((size,), -1.0, dtype=torch.float32, device=device)

    def __len__(self) -> int:
        return self.counts.numel()

    def grow(self, size: int) -> None:
        """Make room for parameters added to the optimizer since (``add_param_group``)."""
        if size <= len(self):
            return
        more = _DeviceStats(size - len(self), self.counts.device)
        self.counts = torch.cat((self.counts, more.counts))
        self.steps = torch.cat((self.steps, more.steps), dim=1)
        self.max_abs = torch.cat((self.max_abs, more.max_abs))

    def add(
        self,
        grads: list[torch.Tensor],
        index: tuple[torch.Tensor, torch.Tensor],
        signed_step: torch.Tensor,
        no_step: torch.Tensor,
        divisor: torch.Tensor | None,
    ) -> None:
        """One step's verdict for one group of gradients, in place; no host read.

        ``index``: the group's flat positions, and the same expanded to both rows of ``steps``.
        Nine small ops (one more where the fused path leaves the gradients scaled): each costs
        host time even on CPU, so no op is spent that a ``where`` can fold in.
        """
        positions, both_rows = index
        # The inf-norm is inf or NaN exactly when the gradient holds one: torch's max
        # reductions propagate NaN (checked on CPU by tests/scaler/test_overflow_tracking.py).
        peaks = torch.stack(torch._foreach_norm([_local(g) for g in grads], math.inf))
        if peaks.dtype != torch.float32:
            peaks = peaks.float()
        if divisor is not None:  # gradients the fused optimizer unscales later
            peaks = peaks / divisor
        finite = torch.isfinite(peaks)
        self.counts.scatter_add_(0, positions, torch.where(finite, 0, 1))
        # [-step, step] where non-finite, [-NEVER, -1] elsewhere: amax keeps first and last.
        steps = torch.where(finite, no_step, signed_step)
        self.steps.scatter_reduce_(1, both_rows, steps, "amax")
        self.max_abs.scatter_reduce_(0, positions, torch.where(finite, peaks, 0.0), "amax")


class _OptimizerRecord:
    """What is tracked for one optimizer: its layout as of the last change, and its stats."""

    __slots__ = (
        "indices",
        "names",
        "number",
        "params",
        "positions",
        "present",
        "split",
        "stats",
    )

    def __init__(self, number: int) -> None:
        #: Position among the tracked optimizers, in the order they first stepped.
        self.number = number
        #: Which flat positions had a gradient at the last layout.
        self.present: list[bool] | None = None
        #: ``GradGroups.indices()`` at the last layout (compared by identity).
        self.split: list[list[int]] | None = None
        #: Each group's flat positions, as an index tensor on the group's device, and the same
        #: expanded to the two rows of ``_DeviceStats.steps``.
        self.indices: list[tuple[torch.Tensor, torch.Tensor]] = []
        #: The parameter at each flat position, and its (group, index) in ``param_groups``.
        self.params: list[weakref.ref[torch.Tensor]] = []
        self.positions: list[tuple[int, int]] = []
        #: The name ``watch()`` gave each position's parameter when last looked up: the name
        #: outlives the parameter (a report read after the model was deleted).
        self.names: list[str | None] = []
        self.stats: dict[torch.device, _DeviceStats] = {}

    def lay_out(
        self,
        param_groups: Sequence[dict],
        present: list[bool],
        split: list[list[int]],
        devices: list[torch.device],
    ) -> None:
        """Positions, index tensors and storage for the gradients present now (``present``),
        grouped as ``split`` says, one group per entry of ``devices``."""
        located = [
            (g, i, param)
            for g, group in enumerate(param_groups)
            for i, param in enumerate(group["params"])
        ]
        self.positions = [(g, i) for g, i, _ in located]
        self.params = [weakref.ref(param) for _, _, param in located]
        self.names = [None] * len(located)
        with_grads = [k for k, has in enumerate(present) if has]
        self.indices = []
        for device, members in zip(devices, split, strict=True):
            positions = _index_on(device, [with_grads[j] for j in members])
            self.indices.append((positions, positions.expand(2, -1)))
            stats = self.stats.get(device)
            if stats is None:
                self.stats[device] = _DeviceStats(len(located), device)
            else:
                stats.grow(len(located))
        self.present = present
        self.split = split


class OverflowTracker:
    """Per gradient tensor, on the device: non-finite steps, first and last such step, and the
    largest finite magnitude; read on the host only by ``report()``."""

    __slots__ = (
        "_by_optimizer",
        "_names",
        "_no_step",
        "_records",
        "_signed_step",
        "_signs",
        "steps",
    )

    def __init__(self, steps: int = 0) -> None:
        #: The number the next step gets (``update()`` calls counted so far, as in ``stats()``).
        self.steps = steps
        self._records: list[_OptimizerRecord] = []
        self._by_optimizer: PerOptimizer[_OptimizerRecord] = PerOptimizer()
        #: ``id(tensor) -> (weak reference, name)`` from ``watch()``.
        self._names: dict[int, tuple[weakref.ref[torch.Tensor], str]] = {}
        #: ``[[-step], [step]]`` on the first device tracked, advanced by ``advance()``.
        self._signed_step: torch.Tensor | None = None
        self._signs: torch.Tensor | None = None
        #: ``[[-NEVER], [-1]]`` per device: what a finite gradient contributes to the steps.
        self._no_step: dict[torch.device, torch.Tensor] = {}

    def watch(self, named: list[tuple[str, torch.Tensor]]) -> None:
        for name, tensor in named:
            self._names[id(tensor)] = (weakref.ref(tensor), name)
        for record in self._records:
            self._remember_names(record)

    def advance(self) -> None:
        """One ``update()`` that counts as a step: the next step's number, on both sides."""
        self.steps += 1
        if self._signed_step is not None:
            self._signed_step.add_(self._signs)

    def restart_at(self, steps: int) -> None:
        """Number the next step ``steps`` (a loaded checkpoint's step count)."""
        self.steps = steps
        if self._signed_step is not None:
            self._signed_step[0].fill_(-steps)
            self._signed_step[1].fill_(steps)

    def record(
        self,
        optimizer: Any,
        groups: GradGroups,
        grouped: list[tuple[torch.device, torch.dtype, list[torch.Tensor]]],
        divisor: torch.Tensor | None,
    ) -> None:
        """Add this step's verdict for the gradients ``groups.group()`` just returned.

        ``divisor``: what the gradients must still be divided by to be unscaled (the scale, on
        the fused path, where the optimizer unscales inside its kernel), or None.
        """
        if not grouped:
            return
        record = self._by_optimizer.get(optimizer)
        if record is None:
            record = self._by_optimizer[optimizer] = _OptimizerRecord(len(self._records))
            self._records.append(record)
        param_groups = optimizer.param_groups
        present = [p.grad is not None for group in param_groups for p in group["params"]]
        split = groups.indices()
        if present != record.present or split is not record.split:
            record.lay_out(param_groups, present, split, [device for device, _, _ in grouped])
            self._remember_names(record)
        for (device, _, grads), index in zip(grouped, record.indices, strict=True):
            signed_step, no_step = self._steps_on(device)
            device_divisor = divisor
            if divisor is not None and divisor.device != device:
                device_divisor = divisor.to(device, non_blocking=True)
            record.stats[device].add(grads, index, signed_step, no_step, device_divisor)

    def _steps_on(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        if self._signed_step is None:
            self._signed_step = constant_on_device([-self.steps, self.steps], torch.int64, device)
            self._signed_step = self._signed_step.reshape(2, 1)
            self._signs = constant_on_device([-1, 1], torch.int64, device).reshape(2, 1)
        no_step = self._no_step.get(device)
        if no_step is None:
            no_step = constant_on_device([-NEVER, -1], torch.int64, device).reshape(2, 1)
            self._no_step[device] = no_step
        signed_step = self._signed_step
        if signed_step.device != device:
            signed_step = signed_step.to(device, non_blocking=True)
        return signed_step, no_step

    def overflowed_count(self, device: torch.device) -> torch.Tensor | None:
        """Tensors non-finite in at least one step, as a 0-dim tensor on ``device`` (None when
        nothing was tracked yet); device ops only."""
        counts = [
            (stats.counts > 0).sum().to(device, non_blocking=True)
            for record in self._records
            for stats in record.stats.values()
        ]
        if not counts:
            return None
        return torch.stack(counts).sum()

    def report(self, top: int | None) -> OverflowReport:
        """Read everything (one device-to-host copy per device holding stats) and sort."""
        merged: dict[tuple[int, int], list[float]] = {}
        for device_stats in self._read_all():
            for record, counts, first, last, max_abs in device_stats:
                for k, count in enumerate(counts):
                    if max_abs[k] < 0:  # no gradient at this position on this device
                        continue
                    key = (record.number, k)
                    seen = merged.get(key)
                    if seen is None:
                        merged[key] = [count, first[k], last[k], max_abs[k]]
                    else:
                        seen[0] += count
                        seen[1] = min(seen[1], first[k])
                        seen[2] = max(seen[2], last[k])
                        seen[3] = max(seen[3], max_abs[k])
        overflowed = sorted(
            ((first, -count, key) for key, (count, first, _, _) in merged.items() if count > 0),
        )
        shown = overflowed if top is None else overflowed[:top]
        rows = tuple(
            OverflowRow(
                name=self._name(self._records[key[0]], key[1]),
                nonfinite_steps=int(merged[key][0]),
                first_step=int(merged[key][1]),
                last_step=int(merged[key][2]),
                max_abs=float(merged[key][3]),
            )
            for _, _, key in shown
        )
        return OverflowReport(
            rows=rows,
            tracked_tensors=len(merged),
            overflowed_tensors=len(overflowed),
            steps=self.steps,
        )

    def _read_all(self) -> list[list[tuple[_OptimizerRecord, list, list, list, list]]]:
        """Per device, each record's counts, first and last steps and magnitudes, in one read."""
        by_device: dict[torch.device, list[tuple[_OptimizerRecord, _DeviceStats]]] = {}
        for record in self._records:
            for device, stats in record.stats.items():
                by_device.setdefault(device, []).append((record, stats))
        read = []
        for pairs in by_device.values():
            # int64 carries everything exactly: the fp32 magnitudes travel as their bits.
            packed = torch.cat(
                [
                    part
                    for _, stats in pairs
                    for part in (
                        stats.counts,
                        stats.steps.reshape(-1),
                        stats.max_abs.view(torch.int32).long(),
                    )
                ]
            ).tolist()
            unpacked, offset = [], 0
            for record, stats in pairs:
                n = len(stats)
                counts = packed[offset : offset + n]
                first = [-v for v in packed[offset + n : offset + 2 * n]]
                last = packed[offset + 2 * n : offset + 3 * n]
                bits = packed[offset + 3 * n : offset + 4 * n]
                max_abs = list(struct.unpack(f"{n}f", struct.pack(f"{n}i", *bits)))
                unpacked.append((record, counts, first, last, max_abs))
                offset += 4 * n
            read.append(unpacked)
        return read

    def _remember_names(self, record: _OptimizerRecord) -> None:
        """Copy the watched names of the record's parameters into it, so that a report read
        after the model was deleted still names them; called whenever either side changes."""
        for position, ref in enumerate(record.params):
            param = ref()
            named = None if param is None else self._names.get(id(param))
            if named is not None and named[0]() is param:
                record.names[position] = named[1]

    def _name(self, record: _OptimizerRecord, position: int) -> str:
        """The watched name of the parameter at ``position``, or the position itself."""
        name = record.names[position]
        if name is not None:
            return name
        group, index = record.positions[position]
        where = f"param_groups[{group}][{index}]"
        return where if len(self._records) == 1 else f"optimizers[{record.number}].{where}"
