"""Jupyter notebooks: code cells linted as one module, IPython syntax masked in place,
``path:cell N:line:col`` positions, fixes written back into the cells' source only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from fix_dummies import FIX_RULES

import linter.cli
import linter.rules
from linter import lint_paths, lint_source
from linter._notebook import mask_cell
from linter.cli import main
from linter.rules import ALL_RULES

FIXTURES = Path(__file__).parent / "fixtures"
COLAB = FIXTURES / "notebooks" / "flan_t5_fp16_t4.ipynb"


def notebook(*cells: tuple[str, str], indent: int = 1) -> str:
    """A notebook as nbformat writes it: cells given as (cell_type, source)."""
    document = {
        "cells": [
            {
                "cell_type": kind,
                "metadata": {},
                "source": source.splitlines(keepends=True),
                **({"execution_count": None, "outputs": []} if kind == "code" else {}),
            }
            for kind, source in cells
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(document, indent=indent, ensure_ascii=False) + "\n"


@pytest.fixture
def fix_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(linter.rules, "ALL_RULES", FIX_RULES)
    monkeypatch.setattr(linter.cli, "ALL_RULES", FIX_RULES)
    monkeypatch.chdir(tmp_path)


def test_findings_name_the_cell_counting_markdown_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(COLAB, "t4.ipynb")
    assert main(["--no-cache", "--select", "AMP001", "t4.ipynb"]) == 1
    out = capsys.readouterr().out
    # Cell 5 is the fifth cell in Jupyter (two of the four before it are markdown); the read
    # is on its ninth line, and the loop it is in starts on its second.
    assert out.startswith("t4.ipynb:cell 5:9:55: AMP001 `scaler.get_scale()` copies")
    assert "(inside the loop at cell 5, line 2)" in out


def test_cells_form_one_module() -> None:
    # The scaler made in one cell is known in a later one: ampscale's, so the read is fixable.
    source = notebook(
        ("code", "from scaler import GradScaler\nscaler = GradScaler('cuda')"),
        ("markdown", "# Train"),
        ("code", "for batch in loader:\n    scaler.update()\n    print(scaler.get_scale())"),
    )
    (diagnostic,) = lint_source(source, "nb.ipynb", rules=ALL_RULES, select=["AMP001"])
    assert (diagnostic.cell, diagnostic.line, diagnostic.column) == (3, 3, 11)
    assert diagnostic.fix is not None


def test_magics_are_masked_without_moving_positions() -> None:
    text = "!nvidia-smi\n%pip install -q x\nfiles = !ls\nif colab:\n    !pip install y\nmodel?\n"
    masked, lines = mask_cell(text)
    assert [len(line) for line in masked.splitlines()] == [len(line) for line in text.splitlines()]
    assert lines == {1, 2, 3, 5, 6}
    compile(masked, "cell", "exec")  # a magic alone in an `if` body still leaves a statement


def test_shell_and_time_cells() -> None:
    masked, lines = mask_cell("%%bash\necho get_scale\n")
    assert lines == {1, 2}
    masked, lines = mask_cell("%%time\nx = 1\n")
    assert (masked, lines) == ("#%time\nx = 1\n", {1})


def test_noqa_works_inside_a_cell() -> None:
    source = notebook(("code", "x = 1"), ("code", "print(x)  # noqa: TST101\nprint(2)"))
    (diagnostic,) = lint_source(source, "nb.ipynb", rules=FIX_RULES)
    assert (diagnostic.cell, diagnostic.line) == (2, 2)


def test_fix_rewrites_only_the_code_cells_source(fix_registry: None) -> None:
    path = Path("nb.ipynb")
    original = notebook(
        ("markdown", "print(1) in markdown is prose"),
        ("code", "x = 1\nprint(x)"),
        ("code", "%pip install x\nprint('é')"),
    )
    path.write_text(original, encoding="utf-8")
    assert main(["--fix", "nb.ipynb"]) == 0
    fixed = path.read_text(encoding="utf-8")
    document = json.loads(fixed)
    assert [cell["source"] for cell in document["cells"]] == [
        ["print(1) in markdown is prose"],
        ["x = 1\n", "log(x)"],
        ["%pip install x\n", "log('é')"],
    ]
    # Only the fixed lines differ: same indentation, key order, non-ASCII kept, final newline.
    changed = [
        (before, after)
        for before, after in zip(original.splitlines(), fixed.splitlines(), strict=True)
        if before != after
    ]
    assert changed == [
        ('    "print(x)"', '    "log(x)"'),
        ("    \"print('é')\"", "    \"log('é')\""),
    ]
    assert fixed.endswith("}\n")


def test_fix_keeps_another_indentation_and_key_order(fix_registry: None) -> None:
    document = {
        "nbformat": 4,
        "nbformat_minor": 2,
        "metadata": {},
        "cells": [{"source": "print(1)\n", "outputs": [], "cell_type": "code", "metadata": {}}],
    }
    Path("nb.ipynb").write_text(json.dumps(document, indent=2))
    assert main(["--fix", "nb.ipynb"]) == 0
    document["cells"][0]["source"] = "log(1)\n"
    assert Path("nb.ipynb").read_text() == json.dumps(document, indent=2)


def test_invalid_notebooks_are_one_line_errors_and_others_are_still_linted(
    fix_registry: None, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("broken.ipynb").write_text('{"cells": [')
    Path("other.ipynb").write_text('{"data": []}')
    Path("train.py").write_text("print(1)\n")
    assert main(["."]) == 2
    out, err = capsys.readouterr()
    assert out == "train.py:1:1: TST101 [*] print called\n"
    assert err.splitlines()[:2] == [
        "amp-lint: error: broken.ipynb: not a Jupyter notebook: invalid JSON: Expecting value "
        "at line 1, column 12",
        'amp-lint: error: other.ipynb: not a Jupyter notebook: no "cells" list',
    ]


def test_folder_walks_find_notebooks_unless_include_leaves_them_out(fix_registry: None) -> None:
    Path("nb.ipynb").write_text(notebook(("code", "print(1)")))
    assert lint_paths(["."]).files_checked == 1
    Path("pyproject.toml").write_text('[tool.amp-lint]\ninclude = ["*.py"]\n')
    assert main(["."]) == 0


def test_json_and_sarif_carry_the_cell(
    fix_registry: None, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("nb.ipynb").write_text(notebook(("markdown", "# t"), ("code", "x = 1\nprint(x)")))
    assert main(["--format", "json", "nb.ipynb"]) == 1
    (record,) = json.loads(capsys.readouterr().out)
    assert (record["cell"], record["location"]) == (2, {"row": 2, "column": 1})
    assert main(["--format", "sarif", "nb.ipynb"]) == 1
    log = json.loads(capsys.readouterr().out)
    schema = json.loads((FIXTURES / "sarif-schema-2.1.0.json").read_text())
    jsonschema.validate(log, schema, cls=jsonschema.Draft4Validator)
    (location,) = log["runs"][0]["results"][0]["locations"]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "nb.ipynb"
    assert location["physicalLocation"]["properties"] == {"cell": 2}


def test_a_non_python_notebook_is_not_linted(fix_registry: None) -> None:
    document = json.loads(notebook(("code", "print(1)")))
    document["metadata"] = {"kernelspec": {"language": "R", "name": "ir"}}
    Path("r.ipynb").write_text(json.dumps(document))
    assert main(["r.ipynb"]) == 0


def test_extend_include_adds_to_the_collected_files(fix_registry: None) -> None:
    Path("stub.pyi").write_text("print(1)\n")
    Path("train.py").write_text("x = 1\n")
    assert lint_paths(["."]).files_checked == 1
    Path("pyproject.toml").write_text('[tool.amp-lint]\nextend-include = ["*.pyi"]\n')
    assert main(["."]) == 1


def test_python_continuation_lines_that_start_with_operators_are_not_magics() -> None:
    text = "x = (a\n     % b)\ny = (a\n     != b)\n"
    assert mask_cell(text) == (text, frozenset())


def test_lines_are_counted_as_python_counts_them() -> None:
    # A form feed or U+2028 inside a cell is not a line break for Python: positions after it
    # must not shift.
    source = notebook(("code", 'x = "a\u2028b"\f\ny = 2'), ("code", "z = 3\nprint(x)"))
    (diagnostic,) = lint_source(source, "nb.ipynb", rules=FIX_RULES)
    assert (diagnostic.cell, diagnostic.line, diagnostic.column) == (2, 2, 1)
