"""The result cache: reused only when content, settings and version match; never trusted when
corrupt or foreign; safe for runs sharing it at the same time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from lint_dummies import DUMMY_RULES

import linter.cli
import linter.rules
from linter import lint_paths
from linter._cache import CACHE_FOLDER
from linter.cli import main

pytestmark = pytest.mark.usefixtures("dummy_registry")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AMP_LINT_CACHE_DIR", raising=False)
    (tmp_path / "train.py").write_text("for i in range(3):\n    print(i)\n")
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


def entries(folder: Path) -> list[Path]:
    """Result entries (module summaries and the files' facts live beside them, under
    ``summaries/`` and ``facts/``)."""
    return sorted(p for p in folder.rglob("*.json") if not {"summaries", "facts"} & set(p.parts))


def test_a_second_run_comes_from_the_cache(project: Path) -> None:
    first = lint_paths(["."], cache_dir=CACHE_FOLDER)
    second = lint_paths(["."], cache_dir=CACHE_FOLDER)
    assert (first.files_cached, second.files_cached) == (0, 2)
    assert second.diagnostics == first.diagnostics
    assert second.files_parsed == 0


def test_the_cli_caches_next_to_pyproject_with_a_tag_and_a_gitignore(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.amp-lint]\n")
    (project / "sub").mkdir()
    os.chdir(project / "sub")
    assert main([".."]) == 1
    folder = project / CACHE_FOLDER
    assert (
        (folder / "CACHEDIR.TAG")
        .read_text()
        .startswith("Signature: 8a477f597d28d172789f06886806bc55")
    )
    assert (folder / ".gitignore").read_text().splitlines()[-1] == "*"
    assert len(entries(folder)) == 2


def test_a_changed_file_is_linted_again(project: Path) -> None:
    lint_paths(["."], cache_dir=CACHE_FOLDER)
    (project / "train.py").write_text("print(1)\nprint(2)\n")
    result = lint_paths(["."], cache_dir=CACHE_FOLDER)
    assert [d.line for d in result.diagnostics] == [1, 2]
    assert result.files_cached == 1


def test_changed_settings_are_a_miss(project: Path) -> None:
    lint_paths(["."], cache_dir=CACHE_FOLDER)
    assert lint_paths(["."], cache_dir=CACHE_FOLDER, ignore=["TST001"]).diagnostics == ()
    settings = linter.Settings(rule_options={"TST003": {"names": ["x"]}})
    result = lint_paths(["."], cache_dir=CACHE_FOLDER, settings=settings)
    assert sorted(d.code for d in result.diagnostics) == ["TST001", "TST003"]


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x80\x04\x95garbage that is not JSON",  # a pickle's opening bytes: never unpickled
        b"",
        b"[]",
        b'{"format": 1, "key": "0", "parsed": true, "errors": [], "diagnostics": []}',
        b"null",
    ],
)
def test_a_poisoned_cache_is_ignored(project: Path, garbage: bytes) -> None:
    honest = lint_paths(["."], cache_dir=CACHE_FOLDER)
    for entry in entries(project / CACHE_FOLDER):
        entry.write_bytes(garbage)
    result = lint_paths(["."], cache_dir=CACHE_FOLDER)
    assert result.diagnostics == honest.diagnostics
    assert result.files_cached == 0


def test_a_forged_entry_with_the_right_key_and_wrong_types_is_ignored(project: Path) -> None:
    honest = lint_paths(["."], cache_dir=CACHE_FOLDER)
    for entry in entries(project / CACHE_FOLDER):
        data = json.loads(entry.read_text())
        data["diagnostics"] = [{"line": "1", "column": True}]
        entry.write_text(json.dumps(data))
    assert lint_paths(["."], cache_dir=CACHE_FOLDER).diagnostics == honest.diagnostics


def test_no_cache_writes_nothing(project: Path) -> None:
    assert main(["--no-cache", "."]) == 1
    assert not (project / CACHE_FOLDER).exists()


def test_cache_dir_option_and_environment_variable(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["--cache-dir", "elsewhere", "."]) == 1
    assert len(entries(project / "elsewhere")) == 2
    monkeypatch.setenv("AMP_LINT_CACHE_DIR", str(project / "from-env"))
    assert main(["."]) == 1
    assert len(entries(project / "from-env")) == 2
    assert not (project / CACHE_FOLDER).exists()


def test_an_unwritable_cache_only_costs_speed(project: Path) -> None:
    (project / "not-a-folder").write_text("")
    result = lint_paths(["train.py"], cache_dir=project / "not-a-folder")
    assert [d.code for d in result.diagnostics] == ["TST001"]


def test_statistics_count_checked_parsed_skipped_and_cached_files(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only rules with trigger words of their own: a rule the run knows but did not select
    # still decides which modules the project summarises, and the registry's catch-all rules
    # (trigger "") would have every file summarised and looked up in the cache.
    registry = tuple(rule for rule in DUMMY_RULES if "" not in rule.triggers)
    monkeypatch.setattr(linter.rules, "ALL_RULES", registry)
    monkeypatch.setattr(linter.cli, "ALL_RULES", registry)
    (project / "broken.py").write_text("def broken(:\n")  # no trigger word: never parsed
    assert main(["--statistics", "--select", "TST001", "."]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        "files: 3 checked, 1 parsed, 2 skipped by the pre-filter (no trigger words), "
        "0 from the cache"
    )
    # The second run needs no result of the files without trigger words: what the first run
    # read of them (their facts) says so again.
    assert main(["--statistics", "--select", "TST001", "."]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        "files: 3 checked, 0 parsed, 2 skipped by the pre-filter (no trigger words), "
        "1 from the cache"
    )


def test_two_concurrent_runs_share_the_cache_safely(project: Path) -> None:
    for index in range(60):
        (project / f"m{index}.py").write_text(f"print({index})\n" * (index % 3) + "x = 1\n")
    script = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        import linter.cli, linter.rules
        from lint_dummies import DUMMY_RULES
        linter.rules.ALL_RULES = linter.cli.ALL_RULES = DUMMY_RULES
        sys.exit(linter.cli.main(["--jobs", "1", "."]))
        """
    )
    command = [sys.executable, "-c", script, str(Path(__file__).parent)]
    runs = [
        subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=120) for run in runs]
    expected = lint_paths(["."], rules=DUMMY_RULES)
    text = "".join(
        f"{d.path}:{d.line}:{d.column}: {d.code} {d.message}\n" for d in expected.diagnostics
    )
    for run, (out, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 1, err
        assert out.decode() == text
    for entry in entries(project / CACHE_FOLDER):
        json.loads(entry.read_text())  # every entry whole
    # And a third run, served from what the two wrote, agrees.
    third = lint_paths(["."], cache_dir=CACHE_FOLDER)
    assert third.files_cached == 62
    assert third.diagnostics == expected.diagnostics


def test_cache_dir_setting_is_relative_to_its_pyproject(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.amp-lint]\ncache-dir = "build/lint-cache"\n')
    (project / "sub").mkdir()
    os.chdir(project / "sub")
    assert main([".."]) == 1
    assert len(entries(project / "build" / "lint-cache")) == 2
