"""Each test gets a fresh accelerate state: its singletons outlive one Accelerator otherwise."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _fresh_accelerate_state() -> Iterator[None]:
    yield
    if importlib.util.find_spec("accelerate") is None:
        return
    from accelerate.state import AcceleratorState, GradientState, PartialState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    PartialState._reset_state()
