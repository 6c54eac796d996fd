"""Fixtures for the engine and CLI tests."""

from __future__ import annotations

import pytest
from lint_dummies import DUMMY_RULES

import linter.cli
import linter.rules


@pytest.fixture
def dummy_registry(monkeypatch: pytest.MonkeyPatch) -> tuple[type[linter.Rule], ...]:
    """Install the test-only rules as the registry the CLI and config read."""
    monkeypatch.setattr(linter.rules, "ALL_RULES", DUMMY_RULES)
    monkeypatch.setattr(linter.cli, "ALL_RULES", DUMMY_RULES)
    return DUMMY_RULES
