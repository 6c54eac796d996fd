"""The command line, run in-process with the test-only rules registered."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from linter.cli import build_parser, main

pytestmark = pytest.mark.usefixtures("dummy_registry")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "clean.py").write_text("x = 1\n")
    (tmp_path / "train.py").write_text("for i in range(3):\n    print(i)\n")
    return tmp_path


def test_findings_exit_1_and_print_text(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["."]) == 1
    out, err = capsys.readouterr()
    assert out == "train.py:2:5: TST001 print called\n"
    assert err == "Found 1 error.\n"


def test_clean_files_exit_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["clean.py"]) == 0
    assert capsys.readouterr() == ("", "All checks passed!\n")


def test_exit_zero_keeps_findings_but_exits_0(project: Path) -> None:
    assert main(["--exit-zero", "."]) == 0


def test_quiet_drops_the_summary(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-q", "."]) == 1
    assert capsys.readouterr().err == ""


def test_unparsable_file_exits_2_and_others_are_still_reported(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "broken.py").write_text("print(\n")
    assert main(["."]) == 2
    out, err = capsys.readouterr()
    assert out == "train.py:2:5: TST001 print called\n"
    assert err.splitlines()[0].startswith("amp-lint: error: broken.py: cannot parse: ")


def test_exit_zero_covers_unparsable_files_and_still_reports_them(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ruff's semantics: --exit-zero exits 0 whatever was found, files it could not parse too.
    (project / "broken.py").write_text("print(\n")
    assert main(["--exit-zero", "."]) == 0
    out, err = capsys.readouterr()
    assert out == "train.py:2:5: TST001 print called\n"
    assert err.splitlines()[0].startswith("amp-lint: error: broken.py: cannot parse: ")


def test_exit_zero_does_not_hide_usage_or_configuration_errors(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--exit-zero", "--select", "NOPE999", "."]) == 2
    (project / "pyproject.toml").write_text("[tool.amp-lint]\nselect = 3\n")
    assert main(["--exit-zero", "."]) == 2
    assert "amp-lint: error:" in capsys.readouterr().err


def test_missing_path_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nope.py"]) == 2
    assert "amp-lint: error: nope.py: no such file or directory" in capsys.readouterr().err


def test_select_and_ignore_on_the_command_line(project: Path) -> None:
    assert main(["--ignore", "TST001", "."]) == 0
    assert main(["--select", "TST002,TST003", "."]) == 0
    assert main(["--select", "TST002", "--extend-select", "print-call", "."]) == 1


def test_unknown_selector_exits_2_naming_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--select", "TST001,BOGUS1", "."]) == 2
    assert capsys.readouterr().err == "amp-lint: error: select: unknown rule selector 'BOGUS1'\n"


def test_config_is_read_from_the_nearest_pyproject(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text("[tool.amp-lint]\nignore = ['print-call']\n")
    assert main(["."]) == 0


def test_bad_config_exits_2_naming_the_key(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text("[tool.amp-lint]\nselectt = ['ALL']\n")
    assert main(["."]) == 2
    assert capsys.readouterr().err == (
        f"amp-lint: error: {project / 'pyproject.toml'}: unknown key 'selectt' in [tool.amp-lint]\n"
    )


def test_config_option_overrides_search(project: Path) -> None:
    other = project / "other.toml"
    other.write_text("[tool.amp-lint]\nselect = ['TST002']\n")
    assert main(["--config", str(other), "."]) == 0


def test_per_file_ignores_and_extend_exclude_from_config(project: Path) -> None:
    (project / "gen").mkdir()
    (project / "gen" / "out.py").write_text("print(1)\n")
    (project / "pyproject.toml").write_text(
        "[tool.amp-lint]\nextend-exclude = ['gen']\n"
        "[tool.amp-lint.per-file-ignores]\n'train.py' = ['TST001']\n"
    )
    assert main(["."]) == 0
    assert main(["gen/out.py"]) == 1
    assert main(["--force-exclude", "gen/out.py"]) == 0


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_machine_formats_print_no_summary(
    project: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    assert main(["--format", fmt, "."]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    if fmt != "github":
        json.loads(out)


def test_statistics(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "more.py").write_text("print(1)\nprint(2)\n")
    assert main(["--statistics", "."]) == 1
    assert capsys.readouterr().out == "3\tTST001\tprint-call\n"


def test_stdin_with_stdin_filename(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\n\nprint(3)\n")))
    assert main(["-", "--stdin-filename", "src/job.py"]) == 1
    assert capsys.readouterr().out == "src/job.py:3:1: TST001 print called\n"


def test_list_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-rules"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "TST001\tprint-call\ta call of print",
        "TST002\texploding\ta rule with a bug",
        "TST003\tconfigurable\tnames listed in the options",
    ]


@pytest.mark.parametrize("code", ["TST001", "print-call"])
def test_explain_accepts_code_or_name(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--explain", code]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# print-call (TST001)\n\na call of print\n")
    assert "## What it does" in out


def test_explain_shows_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--explain", "TST003"]) == 0
    assert "- `limit` (default `3`): most findings per file" in capsys.readouterr().out


def test_explain_unknown_rule_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--explain", "AMP999"]) == 2
    assert capsys.readouterr().err == "amp-lint: error: --explain: unknown rule 'AMP999'\n"


@pytest.mark.parametrize(
    "argv", [["--format", "xml"], ["--jobs", "0"], ["--jobs", "many"], ["--no-such-flag"]]
)
def test_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2


def test_parser_is_public_for_the_docs() -> None:
    help_text = build_parser().format_help()
    for option in (
        "--format",
        "--select",
        "--ignore",
        "--extend-select",
        "--statistics",
        "--explain",
        "--list-rules",
        "--version",
        "--exit-zero",
        "--jobs",
        "--stdin-filename",
        "--config",
        "--quiet",
        "--force-exclude",
    ):
        assert option in help_text


def test_with_no_rules_registered_every_file_is_clean(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import linter.cli
    import linter.rules

    monkeypatch.setattr(linter.rules, "ALL_RULES", ())
    monkeypatch.setattr(linter.cli, "ALL_RULES", ())
    (project / "broken.py").write_text("print(\n")  # never parsed: no rule wants it
    assert main(["."]) == 0
    assert capsys.readouterr() == ("", "All checks passed!\n")


def test_closed_output_pipe_ends_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with (tmp_path / "out").open("w") as sink:

        class ClosedPipe(io.StringIO):
            def write(self, text: str) -> int:
                raise BrokenPipeError(32, "Broken pipe")

            def fileno(self) -> int:
                return sink.fileno()

        monkeypatch.setattr(sys, "stdout", ClosedPipe())
        assert main(["--list-rules"]) == 2
