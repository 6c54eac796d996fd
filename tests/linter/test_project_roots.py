"""A file's project is found from the file, never from the folder amp-lint runs in.

Each folder of ``fixtures/projects/without_markers`` is a small training project with no
``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``: scripts that put the repository on
their own ``sys.path``, a package chain, a folder of three experiments each with its own ``lib``
package, ``tools/`` scripts importing from the root, namespace packages. Copied to a folder with
no marker above it, every file must get the same findings however it is linted: ``amp-lint .``
inside the project, ``amp-lint project/`` from its parent, ``amp-lint /abs/file.py`` from ``/``,
by the pre-commit hook (file names, ``--force-exclude``) and through the language server; and
those are the lines marked ``# expect: AMPnnn``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_projects import WITHOUT_MARKERS, expected

from linter.api import lint_paths
from linter.model.project import ROOT_MARKERS
from linter.report import format_json

FIXTURES = WITHOUT_MARKERS
PROJECTS = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
FILES = [
    (project, path.relative_to(FIXTURES / project).as_posix())
    for project in PROJECTS
    for path in sorted((FIXTURES / project).rglob("*.py"))
]
REPOSITORY = Path(__file__).resolve().parents[2]
#: Seconds one command may take: a run that read the whole file system from `/` (as amp-lint
#: did when the folder it ran in was the project) fails here instead of hanging.
TIMEOUT_S = 120

#: One finding, as the same for every way of linting: the file (relative to the project), line,
#: column, code, message, and the related locations (file relative to the project, or "" for
#: the finding's own, line, column).
Finding = tuple[str, int, int, str, str, frozenset[tuple[str, int, int]]]


def unmarked_place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh folder with no project marker at or above it (this repository has one above the
    fixtures, so they are copied out)."""
    place = tmp_path_factory.mktemp("unmarked")
    for folder in (place, *place.parents):
        assert not any((folder / marker).exists() for marker in ROOT_MARKERS), folder
    return place


def amp_lint(cwd: Path | str, *args: str) -> list[dict[str, object]]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "linter",
            "--no-cache",
            "--select",
            "ALL",
            "--format",
            "json",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    assert result.stdout.startswith("["), (result.returncode, result.stdout, result.stderr)
    found: list[dict[str, object]] = json.loads(result.stdout)
    return found


def as_findings(rows: list[dict[str, object]], cwd: Path | str, root: Path) -> set[Finding]:
    """The findings of a JSON report made in ``cwd``, their paths relative to ``root``."""

    def relative(name: object) -> str:
        return Path(cwd, str(name)).resolve().relative_to(root.resolve()).as_posix()

    found = set()
    for row in rows:
        location, related = row["location"], row["related"]
        assert isinstance(location, dict)
        assert isinstance(related, list)
        found.add(
            (
                relative(row["filename"]),
                location["row"],
                location["column"],
                str(row["code"]),
                str(row["message"]),
                # Another file is named as the command line names files (from ``cwd``): a tool
                # opens it from there; relative to the project it is the same whatever the run.
                frozenset(
                    (relative(r["filename"]) if "filename" in r else "", *r["location"].values())
                    for r in related
                ),
            )
        )
    return found


def in_process(cwd: Path, path: str, root: Path) -> set[Finding]:
    """`as_findings` of ``lint_paths([path])`` run in this process from ``cwd``."""
    here = os.getcwd()
    os.chdir(cwd)
    try:
        result = lint_paths([path], select=["ALL"], jobs=1)
    finally:
        os.chdir(here)
    assert not result.errors, result.errors
    return as_findings(json.loads(format_json(result)), cwd, root)


def hook_command() -> list[str]:
    """The pre-commit hook's command, as pre-commit runs it (`test_precommit_hook.py`)."""
    (hook,) = yaml.safe_load((REPOSITORY / ".pre-commit-hooks.yaml").read_text())
    entry = shlex.split(hook["entry"])
    return [str(Path(sys.executable).parent / entry[0]), *entry[1:], *hook.get("args", [])]


class Runs:
    """The findings of each fixture project, linted each way, made once for the module."""

    def __init__(self, place: Path) -> None:
        self.place = place
        self.roots: dict[str, Path] = {}
        self.ways: dict[str, dict[str, set[Finding]]] = {}

    def root(self, project: str) -> Path:
        if project not in self.roots:
            root = self.place / project
            shutil.copytree(FIXTURES / project, root)
            self.roots[project] = root
        return self.roots[project]

    def by_way(self, project: str) -> dict[str, set[Finding]]:
        if project not in self.ways:
            root = self.root(project)
            names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
            hook = subprocess.run(
                [*hook_command(), "--no-cache", "--select", "ALL", "--format", "json", *names],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                check=False,
            )
            assert hook.returncode in (0, 1), hook.stderr
            self.ways[project] = {
                "inside": in_process(root, ".", root),
                "from the parent": in_process(root.parent, project, root),
                "pre-commit": as_findings(json.loads(hook.stdout), root, root),
            }
        return self.ways[project]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return Runs(unmarked_place(tmp_path_factory))


