"""The CI formats: GitLab Code Quality (stable fingerprints), JUnit XML, and ``--output-file``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from linter import lint_paths
from linter.cli import main
from linter.report import GITLAB_SEVERITY, format_gitlab, format_junit

TRAIN = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for step, batch in enumerate(loader):
    scaler.scale(model(batch)).backward()
    print(scaler.get_scale())
    scaler.step(optimizer)
    scaler.update()
    if scaler.get_scale() < 1.0:
        print("scale collapsed")
"""


def gitlab(tmp_path: Path, text: str) -> list[dict]:
    (tmp_path / "train.py").write_text(text)
    return json.loads(format_gitlab(lint_paths(["train.py"], select=["AMP001"])))


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_gitlab_issues_have_the_fields_gitlab_requires(tmp_path: Path) -> None:
    issues = gitlab(tmp_path, TRAIN)
    assert [issue["location"] for issue in issues] == [
        {"path": "train.py", "lines": {"begin": 6, "end": 6}},
        {"path": "train.py", "lines": {"begin": 9, "end": 9}},
    ]
    for issue in issues:
        assert issue["check_name"] == "AMP001"
        assert issue["severity"] == GITLAB_SEVERITY
        assert issue["description"].startswith("AMP001 `scaler.get_scale()`")
        assert len(issue["fingerprint"]) == 64
    assert len({issue["fingerprint"] for issue in issues}) == 2


def test_gitlab_fingerprints_survive_unrelated_edits_elsewhere_in_the_file(
    tmp_path: Path,
) -> None:
    before = [issue["fingerprint"] for issue in gitlab(tmp_path, TRAIN)]
    # Lines added above (every position and "line N" in the messages move), a line edited
    # between the findings, indentation of nothing reported changed.
    edited = (
        '"""Training script."""\n\nimport os\n\n'
        + TRAIN.replace("scaler.step(optimizer)", "scaler.step(optimizer)  # the update")
        + "\nprint('done')\n"
    )
    after = gitlab(tmp_path, edited)
    assert [issue["location"]["lines"]["begin"] for issue in after] == [10, 13]
    assert [issue["fingerprint"] for issue in after] == before


def test_gitlab_fingerprint_changes_when_the_reported_line_changes(tmp_path: Path) -> None:
    first, second = (issue["fingerprint"] for issue in gitlab(tmp_path, TRAIN))
    edited = TRAIN.replace("print(scaler.get_scale())", "log(scale=scaler.get_scale())")
    new_first, new_second = (issue["fingerprint"] for issue in gitlab(tmp_path, edited))
    assert new_first != first
    assert new_second == second


def test_gitlab_identical_findings_get_distinct_fingerprints(tmp_path: Path) -> None:
    doubled = TRAIN.replace(
        "    print(scaler.get_scale())\n", "    print(scaler.get_scale())\n" * 2
    )
    fingerprints = [issue["fingerprint"] for issue in gitlab(tmp_path, doubled)]
    assert len(set(fingerprints)) == len(fingerprints) == 3


def test_gitlab_reports_a_file_that_could_not_be_checked(tmp_path: Path) -> None:
    Path("broken.py").write_text("import torch\nscaler = torch.amp.GradScaler(\n")
    (issue,) = json.loads(format_gitlab(lint_paths(["broken.py"])))
    assert issue["check_name"] == "file-error"
    assert issue["location"] == {"path": "broken.py", "lines": {"begin": 1}}


def test_junit_has_one_failed_case_per_finding_and_an_error_per_broken_file() -> None:
    Path("train.py").write_text(TRAIN)
    Path("broken.py").write_text("import torch\nprint(scaler.get_scale(\n")
    root = ET.fromstring(format_junit(lint_paths(["."], select=["AMP001"])))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "2", "1")
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    assert sorted(suites) == ["broken.py", "train.py"]
    cases = suites["train.py"].findall("testcase")
    assert [case.get("line") for case in cases] == ["6", "9"]
    failure = cases[0].find("failure")
    assert failure is not None
    assert failure.get("type") == "AMP001"
    assert (failure.text or "").startswith("train.py:6:11: AMP001 ")
    assert suites["broken.py"].find("testcase/error") is not None


def test_junit_of_a_clean_run_is_one_passed_case() -> None:
    Path("clean.py").write_text("import torch\nx = torch.ones(1)\n")
    root = ET.fromstring(format_junit(lint_paths(["clean.py"])))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("1", "0", "0")
    (case,) = root.iter("testcase")
    assert list(case) == []


def test_output_file_takes_the_report_and_stdout_stays_empty(
    capsys: pytest.CaptureFixture[str],
) -> None:
    Path("train.py").write_text(TRAIN)
    assert main(["--no-cache", "--format", "gitlab", "--output-file", "cq.json", "train.py"]) == 1
    # Machine formats print no summary; the report is all in the file.
    assert capsys.readouterr() == ("", "")
    assert len(json.loads(Path("cq.json").read_text())) == 2


def test_output_file_that_cannot_be_written_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    Path("train.py").write_text(TRAIN)
    assert main(["--no-cache", "-o", "missing/dir/report.xml", "--format", "junit", "."]) == 2
    err = capsys.readouterr().err
    assert (
        "amp-lint: error: --output-file: cannot write missing/dir/report.xml: "
        "No such file or directory\n"
    ) in err
