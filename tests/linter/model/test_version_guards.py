"""old_torch_arm: which arm of an ``if`` runs only on an old version (AMP004's fallbacks)."""

from __future__ import annotations

import libcst as cst
import pytest

from linter.model._version_guards import old_torch_arm


@pytest.mark.parametrize(
    ("test", "arm"),
    [
        ("torch.__version__ < '1.10'", "body"),
        ("TORCH_VERSION >= (2, 4)", "orelse"),
        ("parse(torch.__version__) >= parse('2.4')", "orelse"),
        ("Version('2.4') > torch_version", "body"),
        ("not TORCH_VERSION < (1, 10)", "orelse"),
        ("is_torch_version('<=', '2.3')", "body"),
        ("is_torch_version('>=', '2.3')", "orelse"),
        ("is_torch_greater_or_equal('2.4')", "orelse"),
        ("torch_ver < 2.4", "body"),
        ("is_torch_greater_or_equal_than_1_10", "orelse"),
        ("not _TORCH_GREATER_EQUAL_2_4", "body"),
        ("utils.TORCH_1_10_PLUS", "orelse"),
        ("TORCH_LESS_THAN_2_4", "body"),
        # A flag needs torch, a version and one direction in its name.
        ("TORCH_2_4", None),
        ("_APEX_GREATER_EQUAL_0_1", None),
        ("is_torch_greater", None),
        # No version guard: direction unknown, or no version at all.
        ("TORCH_VERSION == (2, 4)", None),
        ("n_gpus < 2", None),
        ("torch.__version__ < other_version", None),
        ("use_amp", None),
    ],
)
def test_old_torch_arm(test: str, arm: str | None) -> None:
    assert old_torch_arm(cst.parse_expression(test)) == arm
