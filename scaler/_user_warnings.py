"""Warnings that point at the user's line, however deep inside the scaler they are issued.

A fixed ``stacklevel`` is right only for one call path: ``peek_scale()`` reports directly,
``get_scale()`` through a helper, pickling through ``state_dict()``; a refactoring silently moves
the warning into the library. Walking out of this package's files finds the caller every time,
and out of dynamo's, whose ``torch.compiler.disable`` wrapper sits between the user's line and each
public method (``_compile_boundary``).
"""

from __future__ import annotations

import os
import sys
import warnings

import torch

#: Frames of these directories are the library's, never the user's line.
_LIBRARY_DIRS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "_dynamo") + os.sep,
)


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first frame outside the ``scaler`` package (and
    outside dynamo's wrapper around its public methods)."""
    # Python 3.12's warnings.warn(skip_file_prefixes=...) does this; we support 3.10.
    level = 2  # 1 would be this function
    frame = sys._getframe(1)  # our caller, inside the package
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARY_DIRS):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
