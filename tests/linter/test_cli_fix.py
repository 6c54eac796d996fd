"""``--fix``, ``--diff``, ``--fix-only``, ``--show-fixes`` and ``--unsafe-fixes`` on real files:
exit codes as ruff, atomic writes that keep encoding, BOM, line endings and mode."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
from fix_dummies import FIX_RULES

import linter._atomic_write
import linter._engine
import linter.cli
import linter.rules
from linter.cli import main

SARIF_SCHEMA = Path(__file__).parent / "fixtures" / "sarif-schema-2.1.0.json"


@pytest.fixture(autouse=True)
def fix_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(linter.rules, "ALL_RULES", FIX_RULES)
    monkeypatch.setattr(linter.cli, "ALL_RULES", FIX_RULES)
    monkeypatch.chdir(tmp_path)


def write(name: str, text: str) -> Path:
    path = Path(name)
    path.write_text(text)
    return path


def test_fix_writes_the_file_and_exits_0_when_all_is_fixed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write("train.py", "print(1)\n")
    assert main(["--fix", "train.py"]) == 0
    assert path.read_text() == "log(1)\n"
    assert capsys.readouterr() == ("", "Found 1 error (1 fixed, 0 remaining).\n")


def test_fix_exits_1_for_what_remains(capsys: pytest.CaptureFixture[str]) -> None:
    write("train.py", "print(1)\nshout\n")
    assert main(["--fix", "train.py"]) == 1
    out, err = capsys.readouterr()
    assert out == "train.py:2:1: TST103 shout found\n"
    assert err.splitlines() == [
        "Found 2 errors (1 fixed, 1 remaining).",
        "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]


def test_a_fix_that_does_not_verify_leaves_the_file_untouched_with_a_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write("train.py", "breakme = 1\n")
    assert main(["--fix", "train.py"]) == 1
    assert path.read_text() == "breakme = 1\n"
    assert capsys.readouterr().err.splitlines()[0] == (
        "amp-lint: note: train.py:1:1: TST104 fix not applied: the fixed code does not parse"
    )


def test_text_marks_fixable_findings(capsys: pytest.CaptureFixture[str]) -> None:
    write("train.py", "print(1)\nshout\n")
    assert main(["train.py"]) == 1
    out, err = capsys.readouterr()
    assert out == "train.py:1:1: TST101 [*] print called\ntrain.py:2:1: TST103 shout found\n"
    assert err.splitlines()[-1] == (
        "[*] 1 fixable with the `--fix` option (1 hidden fix can be enabled with the "
        "`--unsafe-fixes` option)."
    )


def test_unsafe_fixes_applies_unsafe_ones(capsys: pytest.CaptureFixture[str]) -> None:
    path = write("train.py", "print(1)\nshout\n")
    assert main(["--fix", "--unsafe-fixes", "train.py"]) == 0
    assert path.read_text() == "log(1)\nSHOUT\n"


def test_diff_prints_a_unified_diff_and_writes_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write("train.py", "x = 1\nprint(x)\n")
    assert main(["--diff", "train.py"]) == 1
    assert path.read_text() == "x = 1\nprint(x)\n"
    out, err = capsys.readouterr()
    assert out == textwrap.dedent(
        """\
        --- a/train.py
        +++ b/train.py
        @@ -1,2 +1,2 @@
         x = 1
        -print(x)
        +log(x)
        """
    )
    assert err == "Would fix 1 error.\n"


def test_diff_without_fixes_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    write("train.py", "shout\n")
    assert main(["--diff", "train.py"]) == 0
    assert capsys.readouterr().out == ""


def test_fix_only_reports_nothing_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    path = write("train.py", "print(1)\nshout\n")
    assert main(["--fix-only", "train.py"]) == 0
    assert path.read_text() == "log(1)\nshout\n"
    assert capsys.readouterr() == ("", "Fixed 1 error.\n")


def test_show_fixes_lists_what_was_fixed(capsys: pytest.CaptureFixture[str]) -> None:
    write("train.py", "print(1)\nprint(2)\n")
    assert main(["--fix", "--show-fixes", "train.py"]) == 0
    assert (
        capsys.readouterr().out == "Fixed 2 errors:\n- train.py:\n    2 × TST101 (print-to-log)\n"
    )


def test_stdin_with_fix_prints_the_fixed_source(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"print(1)\nshout\n")))
    assert main(["--fix", "-", "--stdin-filename", "job.py"]) == 1
    out, err = capsys.readouterr()
    assert out == "log(1)\nshout\n"
    assert err.startswith("job.py:2:1: TST103 shout found\n")


def test_json_has_the_fix_object(capsys: pytest.CaptureFixture[str]) -> None:
    write("train.py", "if x:\n    print(1)\n")
    assert main(["--format", "json", "train.py"]) == 1
    (record,) = json.loads(capsys.readouterr().out)
    assert record["fix"] == {
        "applicability": "safe",
        "message": "rename to log",
        "edits": [
            {
                "content": "log",
                "location": {"row": 2, "column": 5},
                "end_location": {"row": 2, "column": 10},
            }
        ],
    }


def test_sarif_has_fixes_and_stays_valid(capsys: pytest.CaptureFixture[str]) -> None:
    write("train.py", "print(1)\n")
    assert main(["--format", "sarif", "train.py"]) == 1
    log = json.loads(capsys.readouterr().out)
    jsonschema.validate(log, json.loads(SARIF_SCHEMA.read_text()), cls=jsonschema.Draft4Validator)
    (result,) = log["runs"][0]["results"]
    (change,) = result["fixes"][0]["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "train.py"
    assert change["replacements"] == [
        {
            "deletedRegion": {"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 6},
            "insertedContent": {"text": "log"},
        }
    ]


class TestFaithfulWrites:
    """The fixed file is the original with only the fixed text changed."""

    def test_crlf_stays_crlf(self) -> None:
        path = Path("train.py")
        path.write_bytes(b"x = 1\r\nif x:\r\n    print(x)\r\n")
        assert main(["--fix", "train.py"]) == 0
        assert path.read_bytes() == b"x = 1\r\nif x:\r\n    log(x)\r\n"

    def test_bom_is_kept(self) -> None:
        path = Path("train.py")
        path.write_bytes(b"\xef\xbb\xbfname = '\xc3\xa9'\nprint(name)\n")
        assert main(["--fix", "train.py"]) == 0
        assert path.read_bytes() == b"\xef\xbb\xbfname = '\xc3\xa9'\nlog(name)\n"

    def test_coding_cookie_encoding_is_kept(self) -> None:
        path = Path("train.py")
        path.write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\nprint(name)\n")
        assert main(["--fix", "train.py"]) == 0
        assert path.read_bytes() == b"# -*- coding: latin-1 -*-\nname = '\xe9'\nlog(name)\n"

    def test_permissions_are_kept(self) -> None:
        path = write("train.py", "print(1)\n")
        path.chmod(0o751)
        assert main(["--fix", "train.py"]) == 0
        assert stat.S_IMODE(path.stat().st_mode) == 0o751


class TestSafeWrites:
    """A file is replaced whole or not at all, and never behind the user's back."""

    def test_a_file_changed_since_it_was_read_is_not_written(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write("train.py", "print(1)\n")
        real = linter._engine.write_atomically

        def edited_meanwhile(target: str, data: bytes, *, expected: bytes | None = None) -> None:
            Path(target).write_text("print(1)\nprint('edited by the user')\n")
            real(target, data, expected=expected)

        monkeypatch.setattr(linter._engine, "write_atomically", edited_meanwhile)
        assert main(["--fix", "train.py"]) == 2
        assert path.read_text() == "print(1)\nprint('edited by the user')\n"
        assert capsys.readouterr().err.splitlines()[0] == (
            "amp-lint: error: train.py: not fixed: the file changed on disk since it was read; "
            "not written"
        )

    def test_a_read_only_file_is_an_error_naming_it(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write("train.py", "print(1)\n")
        path.chmod(0o444)
        assert main(["--fix", "train.py"]) == 2
        assert path.read_text() == "print(1)\n"
        assert "amp-lint: error: train.py: not fixed: the file is read-only; not written" in (
            capsys.readouterr().err
        )

    def test_a_failed_write_is_not_remembered_by_the_cache(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write("train.py", "print(1)\n")
        path.chmod(0o444)
        assert main(["--fix", "train.py"]) == 2
        capsys.readouterr()
        assert main(["train.py"]) == 1
        assert "not fixed" not in capsys.readouterr().err

    def test_a_read_only_folder_is_an_error_and_leaves_no_trace(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        Path("locked").mkdir()
        path = write("locked/train.py", "print(1)\n")
        Path("locked").chmod(0o555)
        try:
            assert main(["--fix", "locked/train.py"]) == 2
            assert os.listdir("locked") == ["train.py"]
        finally:
            Path("locked").chmod(0o755)
        assert path.read_text() == "print(1)\n"
        assert "locked/train.py: not fixed: its folder is read-only" in capsys.readouterr().err

    def test_a_failure_between_write_and_replace_leaves_the_original(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write("train.py", "print(1)\n")

        def interrupted(source: str, target: str) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(linter._atomic_write.os, "replace", interrupted)
        # Ctrl-C ends the command as a shell reports it (130, one line), after the write's
        # cleanup has run.
        assert main(["--fix", "--jobs", "1", "--no-cache", "train.py"]) == 130
        assert capsys.readouterr().err == "amp-lint: interrupted\n"
        assert path.read_text() == "print(1)\n"
        assert os.listdir(".") == ["train.py"]

    def test_a_crash_between_write_and_replace_leaves_the_original(self, tmp_path: Path) -> None:
        # A real crash: the process dies (no cleanup runs) after the new text is on disk in the
        # temporary file and before the rename.
        path = write("train.py", "print(1)\n" * 1000)
        script = textwrap.dedent(
            """
            import os, sys
            sys.path.insert(0, sys.argv[1])
            import linter._atomic_write, linter.cli, linter.rules
            from fix_dummies import FIX_RULES
            linter.rules.ALL_RULES = linter.cli.ALL_RULES = FIX_RULES
            linter._atomic_write.os.replace = lambda source, target: os._exit(9)
            linter.cli.main(["--fix", "--no-cache", "train.py"])
            """
        )
        done = subprocess.run(
            [sys.executable, "-c", script, str(Path(__file__).parent)],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 9, done.stderr
        assert path.read_text() == "print(1)\n" * 1000
        leftovers = [name for name in os.listdir(".") if name != "train.py"]
        # The killed run leaves its complete temporary file, recognisably named, never a torn
        # train.py.
        assert all(name.endswith(linter._atomic_write.TEMP_SUFFIX) for name in leftovers)
