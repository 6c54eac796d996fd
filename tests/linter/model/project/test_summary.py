"""A summary as data: its JSON, its digest, and the text a worker writes out once."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from linter._parse import parse_module
from linter._rule import ModuleContext
from linter.api import _AnyRuleWants
from linter.model.assembly._project_build import build_project
from linter.model.assembly._summarize import summarize
from linter.model.assembly._summary_making import summarise_file
from linter.model.project._summary import SUMMARY_FORMAT, ModuleSummary
from linter.model.project._summary_store import SummaryStore
from linter.rules import ALL_RULES

FIXTURES = Path(__file__).parents[2] / "fixtures"
FILES = sorted(FIXTURES.rglob("*.py"))
WANTS = _AnyRuleWants(tuple(rule() for rule in ALL_RULES))


def _asdict_json(summary: ModuleSummary) -> dict[str, Any]:
    """What `to_json` gave when it was `dataclasses.asdict` less the private fields."""
    data = {k: v for k, v in dataclasses.asdict(summary).items() if not k.startswith("_")}
    data["format"] = SUMMARY_FORMAT
    return data


def _both(path: Path) -> list[ModuleSummary]:
    text = path.read_text(encoding="utf-8")
    full = summarize(ModuleContext(str(path), text, parse_module(text)), str(path), has_amp=True)
    return [summarise_file((str(path), path.read_bytes(), True)), full]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_the_json_is_what_asdict_gives_on_every_fixture(path: Path) -> None:
    for summary in _both(path):
        dumped = json.dumps(summary.to_json(), sort_keys=True)
        assert dumped == json.dumps(_asdict_json(summary), sort_keys=True)


def test_the_digest_hashes_the_canonical_text() -> None:
    summary = _both(FIXTURES / "projects" / "amp007_pos_helper_steps_optimizer" / "train.py")[1]
    canonical = json.dumps(_asdict_json(summary), sort_keys=True, separators=(",", ":"))
    assert summary.text() == canonical
    assert summary.digest() == hashlib.sha256(canonical.encode()).hexdigest()[:32]


def test_a_worker_sends_its_text_along_and_the_text_stays_the_summarys() -> None:
    path = FIXTURES / "projects" / "amp007_pos_helper_steps_optimizer" / "train.py"
    made = summarise_file((str(path), path.read_bytes(), True))
    received = pickle.loads(pickle.dumps(made))
    assert received._text == [made.text()]
    fresh = ModuleSummary.from_json(json.loads(made.text()))
    assert fresh == received
    assert fresh.text() == received.text()


def test_the_store_writes_the_text_and_reads_back_the_summary(tmp_path: Path) -> None:
    path = FIXTURES / "projects" / "amp007_pos_helper_steps_optimizer" / "train.py"
    made = summarise_file((str(path), path.read_bytes(), True))
    store = SummaryStore(str(tmp_path), "code")
    store.store("ab12", made)
    (written,) = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written.read_text() == made.text()
    assert store.load("ab12") == made


def test_a_released_text_is_written_out_again_the_same_and_not_kept() -> None:
    path = FIXTURES / "projects" / "amp007_pos_helper_steps_optimizer" / "train.py"
    made = summarise_file((str(path), path.read_bytes(), True))
    kept = made.text()
    made.release_text()
    assert made._text == []
    assert made.text() == kept
    assert made._text == []


@pytest.mark.parametrize("cache", [False, True])
def test_a_built_project_keeps_no_summary_text(tmp_path: Path, cache: bool) -> None:
    root = FIXTURES / "projects" / "amp007_pos_helper_steps_optimizer"
    files = sorted(str(p) for p in root.rglob("*.py"))
    store = SummaryStore(str(tmp_path) if cache else None, "test")
    project = build_project(
        str(root),
        files,
        WANTS,
        store,
        workers=1,
        linted=files,
        wants_key="rules" if cache else None,
    )
    assert len(project.summaries) == len(files)
    assert all(project.summaries[path]._text == [] for path in project.summaries)
