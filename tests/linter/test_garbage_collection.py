"""The collector's pace during a run: raised, frozen for workers, and the caller's back after."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from lint_dummies import CollectionPace

import linter._engine as engine
from linter._engine import PARALLEL_MIN_FILES
from linter._garbage_collection import (
    YOUNG_THRESHOLD,
    fewer_collections,
    freeze_survivors,
    raise_threshold,
)
from linter.api import lint_paths


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    """Each test starts from CPython's defaults and leaves the process as it found it."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, *thresholds[1:])
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_the_block_raises_the_threshold_and_gives_the_callers_back() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
    assert gc.get_threshold() == before


def test_the_callers_threshold_is_back_after_an_exception() -> None:
    before = gc.get_threshold()
    with pytest.raises(KeyError), fewer_collections():
        raise KeyError("x")
    assert gc.get_threshold() == before


@pytest.mark.parametrize("chosen", [0, 50_000])
def test_a_threshold_the_caller_chose_is_left_alone(chosen: int) -> None:
    gc.set_threshold(chosen, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (chosen, 10, 10)
    raise_threshold()
    assert gc.get_threshold() == (chosen, 10, 10)


def test_survivors_are_frozen_until_the_block_ends() -> None:
    kept = [object() for _ in range(10)]
    with fewer_collections():
        freeze_survivors()
        assert gc.get_freeze_count() >= len(kept)
    assert gc.get_freeze_count() == 0


def test_nothing_is_frozen_outside_a_block() -> None:
    freeze_survivors()
    assert gc.get_freeze_count() == 0


def test_a_callers_own_freeze_is_neither_added_to_nor_undone() -> None:
    gc.freeze()
    theirs = gc.get_freeze_count()
    assert theirs > 0
    with fewer_collections():
        freeze_survivors()
        assert gc.get_freeze_count() == theirs
    assert gc.get_freeze_count() == theirs


def test_a_nested_block_leaves_the_outer_blocks_freeze_in_place() -> None:
    with fewer_collections():
        freeze_survivors()
        frozen = gc.get_freeze_count()
        with fewer_collections():
            freeze_survivors()
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == 0


def test_a_worker_starts_with_the_raised_threshold_and_the_projects() -> None:
    saved = dict(engine._PROJECTS)
    try:
        engine._start_worker({})
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert engine._PROJECTS == {}
    finally:
        engine.use_projects(saved)


@pytest.mark.parametrize("jobs", [1, 2])
def test_files_are_linted_under_the_raised_threshold_with_the_run_frozen(
    tmp_path: Path, jobs: int
) -> None:
    count = PARALLEL_MIN_FILES + 4
    for index in range(count):
        (tmp_path / f"m{index:03}.py").write_text(f"x = {index}\n")
    result = lint_paths([tmp_path], rules=(CollectionPace,), jobs=jobs)
    assert len(result.diagnostics) == count
    assert {d.message for d in result.diagnostics} == {f"threshold {YOUNG_THRESHOLD} frozen True"}
    assert gc.get_threshold()[0] == 700
    assert gc.get_freeze_count() == 0
