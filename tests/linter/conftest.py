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


@pytest.fixture(autouse=True)
def cache_outside_the_tree(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Runs of the command (in-process or in a subprocess) keep their result cache in a fresh
    folder of their own: a test never leaves ``.amp_lint_cache`` in the source tree, nor reads
    one another test wrote. Tests of where the cache goes unset the variable."""
    monkeypatch.setenv("AMP_LINT_CACHE_DIR", str(tmp_path_factory.mktemp("amp-lint-cache")))
