"""Every install command the README and the docs show installs from the clone, never by a name
from a package index: ampscale claims none, and an unrelated `scaler` distribution there would
install a top-level `scaler` module that clashes with ours."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: `pip install [options] WHAT`, as written in prose or a shell block.
PIP_INSTALL = re.compile(r"pip install((?:\s+-\S+)*)\s+(?P<what>[^\s`;&|]+)")
#: Tools the docs install to run checks, not ampscale itself.
TOOLS = {"tox", "pre-commit"}
#: A pinned torch, as the compatibility page installs to run the suite on another release.
PINNED_TORCH = re.compile(r"""^['"]?torch==[\w.]+['"]?$""")
FROM_THE_CLONE = re.compile(r"""^['"]?\.(\[[a-z,]+\])?['"]?$""")


def install_targets() -> list[tuple[str, str]]:
    return [
        (str(page.relative_to(ROOT)), match["what"])
        for page in PAGES
        if "_build" not in page.parts
        for match in PIP_INSTALL.finditer(page.read_text(encoding="utf-8"))
    ]


def test_the_pages_do_show_install_commands() -> None:
    assert {page for page, _ in install_targets()} >= {"README.md", "docs/quickstart.md"}


@pytest.mark.parametrize(("page", "target"), install_targets())
def test_each_install_command_installs_from_the_clone(page: str, target: str) -> None:
    allowed = target in TOOLS or FROM_THE_CLONE.match(target) or PINNED_TORCH.match(target)
    assert allowed, f"{page}: pip install {target}"
