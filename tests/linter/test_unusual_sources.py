"""Sources CPython reads but libcst rejects, and notebooks with a cell that is not Python:
linted anyway, with a note, never dropped whole (issue 20, Robustness)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import libcst as cst
import pytest

from linter import LintError, lint_paths, lint_source
from linter._indentation import expand_indentation
from linter.cli import main

#: A speech-toolkit shape: the class and ``def`` indented with spaces, the method's body with a
#: tab plus four spaces (CPython reads the tab as 8 columns). The read on line 13 runs every step.
MIXED = (
    "import torch\n"
    "\n"
    "\n"
    "class Solver:\n"
    "    def __init__(self, model):\n"
    "        self.model = model\n"
    '        self.scaler = torch.amp.GradScaler("cuda")\n'
    "\n"
    "    def train(self, loader, optimizer):\n"
    "\t    for batch in loader:\n"
    "\t        loss = self.model(batch)\n"
    "\t        self.scaler.scale(loss).backward()\n"
    "\t        print(self.scaler.get_scale())\n"
    "\t        self.scaler.step(optimizer)\n"
    "\t        self.scaler.update()\n"
    '\t    doc = """keep\ttabs\n'
    '\t  in strings"""\n'
)


def test_the_mixed_file_is_one_cpython_accepts_and_libcst_rejects() -> None:
    # The premise: if either parser changes its mind, this test says so.
    ast.parse(MIXED)
    with pytest.raises(cst.ParserSyntaxError, match="no matching outer block for dedent"):
        cst.parse_module(MIXED)


def test_mixed_indentation_is_linted_at_the_files_own_columns() -> None:
    (finding,) = lint_source(MIXED, "solver.py", select=["AMP001"])
    assert (finding.line, finding.column) == (13, 16)
    assert MIXED.splitlines()[12][finding.column - 1 :].startswith("self.scaler.get_scale()")
    assert finding.fix is None


def test_expansion_leaves_string_contents_alone() -> None:
    expanded = expand_indentation(MIXED)
    assert expanded is not None
    assert '\t  in strings"""' in expanded.text
    assert "keep\ttabs" in expanded.text
    assert expanded.original_column(13, 17) == 10


def test_the_cli_notes_it_and_exits_on_the_findings_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("solver.py").write_text(MIXED)
    assert main(["--no-cache", "--select", "AMP001", "solver.py"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("solver.py:13:16: AMP001 ")
    assert "amp-lint: note: solver.py: indentation mixes tabs and spaces" in err
    assert "amp-lint: error" not in err


def test_fix_leaves_a_mixed_file_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "solver.py"
    path.write_text(MIXED.replace('torch.amp.GradScaler("cuda")', "torch.cuda.amp.GradScaler()"))
    before = path.read_bytes()
    result = lint_paths([path], select=["AMP004"], fix=True)
    assert [d.code for d in result.diagnostics] == ["AMP004"]
    assert result.errors == ()
    assert path.read_bytes() == before


def test_a_real_syntax_error_stays_an_error() -> None:
    broken = MIXED + "\t    if True\n"
    with pytest.raises(LintError, match="cannot parse: expected ':'"):
        lint_source(broken, "solver.py", select=["AMP001"])


def test_inconsistent_tabs_cpython_rejects_stay_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.py"
    path.write_text("import torch\nif x:\n        a = torch.amp.GradScaler()\n\tb = 2\n")
    (error,) = lint_paths([path], select=["AMP009"]).errors
    assert error.message.startswith("cannot parse: ")


def notebook(*sources: str) -> str:
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": source.splitlines(keepends=True),
        }
        for source in sources
    ]
    document = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(document, indent=1) + "\n"


TRAIN_CELL = (
    "import torch\n"
    'scaler = torch.amp.GradScaler("cuda")\n'
    "for batch in loader:\n"
    "    scaler.scale(model(batch)).backward()\n"
    "    print(scaler.get_scale())\n"
    "    scaler.step(optimizer)\n"
    "    scaler.update()\n"
)
#: What gets pasted into a code cell: a shell prompt and its output.
PASTED = (
    "(venv) $ nvidia-smi\n"
    "+-----------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |\n"
)


def test_a_notebook_cell_that_does_not_parse_is_left_out_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("train.ipynb").write_text(notebook("x = 1\n", PASTED, TRAIN_CELL))
    assert main(["--no-cache", "--select", "AMP001", "train.ipynb"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("train.ipynb:cell 3:5:11: AMP001 ")
    assert "amp-lint: note: train.ipynb: cell 2 does not parse (" in err
    assert "linted without it" in err
    assert "amp-lint: error" not in err


def test_fixing_such_a_notebook_keeps_the_pasted_cell(tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    path.write_text(
        notebook(PASTED, TRAIN_CELL.replace("torch.amp.GradScaler(", "torch.cuda.amp.GradScaler("))
    )
    result = lint_paths([path], select=["AMP004"], fix=True)
    assert result.errors == ()
    assert len(result.fixed) == 1
    cells = json.loads(path.read_text())["cells"]
    assert "".join(cells[0]["source"]) == PASTED
    assert "torch.amp.GradScaler(" in "".join(cells[1]["source"])


def test_a_notebook_whose_only_code_cell_does_not_parse_gives_a_note_not_an_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.ipynb"
    path.write_text(notebook("import torch\nscaler = torch.amp.GradScaler(\n"))
    result = lint_paths([path], select=["AMP009"])
    assert result.errors == ()
    assert result.notes == (
        f"{path}: cell 1 does not parse ('(' was never closed at line 2, column 30); "
        "linted without it",
    )


def test_the_note_survives_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("solver.py").write_text(MIXED)
    Path("train.ipynb").write_text(notebook(PASTED, TRAIN_CELL))
    for _ in range(2):
        assert main(["--select", "AMP001", "--statistics", "."]) == 1
        err = capsys.readouterr().err
        assert "amp-lint: note: solver.py: indentation mixes tabs and spaces" in err
        assert "amp-lint: note: train.ipynb: cell 1 does not parse" in err
    assert "2 from the cache" in err
