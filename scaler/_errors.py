"""Exception types that keep torch's ``except`` clauses working while saying what went wrong.

``torch.amp.GradScaler`` raises ``AssertionError`` for bad arguments and for misuse such as
``update()`` with no recorded inf check. Code written against torch may catch ``AssertionError``,
so ours derive from it as well as from the exception a user would expect today.
"""

from __future__ import annotations


class ScalerArgumentError(ValueError, AssertionError):
    """An invalid argument or state-dict entry; catches as ``ValueError`` and as torch's type."""


class ScalerUsageError(RuntimeError, AssertionError):
    """The scaler was used out of order; catches as ``RuntimeError`` and as torch's type."""


class ScalerTypeError(TypeError, AttributeError):
    """An argument of the wrong type where torch fails with ``AttributeError`` on it (an
    "optimizer" without ``param_groups``); catches as ``TypeError`` and as torch's type."""
