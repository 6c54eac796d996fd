"""Where ``torch.compile`` stops: the scaler's public methods run eagerly inside a compiled step.

torch's own ``GradScaler`` is never traced: dynamo's trace rules skip ``torch.amp``, so a compiled
training step breaks its graph at each scaler call and runs the call eagerly. Ours is user code to
dynamo, which traced into it. On torch 2.13 CPU that split one compiled step (fp16 autocast
forward, ``scale``, backward, ``unscale_``, clip, fused ``step``, ``update``) into 5 graphs where
torch's scaler gave 2 (``torch._dynamo.explain``): dynamo could not read the gradient grouping's
closure cell (``GradGroups.group``), and tracing on into ``optimizer.step`` reached the two
``torch._dynamo.graph_break()`` calls of torch's ``Optimizer`` wrapper (``_use_grad``), which
torch's skipped scaler never reaches. Nothing is gained by tracing the scaler: its bookkeeping is
Python state (per-optimizer stages, the host mirror's Python floats, on which dynamo would guard
and recompile whenever the scale changes), and its tensor work is a handful of in-place kernels.
So each public method is compiled out, recursively, exactly where torch's are skipped; a compiled
step then has torch's graph count, and its results are the eager ones by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

F = TypeVar("F", bound=Callable)


def eager_under_compile(method: F) -> F:
    """Run ``method`` eagerly when a compiled function calls it (one graph break at the call).

    Costs about 0.3 µs per call in eager mode (the wrapper's frame switch), measured on CPU.
    """
    return torch.compiler.disable(method)  # type: ignore[return-value]
