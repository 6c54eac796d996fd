"""Count the host syncs a block of code makes: how ampscale's tests prove "no sync".

Private torch APIs: ``TorchDispatchMode`` and ``TorchFunctionMode`` (torch has no public way to
see every op a block runs; torch's own tests count syncs this way).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["SyncCounter"]

_DATA_DEPENDENT_TAGS = frozenset((torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape))
_COPIES = frozenset((torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default))
#: Tensor methods that hand host memory to Python, whatever the tensor's device.
_HOST_READS = frozenset(
    (torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.__array__, torch.Tensor.cpu)
)


def _is_device_to_host_copy(func: Any, args: tuple, kwargs: dict) -> bool:
    if func not in _COPIES:
        return False
    if func is torch.ops.aten.copy_.default:
        destination, source = args[0].device, args[1].device
    else:
        source = args[0].device
        destination = kwargs.get("device") or source
    return destination.type == "cpu" and source.type != "cpu"


def _names_the_host(args: tuple, kwargs: dict) -> bool:
    """Whether ``Tensor.to(*args, **kwargs)`` is a move to the host spelled as a string."""
    destination = kwargs.get("device", args[0] if args else None)
    return isinstance(destination, str) and torch.device(destination).type == "cpu"


class _DispatchWatch(TorchDispatchMode):
    def __init__(self, counter: SyncCounter) -> None:
        super().__init__()
        self._counter = counter

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if _DATA_DEPENDENT_TAGS.intersection(func.tags) or _is_device_to_host_copy(
            func, args, kwargs
        ):
            self._counter.count += 1
        return func(*args, **kwargs)


class _FunctionWatch(TorchFunctionMode):
    def __init__(self, counter: SyncCounter) -> None:
        super().__init__()
        self._counter = counter

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        source = args[0] if args else None
        reads = func in _HOST_READS or (
            func is torch.Tensor.to and _names_the_host(args[1:], kwargs)
        )
        # Only CPU sources here: a device source reaches the dispatch layer as a real copy.
        if (
            reads
            and isinstance(source, torch.Tensor)
            and source.device.type == "cpu"
            and not source.is_pinned()
        ):
            self._counter.count += 1
        return func(*args, **kwargs)


class SyncCounter:
    """Counts the host's reads of tensor memory inside a ``with`` block: the syncs of a loop.

    On an accelerator a sync is any read of device memory by the host, which first waits for
    every queued kernel. Two layers are watched, because on a CPU-only machine (where ampscale's
    tests run) the tensors are host memory already and nothing transfers:

    * Every device: an op whose result depends on tensor values — torch tags them
      ``data_dependent_output`` (``item()``, ``bool()``/``int()``/``float()`` of a tensor,
      ``equal``, ``allclose``) or ``dynamic_output_shape`` (``nonzero``, ``masked_select``,
      boolean-mask indexing, ``unique``): the output cannot even be allocated without reading
      the data. And a copy whose destination is the CPU and whose source is not (``.cpu()``,
      ``.to("cpu")``, ``.tolist()``, ``copy_`` into a CPU tensor). ``meta`` tensors count too,
      so tests can show this path without a GPU (the copy then fails, after being counted).
    * CPU tensors, as if they lived on an accelerator: ``.tolist()``, ``.numpy()``,
      ``numpy.asarray(t)``, ``.cpu()`` and ``.to("cpu")`` (the host named as a string) of a CPU
      tensor that is not pinned. Code that does these asks for host memory; on an accelerator
      each is a device-to-host copy. A move to a ``torch.device`` equal to the tensor's own (how
      code moves flags "to where they are needed", as torch's fused optimizers do) is not
      counted on CPU, where it cannot be told from a no-op; on an accelerator the first layer
      counts it. Pinned memory is host memory by construction: reading it is free.

    Each read is counted once. Example::

        with SyncCounter() as syncs:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        print(syncs.count)  # 0 with a fused optimizer
    """

    def __init__(self) -> None:
        #: Host reads seen so far.
        self.count = 0
        self._modes = (_FunctionWatch(self), _DispatchWatch(self))

    def __enter__(self) -> SyncCounter:
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(kind, error, traceback)
