"""``--add-noqa``: a baseline for old code, and AMP100 shrinking it as bugs are fixed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from linter import lint_paths
from linter.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "examples"
    shutil.copytree(EXAMPLES, copy)
    monkeypatch.chdir(copy)
    return copy


def test_a_baseline_of_the_examples_then_lints_clean(
    examples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = lint_paths(["."], jobs=1).diagnostics
    assert len(before) >= 10
    assert main(["--no-cache", "--add-noqa", "."]) == 0
    assert capsys.readouterr().err.endswith(f"Added # noqa for {len(before)} findings.\n")
    assert main(["--no-cache", "."]) == 0
    # Each finding's own line carries its code; nothing else in the files changed.
    for d in before:
        line = (examples / d.path).read_text().splitlines()[d.line - 1]
        assert f"# noqa: {d.code}" in line or f", {d.code}" in line
    total_lines = sum(len(p.read_text().splitlines()) for p in EXAMPLES.glob("*.py"))
    assert total_lines == sum(len(p.read_text().splitlines()) for p in examples.glob("*.py"))


def test_removing_a_bug_leaves_amp100_on_its_noqa(
    examples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--no-cache", "--add-noqa", "."]) == 0
    path = examples / "grad_scaler_per_step.py"
    lines = path.read_text().splitlines(keepends=True)
    (number,) = [n for n, line in enumerate(lines, 1) if "# noqa: AMP009" in line]
    # The fix AMP009 asks for: the scaler is made once, before the loop; the old line keeps
    # its noqa, now on a plain assignment.
    indent = lines[number - 1][: len(lines[number - 1]) - len(lines[number - 1].lstrip())]
    lines[number - 1] = f"{indent}scaler = scaler  # noqa: AMP009\n"
    path.write_text("".join(lines))
    capsys.readouterr()
    assert main(["--no-cache", "grad_scaler_per_step.py"]) == 1
    out = capsys.readouterr().out
    assert out == (
        f"grad_scaler_per_step.py:{number}:{len(indent) + 18}: AMP100 [*] "
        "unused noqa: AMP009 has no finding here\n"
    )
    assert main(["--no-cache", "--fix", "grad_scaler_per_step.py"]) == 0
    assert path.read_text().splitlines()[number - 1] == f"{indent}scaler = scaler"


def test_existing_codes_and_comments_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("t.py").write_text(
        "import torch\n"
        'scaler = torch.amp.GradScaler("cuda")\n'
        "for batch in loader:\n"
        "    scaler.scale(model(batch)).backward()\n"
        "    print(scaler.get_scale())  # noqa: T201 -- logging\n"
        "    scaler.step(optimizer)  # keep\n"
        "    scaler.update()\n"
        "    scaler = torch.cuda.amp.GradScaler()  # type: ignore\n"
    )
    assert main(["--no-cache", "--add-noqa", "t.py"]) == 0
    assert Path("t.py").read_text().splitlines()[4:] == [
        "    print(scaler.get_scale())  # noqa: T201, AMP001 -- logging",
        "    scaler.step(optimizer)  # keep",
        "    scaler.update()",
        "    scaler = torch.cuda.amp.GradScaler()  # type: ignore  # noqa: AMP004, AMP009",
    ]
    assert main(["--no-cache", "t.py"]) == 0


def test_a_finding_whose_line_cannot_end_in_a_comment_is_left_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    source = "import torch\nscaler = torch.cuda.amp.GradScaler(init_scale=2.0 **\\\n    16)\n"
    Path("t.py").write_text(source)
    assert main(["--no-cache", "--add-noqa", "t.py"]) == 0
    err = capsys.readouterr().err
    assert (
        "amp-lint: note: t.py:2:10: AMP004 not suppressed: the line cannot end in a comment" in err
    )
    assert err.endswith("Added # noqa for 0 findings.\n")
    assert Path("t.py").read_text() == source


def test_notebook_cells_get_their_noqa(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cell = {
        "cell_type": "code",
        "metadata": {},
        "execution_count": None,
        "outputs": [],
        "source": [
            "%pip install torch\n",
            "import torch\n",
            "scaler = torch.cuda.amp.GradScaler()",
        ],
    }
    document = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    Path("t.ipynb").write_text(json.dumps(document, indent=1) + "\n")
    assert main(["--no-cache", "--add-noqa", "t.ipynb"]) == 0
    written = json.loads(Path("t.ipynb").read_text())
    assert written["cells"][0]["source"] == [
        "%pip install torch\n",
        "import torch\n",
        "scaler = torch.cuda.amp.GradScaler()  # noqa: AMP004",
    ]
    assert main(["--no-cache", "t.ipynb"]) == 0


def test_a_file_changed_meanwhile_is_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import linter._engine as engine

    path = tmp_path / "t.py"
    path.write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    real = engine.write_atomically

    def edited_first(target: str, data: bytes, **kwargs: object) -> None:
        Path(target).write_text("# edited by someone else\n")
        real(target, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "write_atomically", edited_first)
    (error,) = lint_paths([path], add_noqa=True).errors
    assert (
        error.message == "no # noqa added: the file changed on disk since it was read; not written"
    )
    assert path.read_text() == "# edited by someone else\n"


def test_add_noqa_with_fix_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("t.py").write_text("x = 1\n")
    assert main(["--add-noqa", "--fix", "t.py"]) == 2
    assert "--add-noqa cannot be combined with --fix" in capsys.readouterr().err
    assert main(["--add-noqa", "-"]) == 2
    assert "--add-noqa writes files; it cannot read standard input" in capsys.readouterr().err
