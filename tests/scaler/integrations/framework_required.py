"""Import a framework the integration tests need: skipped where it is not installed, but an
error in CI, where tox installs the ``integrations`` extra, so that a lost install cannot turn
these tests into silent skips."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def need(module: str) -> ModuleType:
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} is not installed (ampscale[integrations])")