def of_file(findings: set[Finding], relative: str) -> set[Finding]:
    return {finding for finding in findings if finding[0] == relative}


@pytest.mark.parametrize("project", PROJECTS)
def test_inside_the_project_the_marked_lines_are_reported(runs: Runs, project: str) -> None:
    root = runs.root(project)
    found = {(path, line, code) for path, line, _col, code, *_ in runs.by_way(project)["inside"]}
    assert found == expected(root)


@pytest.mark.parametrize(("project", "relative"), FILES, ids=["/".join(pair) for pair in FILES])
def test_each_file_gets_the_same_findings_however_it_is_linted(
    runs: Runs, project: str, relative: str
) -> None:
    root = runs.root(project)
    ways = {name: of_file(found, relative) for name, found in runs.by_way(project).items()}
    alone = amp_lint("/", str(root / relative))
    ways["alone, from /"] = as_findings(alone, "/", root)
    assert all(found == ways["inside"] for found in ways.values()), ways


def test_the_three_projects_keep_their_own_lib_packages(runs: Runs) -> None:
    # exp_b's clip helper unscales and exp_a's does not: were either `lib` taken for the other,
    # exp_b would get exp_a's AMP003, or exp_c's `train_step` would be unknown.
    inside = runs.by_way("three_projects")["inside"]
    found = {(path, code) for path, _line, _col, code, *_ in inside}
    assert found == {
        ("exp_a/train.py", "AMP003"),
        ("exp_a/tools/sweep.py", "AMP003"),
        ("exp_c/lib/utils.py", "AMP001"),
    }


def test_several_projects_are_one_sorted_stream(runs: Runs) -> None:
    root = runs.root("three_projects")
    rows = amp_lint(root, ".")
    assert [row["filename"] for row in rows] == sorted(str(row["filename"]) for row in rows)
    assert len(rows) == 3
    text = subprocess.run(
        [sys.executable, "-m", "linter", "--no-cache", "--select", "ALL", "-q", "."],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    ).stdout.splitlines()
    assert text == sorted(text)
    assert len(text) == 3


