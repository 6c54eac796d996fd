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
from linter.model._summary import SUMMARY_FORMAT, ModuleSummary, summarize
from linter.model._summary_store import SummaryStore, summarise_file

FIXTURES = Path(__file__).parents[1] / "fixtures"
FILES = sorted(FIXTURES.rglob("*.py"))


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
