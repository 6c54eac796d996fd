"""Version guards: which arm of an ``if`` runs only on an old version, and the compatibility
fallbacks beside the current API (AMP004 neither reports nor rewrites them)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.syntax._module_index import module_index
from linter.model.syntax._version_guards import CompatFallbacks, old_torch_arm
from linter.model.values._deprecated_amp_api import CURRENT_API


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


def _fallback_lines(source: str) -> list[int]:
    """Lines of the ``torch.cuda.amp`` calls that `CompatFallbacks` covers."""
    source = textwrap.dedent(source)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    index = module_index(context)
    fallbacks = CompatFallbacks(context, index, CURRENT_API)
    return [
        context.position(call).start.line
        for call in index.nodes(cst.Call)
        if "cuda.amp" in context.module.code_for_node(call.func) and fallbacks.covers(call)
    ]


def test_the_other_branch_of_an_if_a_conditional_or_a_try_using_torch_amp_is_a_fallback() -> None:
    assert _fallback_lines(
        """
        if is_torch_version(">=", "2.3"):
            scaler = torch.amp.GradScaler("cuda")
        else:
            scaler = torch.cuda.amp.GradScaler()
        s = torch.amp.GradScaler(device=d) if NEW else torch.cuda.amp.GradScaler()
        try:
            scaler = torch.amp.GradScaler(device=device)
        except (AttributeError, TypeError):
            scaler = torch.cuda.amp.GradScaler()
        if TORCH_VERSION < (1, 10):
            scaler = torch.cuda.amp.GradScaler()
        """
    ) == [5, 6, 10, 12]


def test_a_deprecated_call_with_no_current_api_beside_it_is_no_fallback() -> None:
    assert (
        _fallback_lines(
            """
        if use_amp:
            scaler = torch.cuda.amp.GradScaler()
        else:
            scaler = None
        try:
            scaler = torch.cuda.amp.GradScaler()
        except ImportError:
            scaler = None
        if TORCH_VERSION >= (1, 10):
            scaler = torch.cuda.amp.GradScaler()
        """
        )
        == []
    )
