"""Fixtures for the rule tests: rules run directly, without the engine."""

from __future__ import annotations

import pytest
from rule_runner import run_rule


@pytest.fixture
def lint():
    """``lint(Rule, source)`` -> sorted (line, column, message) findings."""
    return run_rule
