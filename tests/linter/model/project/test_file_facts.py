"""The files' facts: an unchanged file is not read again, a changed one always is, and a warm run
over a project reads neither files nor summaries."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import linter._engine
import linter.model.assembly._project_build
import linter.model.project._summary_store
from linter.api import lint_paths
from linter.model.project import _file_facts
from linter.model.project._file_facts import FactsStore, FileFacts

PROJECTS = Path(__file__).parents[2] / "fixtures" / "projects"
FACTS = FileFacts.of("d" * 64, True, [("engine", 0, ("train_one_epoch",))])


@pytest.fixture
def trusted_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test are trusted at once (in real use, two seconds after their
    last change)."""
    monkeypatch.setattr(_file_facts, "_RACY_NS", 0)


def saved(folder: Path, path: Path, facts: FileFacts = FACTS) -> FactsStore:
    store = FactsStore(str(folder), str(path.parent), "rules")
    store.record(str(path), facts)
    store.save()
    return FactsStore(str(folder), str(path.parent), "rules")


@pytest.mark.usefixtures("trusted_now")
def test_facts_of_an_unchanged_file_come_back(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("import engine\n")
    assert saved(tmp_path / "cache", path).get(str(path)) == FACTS


@pytest.mark.usefixtures("trusted_now")
def test_whether_another_rule_wants_a_file_comes_back_too(tmp_path: Path) -> None:
    path = tmp_path / "utils.py"
    path.write_text("scaler = torch.amp.GradScaler('cuda')\n")
    seeds = FileFacts.of("e" * 64, False, [], seeds=True)
    assert saved(tmp_path / "cache", path, seeds).get(str(path)) == seeds
    assert saved(tmp_path / "other", path).get(str(path)) != seeds


@pytest.mark.usefixtures("trusted_now")
def test_a_file_rewritten_with_the_same_size_is_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("import engine\n")
    store = saved(tmp_path / "cache", path)
    info = path.stat()
    path.write_text("import models\n")
    # Even with the old modification time put back, the change time gives it away.
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size
    assert store.get(str(path)) is None


def test_a_file_changed_just_now_is_not_trusted_next_time(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("import engine\n")
    assert saved(tmp_path / "cache", path).get(str(path)) is None


@pytest.mark.usefixtures("trusted_now")
def test_other_rules_or_another_root_see_none_of_the_facts(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("import engine\n")
    saved(tmp_path / "cache", path)
    other_rules = FactsStore(str(tmp_path / "cache"), str(tmp_path), "other rules")
    other_root = FactsStore(str(tmp_path / "cache"), str(tmp_path / "sub"), "rules")
    assert other_rules.get(str(path)) is None
    assert other_root.get(str(path)) is None


@pytest.mark.usefixtures("trusted_now")
@pytest.mark.parametrize(
    "content",
    [b"", b"{", b'{"format": 2, "files": {"x": [[1, 2], ["d", true, "[]", null, null]]}}', b"[]"],
)
def test_a_corrupt_facts_file_is_a_miss(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "train.py"
    path.write_text("import engine\n")
    saved(tmp_path / "cache", path)
    (facts_file,) = (tmp_path / "cache" / "facts").iterdir()
    facts_file.write_bytes(content)
    assert FactsStore(str(tmp_path / "cache"), str(tmp_path), "rules").get(str(path)) is None


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(PROJECTS / "amp001_pos_engine_and_main", root)
    (root / "pyproject.toml").write_text("")
    (root / "notes.py").write_text("NOTES = 'nothing about training'\n")
    return root


def _lint(root: Path) -> list[tuple[str, int, str]]:
    result = lint_paths([str(root)], select=["ALL"], jobs=1, cache_dir=str(root / ".cache"))
    assert not result.errors
    return [(Path(d.path).name, d.line, d.code) for d in result.diagnostics]


@pytest.mark.usefixtures("trusted_now")
def test_a_warm_run_reads_no_file_and_no_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path)
    cold = _lint(root)
    assert cold

    def no_read(path: str) -> bytes:
        raise AssertionError(f"read {path}")

    def no_summary(self: object, key: str) -> None:
        raise AssertionError("loaded a summary")

    monkeypatch.setattr(linter._engine, "read_source", no_read)
    monkeypatch.setattr(linter.model.assembly._project_build, "read_source", no_read)
    monkeypatch.setattr(linter.model.project._summary_store.SummaryStore, "load", no_summary)
    assert _lint(root) == cold


@pytest.mark.usefixtures("trusted_now")
def test_an_edited_module_is_read_again_and_its_dependents_linted_again(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    cold = _lint(root)
    assert ("engine.py", 18, "AMP001") in cold
    main = root / "main.py"
    text = main.read_text()
    # The loop in main.py stops calling the engine's step: engine.py is unchanged, but its
    # per-step read of the scale was per step only through main.py's summary.
    main.write_text(text.replace("engine.train_step(", "engine.evaluate("))
    assert ("engine.py", 18, "AMP001") not in _lint(root)
    main.write_text(text)
    assert _lint(root) == cold


@pytest.mark.usefixtures("trusted_now")
def test_a_pruned_summary_is_made_again(tmp_path: Path) -> None:
    root = _project(tmp_path)
    cold = _lint(root)
    shutil.rmtree(root / ".cache" / "summaries")
    for entry in (root / ".cache").glob("v*/*/*.json"):
        entry.unlink()
    assert _lint(root) == cold


@pytest.mark.usefixtures("trusted_now")
def test_a_module_added_later_is_found_by_the_unchanged_files_importing_it(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    # A loop module with no trigger word: it is summarised only because it imports the engine.
    (root / "main.py").write_text(
        "import engine\n\n\n"
        "def main(args, model, criterion, loader, optimizer, amp_state):\n"
        "    log = []\n"
        "    for epoch in range(args.epochs):\n"
        "        for batch in loader:\n"
        "            engine.train_step(model, criterion, batch, optimizer, amp_state, log)\n"
    )
    engine = root / "engine.py"
    text = engine.read_text()
    assert ("engine.py", 18, "AMP001") in _lint(root)
    engine.unlink()
    assert _lint(root) == []
    # main.py is unchanged and its facts come from the cache, but its `import engine` names a
    # file again: main.py is summarised, and the engine's step is per step through its loop.
    engine.write_text(text)
    assert ("engine.py", 18, "AMP001") in _lint(root)


def test_scanned_imports_round_trip_and_a_malformed_record_reads_as_none() -> None:
    assert FACTS.imports == (("engine", 0, ("train_one_epoch",)),)
    assert FileFacts("d", True, '[["engine", "0", []]]').imports == ()
    assert FileFacts("d", True, "not json").imports == ()


def _edit_drops_then_restores(
    tmp_path: Path, fixture: str, edited: str, old: str, new: str, finding: tuple[str, int, str]
) -> None:
    """Lint a copy of project ``fixture``; replace ``old`` by ``new`` in its file ``edited``:
    ``finding`` is gone; put the file back: the first run's findings return. Files written
    into the copy's folder beforehand stay."""
    root = tmp_path / fixture
    shutil.copytree(PROJECTS / fixture, root, dirs_exist_ok=True)
    (root / "pyproject.toml").write_text("")
    cold = _lint(root)
    assert finding in cold
    path = root / edited
    text = path.read_text()
    path.write_text(text.replace(old, new))
    assert finding not in _lint(root)
    path.write_text(text)
    assert _lint(root) == cold


@pytest.mark.usefixtures("trusted_now")
def test_a_package_that_re_exports_another_module_is_followed_again_when_edited(
    tmp_path: Path,
) -> None:
    # The trainer imports the class through the package; which module defines it is the
    # package's answer, so editing only the package changes the trainer's findings.
    fixture = "amp011_pos_model_method_saves_through_a_package_reexport"
    stub = tmp_path / fixture / "lm" / "models" / "stub.py"
    stub.parent.mkdir(parents=True)
    stub.write_text(
        "class LanguageModel:\n    def save_checkpoint(self, file, optimizer, epoch):\n"
        "        pass\n"
    )
    _edit_drops_then_restores(
        tmp_path,
        fixture,
        "lm/models/__init__.py",
        "from .language_model import",
        "from .stub import",
        ("trainer.py", 23, "AMP011"),
    )


@pytest.mark.usefixtures("trusted_now")
def test_an_edited_caller_that_hands_a_parameter_another_object_is_read_again(
    tmp_path: Path,
) -> None:
    # What the engine's `amp_helper` is comes from its callers' summaries: a caller that starts
    # passing something else makes the engine's read unknown, though engine.py is unchanged.
    _edit_drops_then_restores(
        tmp_path,
        "amp001_pos_wrapper_parameter_passed_by_every_caller",
        "finetune.py",
        "helper = LossScalerWithNorm()",
        "helper = object()",
        ("engine.py", 12, "AMP001"),
    )


@pytest.mark.usefixtures("trusted_now")
def test_a_new_candidate_that_does_otherwise_makes_a_call_unknown_again(tmp_path: Path) -> None:
    # `model.clip_gradients(...)` on a model `MODELS[cfg.arch]` builds runs any project class's
    # `clip_gradients`: a module that gains one that does otherwise changes the loop's finding,
    # though neither the loop's file nor anything it named changed.
    fixture = "amp003_pos_registry_models_clip_alike"
    root = tmp_path / fixture
    shutil.copytree(PROJECTS / fixture, root)
    (root / "pyproject.toml").write_text("")
    registry = root / "models" / "__init__.py"
    registry.write_text(registry.read_text() + "from models.convnext import ConvNeXt\n")
    convnext = root / "models" / "convnext.py"
    convnext.write_text("class ConvNeXt:\n    def forward(self, x):\n        return x\n")
    finding = ("train.py", 16, "AMP003")
    assert finding in _lint(root)
    convnext.write_text(
        "class ConvNeXt:\n    def clip_gradients(self, max_norm):\n        return None\n"
    )
    assert finding not in _lint(root)
