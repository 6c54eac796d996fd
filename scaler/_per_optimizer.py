"""A per-optimizer map that does not keep optimizers alive and accepts any optimizer object.

torch keys its per-optimizer state by ``id(optimizer)``, so it takes any object with
``param_groups`` and ``step``. Our caches are weak-keyed, which needs the optimizer to be
hashable and weakly referenceable; a duck-typed optimizer with ``__slots__``, or an optimizer
class that defines ``__eq__`` (which makes it unhashable), is neither. Those are keyed by
``id()`` instead, as torch does, and those entries live as long as the scaler (a few small
objects per such optimizer). A recycled id is harmless: the gradient grouping is re-validated
every step and a found-inf flag is replaced at every step; only ``step_skipped()`` asked before
such an optimizer's first step could answer with a dead optimizer's flag instead of an error.
"""

from __future__ import annotations

import weakref
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class PerOptimizer(Generic[V]):
    """``optimizer -> value``, weak where the optimizer allows it, by ``id()`` otherwise."""

    __slots__ = ("_by_id", "_weak")

    def __init__(self) -> None:
        self._weak: weakref.WeakKeyDictionary[Any, V] = weakref.WeakKeyDictionary()
        self._by_id: dict[int, V] = {}

    def get(self, optimizer: Any) -> V | None:
        try:
            return self._weak.get(optimizer)
        except TypeError:
            return self._by_id.get(id(optimizer))

    def __setitem__(self, optimizer: Any, value: V) -> None:
        try:
            self._weak[optimizer] = value
        except TypeError:
            self._by_id[id(optimizer)] = value
