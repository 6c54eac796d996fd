"""Import an optional framework, or fail with the one line that says how to get it."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str, integration: str) -> ModuleType:
    """``import module``, or an ``ImportError`` naming the pip extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"scaler.integrations.{integration} needs {module!r}, which is not installed: "
            f"install the extra ampscale[{extra}] "
            f"(in a clone of ampscale: pip install '.[{extra}]')"
        ) from exc
