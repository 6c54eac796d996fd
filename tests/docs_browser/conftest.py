"""The built site the browser check runs on, and throw-away copies of it to break on purpose.

These tests need Debian's chromium and chromium-driver, so the default test run does not collect
this folder (``norecursedirs`` in pyproject.toml); ``tox -e docs-browser`` builds the site and runs
them. A missing site or browser is a failure, never a skip.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import docs_browser

#: The repository root.
ROOT = Path(__file__).resolve().parents[2]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--docs-html",
        default=str(ROOT / "docs" / "_build" / "html"),
        help="the sphinx-build HTML output to check (default: docs/_build/html)",
    )
    parser.addoption(
        "--screenshots",
        default=str(ROOT / "docs" / "_build" / "screenshots"),
        help="where the check saves its screenshots (default: docs/_build/screenshots)",
    )


@pytest.fixture(scope="session")
def site(request: pytest.FixtureRequest) -> Path:
    html = Path(request.config.getoption("--docs-html"))
    if not (html / "index.html").is_file():
        pytest.fail(f"{html}: no built site; run sphinx-build first (tox -e docs-browser does)")
    for program in (docs_browser.CHROMIUM, docs_browser.CHROMEDRIVER):
        if not program.is_file():
            pytest.fail(f"{program} is missing: apt-get install chromium chromium-driver")
    return html


@pytest.fixture
def site_copy(site: Path, tmp_path: Path) -> Path:
    """A copy of the built site that a test may damage."""
    copy = tmp_path / "html"
    shutil.copytree(site, copy, ignore=shutil.ignore_patterns(".doctrees", ".buildinfo"))
    return copy
