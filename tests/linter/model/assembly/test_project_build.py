"""Reading a project's files for their facts, in worker processes or here: the same facts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from linter import _engine
from linter.api import _AnyRuleWants, lint_paths
from linter.model.assembly._project_build import (
    _PARALLEL_MIN,
    SummaryStore,
    _Prefilter,
    _read_facts,
    _run,
    build_project,
    files_to_summarise,
    scan_imports,
)
from linter.model.project._file_facts import FileFacts, content_digest
from linter.rules import ALL_RULES

WANTS = _AnyRuleWants(tuple(ALL_RULES))
PREFILTER = _Prefilter(WANTS)


def _files(tmp_path: Path) -> list[str]:
    paths = []
    for index in range(_PARALLEL_MIN + 8):
        path = tmp_path / f"m{index:03}.py"
        body = f"from pkg import helper{index}\nx = {index}\n"
        if index % 5 == 0:
            body += "scaler = torch.amp.GradScaler('cuda')\n"
        path.write_text(body, encoding="utf-8")
        paths.append(str(path))
    undecodable = tmp_path / "latin.py"
    undecodable.write_bytes(b"# \xff\xfe not utf-8\nx = 1\n")
    return [*paths, str(undecodable), str(tmp_path / "gone.py")]


def test_workers_read_the_facts_reading_here_gives(tmp_path: Path) -> None:
    paths = _files(tmp_path)
    here = _read_facts(paths, PREFILTER, workers=1)
    there = _read_facts(paths, PREFILTER, workers=2)
    assert set(here) == set(there) == set(paths)
    for path in paths:
        assert (here[path] is None) == (there[path] is None)
        if here[path] is not None:
            assert here[path][0] == there[path][0]  # type: ignore[index]
            assert here[path][1].st_ino == there[path][1].st_ino  # type: ignore[index]


def test_each_file_gets_its_digest_its_pre_filter_answer_and_its_imports(tmp_path: Path) -> None:
    paths = _files(tmp_path)
    facts = _read_facts(paths, PREFILTER, workers=2)
    for path in paths[: _PARALLEL_MIN + 8]:
        data = Path(path).read_bytes()
        text = data.decode()
        expected = FileFacts.of(content_digest(data), WANTS(text), scan_imports(text))
        assert facts[path] is not None
        assert facts[path][0] == expected  # type: ignore[index]
        assert facts[path][1].st_size == os.stat(path).st_size  # type: ignore[index]
    wanted = [p for p in paths[: _PARALLEL_MIN + 8] if facts[p][0].wants]  # type: ignore[index]
    assert len(wanted) == len(range(0, _PARALLEL_MIN + 8, 5))


def test_a_file_that_cannot_be_read_or_decoded_has_no_facts(tmp_path: Path) -> None:
    paths = _files(tmp_path)
    facts = _read_facts(paths, PREFILTER, workers=2)
    assert facts[str(tmp_path / "latin.py")] is None
    assert facts[str(tmp_path / "gone.py")] is None


def _wants_seven(text: str) -> bool:
    """A run's pre-filter that workers can be handed (a module's function)."""
    return "x = 7" in text


def test_the_other_rules_pre_filter_is_recorded_apart_here_and_in_workers(tmp_path: Path) -> None:
    paths = _files(tmp_path)
    for workers in (1, 2):
        facts = _read_facts(paths, _Prefilter(_wants_seven, WANTS), workers)
        read = {Path(p).name: f[0] for p, f in facts.items() if f is not None}
        assert {name for name, known in read.items() if known.wants} == {"m007.py"}
        # The GradScaler modules pass the other rules' test; a file the run's rules want is
        # not asked again.
        assert {name for name, known in read.items() if known.seeds} == {
            f"m{index:03}.py" for index in range(0, _PARALLEL_MIN + 8, 5)
        }


def test_a_pre_filter_defined_in_a_function_is_applied_all_the_same(tmp_path: Path) -> None:
    paths = _files(tmp_path)

    def local(text: str) -> bool:
        return "x = 7" in text

    facts = _read_facts(paths, _Prefilter(local), workers=2)
    wanted = {Path(p).name for p, f in facts.items() if f is not None and f[0].wants}
    assert wanted == {"m007.py"}


def test_summaries_made_in_workers_come_back_once_each_and_equal_those_made_here(
    tmp_path: Path,
) -> None:
    paths = _files(tmp_path)[: _PARALLEL_MIN + 8]
    todo = [(path, Path(path).read_bytes(), True) for path in paths]
    there = list(_run(todo, 2))
    here = {summary.path: summary for summary in _run(todo, 1)}
    assert sorted(summary.path for summary in there) == sorted(paths)
    assert all(summary == here[summary.path] for summary in there)


def test_the_files_to_summarise_are_those_a_built_project_summarises() -> None:
    fixtures = Path(__file__).parents[2] / "fixtures" / "projects"
    for root in (
        fixtures / "amp007_pos_helper_steps_optimizer",
        fixtures / "amp002_pos_loader_module",
    ):
        files = sorted(str(p) for p in root.rglob("*.py"))
        project = build_project(
            str(root), files, WANTS, SummaryStore(None, "test"), workers=1, linted=files
        )
        assert files_to_summarise(str(root), files, WANTS) == sorted(project.summaries)


def test_a_file_connected_to_no_amp_file_is_not_to_be_summarised(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\nfrom helper import step\nscaler = torch.amp.GradScaler('cuda')\n"
    )
    (tmp_path / "helper.py").write_text("def step(optimizer):\n    optimizer.step()\n")
    (tmp_path / "plots.py").write_text("def plot(values):\n    return sorted(values)\n")
    files = sorted(str(p) for p in tmp_path.glob("*.py"))
    chosen = files_to_summarise(str(tmp_path), files, WANTS)
    assert [Path(p).name for p in chosen] == ["helper.py", "train.py"]


def _entry_script_tree(tmp_path: Path) -> list[str]:
    """``main.py`` hands a ``models.py`` object to the trainer, which holds the AMP code:
    ``models.py`` names no trigger word and imports nothing of the trainer."""
    (tmp_path / "trainer.py").write_text(
        "import torch\n\n"
        "class Trainer:\n"
        "    def __init__(self, model):\n"
        "        self.model = model\n"
        "        self.scaler = torch.amp.GradScaler('cuda')\n\n"
        "    def fit(self, x):\n"
        "        self.model.fit_one(x)\n"
    )
    (tmp_path / "models.py").write_text(
        "class Net:\n    def fit_one(self, x):\n        return x + 1\n"
    )
    (tmp_path / "main.py").write_text(
        "from models import Net\nfrom trainer import Trainer\n\nTrainer(Net()).fit(1)\n"
    )
    return sorted(str(p) for p in tmp_path.glob("*.py"))


def test_what_an_entry_script_imports_is_summarised_for_its_classes_only(tmp_path: Path) -> None:
    files = _entry_script_tree(tmp_path)
    project = build_project(
        str(tmp_path), files, WANTS, SummaryStore(None, "test"), workers=1, linted=files
    )
    assert sorted(Path(p).name for p in project.summaries) == ["main.py", "models.py", "trainer.py"]
    assert [Path(p).name for p in project.classes_only] == ["models.py"]


def test_a_file_summarised_for_its_classes_only_is_not_linted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _entry_script_tree(tmp_path)
    linted: list[str] = []
    real = _engine.lint_text

    def recording(path: str, *args: object, **kwargs: object) -> object:
        linted.append(Path(path).name)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_engine, "lint_text", recording)
    lint_paths([str(tmp_path)], select=["ALL"], jobs=1)
    assert sorted(linted) == ["main.py", "trainer.py"]
