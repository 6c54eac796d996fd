"""amp-lint beside the real ruff (pinned in constraints.txt and the ``test`` extra): with the
setting docs/guides/beside-ruff.md gives, ruff's own noqa rules keep amp-lint's codes; without
it they delete or rewrite them. The setting is read from the page, so the docs cannot drift."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from linter import lint_source

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "beside-ruff.md"

#: A per-step scale read (AMP001) that a reviewer accepted, next to a ruff code.
TRAIN = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    scaler.scale(model(batch)).backward()
    s = scaler.get_scale()  # noqa: AMP001, F841
    scaler.step(optimizer)
    scaler.update()
"""


def documented_setting() -> str:
    (block,) = re.findall(r"```toml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    assert 'external = ["AMP"]' in block
    return block


def ruff(folder: Path, *args: str, config: bool) -> str:
    """Run ruff on ``train.py`` in ``folder`` and return the file's text afterwards."""
    settings = ["--config", str(folder / "pyproject.toml")] if config else ["--isolated"]
    subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", *settings, *args, "train.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return (folder / "train.py").read_text()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(documented_setting())
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def test_ruff_is_the_pinned_one() -> None:
    pins = (Path(__file__).resolve().parents[2] / "constraints.txt").read_text()
    (pinned,) = re.findall(r"^ruff==(\S+)$", pins, re.MULTILINE)
    version = subprocess.run(
        [sys.executable, "-m", "ruff", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert version.split() == ["ruff", pinned]


def test_ruf100_keeps_amp_codes_with_the_documented_setting(folder: Path) -> None:
    after = ruff(folder, "--fix", "--select", "RUF100", config=True)
    # F841 is not reported (not selected), so ruff removes it; AMP001 is external: kept.
    assert after.splitlines()[5] == "    s = scaler.get_scale()  # noqa: AMP001"
    assert lint_source(after) == []


def test_without_it_ruf100_deletes_the_comment_and_the_finding_returns(folder: Path) -> None:
    after = ruff(folder, "--fix", "--select", "RUF100", config=False)
    assert after.splitlines()[5] == "    s = scaler.get_scale()"
    assert [(d.line, d.code) for d in lint_source(after)] == [(6, "AMP001")]


def test_ruf105_leaves_amp_noqa_alone_with_the_setting_and_rewrites_it_without(
    folder: Path,
) -> None:
    (folder / "train.py").write_text(TRAIN.replace(", F841", ""))
    kept = ruff(folder, "--preview", "--fix", "--select", "RUF105", config=True)
    assert kept.splitlines()[5] == "    s = scaler.get_scale()  # noqa: AMP001"
    rewritten = ruff(folder, "--preview", "--fix", "--select", "RUF105", config=False)
    assert rewritten.splitlines()[5] == "    s = scaler.get_scale()  # ruff: ignore[AMP001]"
    # ruff's own spelling is ruff's: amp-lint does not read it (the page says why).
    assert [(d.line, d.code) for d in lint_source(rewritten)] == [(6, "AMP001")]