def test_one_file_from_home_or_from_the_root_reads_only_its_project(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = unmarked_place(tmp_path_factory) / "home"
    project = home / "code" / "proj"
    shutil.copytree(FIXTURES / "sys_path_scripts", project)
    # Everything else in the home folder: other projects, and a big tree of Python files.
    for index in range(300):
        target = home / "datasets" / f"part{index // 50}" / f"m{index}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("import torch\nscaler = torch.amp.GradScaler('cuda')\n", encoding="utf-8")
    shutil.copytree(FIXTURES / "three_projects", home / "code" / "experiments")
    (home / "notes.py").write_text("import json\n", encoding="utf-8")
    target = project / "scripts" / "finetune.py"
    monkeypatch.chdir(project)
    from_inside = lint_paths(["."], select=["ALL"], jobs=1)
    mine = {p.resolve() for p in project.rglob("*.py")}
    wanted = sorted(
        (d.line, d.column, d.code, d.message)
        for d in from_inside.diagnostics
        if Path(d.path).resolve() == target
    )
    assert wanted, "the fixture's finding in scripts/finetune.py"
    for cwd in (home, Path("/")):
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.chdir(cwd)
        seen: list[str] = []

        def hook(event: str, args: tuple[object, ...], seen: list[str] = seen) -> None:
            if event == "open" and isinstance(args[0], str) and args[0].endswith(".py"):
                seen.append(os.path.abspath(args[0]))

        _watch(hook)
        try:
            result = lint_paths([str(target)], select=["ALL"], jobs=1)
        finally:
            _unwatch()
        assert sorted((d.line, d.column, d.code, d.message) for d in result.diagnostics) == wanted
        read = {Path(path).resolve() for path in seen}
        outside = read - mine
        # Nothing of the other projects or of the big tree; of the folders above the project,
        # only the files directly in them (their imports decide whether they claim it).
        assert all(path.parent in project.parents for path in outside), sorted(outside)
        assert read & mine == mine, "the project's files are read"
        assert len(read - outside) == len(mine)


_HOOKS: list[object] = []


def _watch(hook: object) -> None:
    """Run ``hook`` on every audit event until `_unwatch` (one audit hook for the module: they
    cannot be removed)."""
    if not _HOOKS:

        def dispatch(event: str, args: tuple[object, ...]) -> None:
            if _HOOKS and _HOOKS[-1] is not None:
                _HOOKS[-1](event, args)  # type: ignore[operator]

        sys.addaudithook(dispatch)
        _HOOKS.append(None)
    _HOOKS.append(hook)


def _unwatch() -> None:
    _HOOKS.pop()


def cli(cwd: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "linter", "--no-cache", "--select", "ALL", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


@pytest.fixture
def src_layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository whose step lives in a namespace package that only a script in a sibling
    folder imports (`experiments/run.py`, run as ``python -m experiments.run``): nothing in or
    around `trainer/engine.py` says that the repository is its project."""
    repo = unmarked_place(tmp_path_factory) / "repo"
    (repo / "experiments").mkdir(parents=True)
    (repo / "trainer").mkdir()
    shutil.copy(FIXTURES / "sys_path_scripts" / "engine.py", repo / "trainer" / "engine.py")
    (repo / "experiments" / "run.py").write_text(
        "import torch\n\n"
        "from trainer.engine import train_step\n\n\n"
        "def main(args, model, criterion, loader, optimizer):\n"
        '    scaler = torch.amp.GradScaler("cuda")\n'
        "    log = []\n"
        "    for batch in loader:\n"
        "        train_step(model, criterion, batch, optimizer, scaler, log)\n"
        "        scaler.step(optimizer)\n"
        "        scaler.update()\n",
        encoding="utf-8",
    )
    return repo


def test_project_root_settles_what_evidence_cannot(src_layout: Path) -> None:
    engine = str(src_layout / "trainer" / "engine.py")
    assert "AMP001" not in cli("/", engine).stdout
    named = cli("/", "--project-root", str(src_layout), engine)
    assert named.returncode == 1, named.stderr
    assert f"{engine}:18:16: AMP001" in named.stdout
    # The same from the setting, relative to the pyproject.toml that sets it.
    config = src_layout.parent / "tooling" / "pyproject.toml"
    config.parent.mkdir()
    config.write_text("[tool.amp-lint]\nproject-root = '../repo'\n", encoding="utf-8")
    configured = cli("/", "--config", str(config), engine)
    assert configured.stdout == named.stdout


def test_a_project_root_that_is_no_folder_or_does_not_hold_the_files_is_a_usage_error(
    src_layout: Path,
) -> None:
    missing = cli(src_layout, "--project-root", "missing", ".")
    assert missing.returncode == 2
    assert "amp-lint: error: --project-root missing: not a folder" in missing.stderr
    narrow = cli(src_layout, "--project-root", "trainer", "experiments/run.py")
    assert narrow.returncode == 2
    where = src_layout / "experiments/run.py"
    assert f"amp-lint: error: --project-root trainer: does not hold {where}" in narrow.stderr


def test_a_very_large_project_is_said_once_with_how_to_narrow_it(
    src_layout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(src_layout)
    monkeypatch.setattr("linter.api.LARGE_PROJECT_FILES", 1)
    result = lint_paths(["."], select=["ALL"], jobs=1)
    (note,) = result.notes
    # trainer/ is a project of its own (one file); the script's is the repository (two).
    run = src_layout / "experiments" / "run.py"
    assert note.startswith(f"read 2 Python files: the project of {run} is {src_layout} (")
    assert "--project-root" in note
    assert "exclude" in note


def test_a_scripts_own_sys_path_is_followed_under_a_marker_above_it(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The monorepo's .git makes it the project; the tools/ scripts of one of its projects still
    # import from the folder they put on their path, and the run summarises what they import.
    mono = unmarked_place(tmp_path_factory) / "mono"
    shutil.copytree(FIXTURES / "tools_import_root", mono / "projects" / "foo")
    (mono / ".git").mkdir()
    root = mono / "projects" / "foo"
    wanted = {(f"projects/foo/{path}", line, code) for path, line, code in expected(root)}
    assert wanted
    for paths in ([mono], [root / "tools" / "train.py", root / "tools" / "finetune.py"]):
        result = lint_paths([str(p) for p in paths], select=["ALL"], jobs=1)
        found = {
            (Path(d.path).relative_to(mono).as_posix(), d.line, d.code) for d in result.diagnostics
        }
        assert found == wanted
