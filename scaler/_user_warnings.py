"""Warnings that point at the user's line, however deep inside the scaler they are issued.

A fixed ``stacklevel`` is right only for one call path: ``peek_scale()`` reports directly,
``get_scale()`` through a helper, pickling through ``state_dict()``; a refactoring silently moves
the warning into the library. Walking out of this package's files finds the caller every time.
"""

from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first frame outside the ``scaler`` package."""
    # Python 3.12's warnings.warn(skip_file_prefixes=...) does this; we support 3.10.
    level = 2  # 1 would be this function
    frame = sys._getframe(1)  # our caller, inside the package
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
