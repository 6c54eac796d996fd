"""Output formats, from a real lint run with the test-only rules."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from lint_dummies import DUMMY_RULES

from linter import lint_paths
from linter._diagnostic import Diagnostic, RelatedLocation
from linter.api import LintResult
from linter.report import (
    format_error,
    format_github,
    format_json,
    format_sarif,
    format_statistics,
    format_text,
    summary_line,
)
from linter.rules import ALL_RULES

SARIF_SCHEMA = Path(__file__).parent / "fixtures" / "sarif-schema-2.1.0.json"


@pytest.fixture
def result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LintResult:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "my train.py").write_text("x = 1\nif x:\n    print(\n        x)\n")
    (tmp_path / "b.py").write_text("boom = 1\nprint(boom)\nprint(2)\n")
    return lint_paths(["."], rules=DUMMY_RULES)


def test_text_is_one_sorted_line_per_finding(result: LintResult) -> None:
    assert format_text(result) == (
        "b.py:2:1: TST001 print called\n"
        "b.py:3:1: TST001 print called\n"
        "pkg/my train.py:3:5: TST001 print called\n"
    )


def test_summary_counts_findings() -> None:
    assert summary_line(LintResult((), (), 0, 0)) == "All checks passed!"


def test_error_line_names_file_and_reason(result: LintResult) -> None:
    (error,) = result.errors
    assert format_error(error) == (
        "amp-lint: error: b.py: rule TST002 (exploding) failed: RuntimeError: the rule has a bug"
    )


def test_statistics_count_per_code(result: LintResult) -> None:
    assert format_statistics(result) == "3\tTST001\tprint-call\n"


def test_json_has_locations_and_related_sites(result: LintResult) -> None:
    records = json.loads(format_json(result))
    assert records[2] == {
        "filename": "pkg/my train.py",
        "code": "TST001",
        "name": "print-call",
        "message": "print called",
        "location": {"row": 3, "column": 5},
        "end_location": {"row": 4, "column": 11},
        "related": [{"location": {"row": 4, "column": 9}, "message": "first argument"}],
        "cell": None,
        "fix": None,
    }


def test_github_workflow_commands_escape_properties(result: LintResult) -> None:
    lines = format_github(result).splitlines()
    assert lines[2] == (
        "::error file=pkg/my train.py,line=3,col=5,endLine=4,endColumn=11,title=TST001"
        "::TST001 print called"
    )


def test_github_escapes_commas_colons_and_newlines() -> None:
    from linter import Diagnostic

    diagnostic = Diagnostic("a,b:c.py", 1, 1, "TST001", "50% off\nnext", end_line=1, end_column=2)
    text = format_github(LintResult((diagnostic,), (), 1, 1))
    assert text == (
        "::error file=a%2Cb%3Ac.py,line=1,col=1,endLine=1,endColumn=2,title=TST001"
        "::TST001 50%25 off%0Anext\n"
    )


def test_sarif_validates_against_the_2_1_0_schema(result: LintResult) -> None:
    log = json.loads(format_sarif(result, DUMMY_RULES))
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.validate(log, schema, cls=jsonschema.Draft4Validator)


def test_sarif_has_what_github_code_scanning_reads(result: LintResult) -> None:
    log = json.loads(format_sarif(result, DUMMY_RULES))
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("amp-lint", "0.1.0")
    assert [rule["id"] for rule in driver["rules"]] == ["TST001", "TST002", "TST003"]
    for rule in driver["rules"]:
        assert {"name", "shortDescription", "fullDescription", "help"} <= rule.keys()
        assert rule["help"]["markdown"] == rule["fullDescription"]["text"]
        assert rule["defaultConfiguration"] == {"level": "error"}
    third = run["results"][2]
    assert (third["ruleId"], third["ruleIndex"], third["level"]) == ("TST001", 0, "error")
    assert third["message"] == {"text": "print called"}
    location = third["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/my%20train.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 3, "startColumn": 5, "endLine": 4, "endColumn": 11}
    (related,) = third["relatedLocations"]
    assert related["id"] == 1
    assert related["message"] == {"text": "first argument"}
    assert related["physicalLocation"]["region"] == {"startLine": 4, "startColumn": 9}


def test_sarif_names_a_related_site_in_another_file_by_that_file() -> None:
    related = RelatedLocation(12, 5, "saved here", path="src/utils/ckpt.py")
    diagnostic = Diagnostic("src/train.py", 3, 1, "TST001", "resume", related=(related,))
    log = json.loads(format_sarif(LintResult((diagnostic,), (), 1, 1), DUMMY_RULES))
    (site,) = log["runs"][0]["results"][0]["relatedLocations"]
    assert site["physicalLocation"]["artifactLocation"] == {
        "uri": "src/utils/ckpt.py",
        "uriBaseId": "%SRCROOT%",
    }


def test_sarif_reports_failed_files_as_notifications(result: LintResult) -> None:
    (invocation,) = json.loads(format_sarif(result, DUMMY_RULES))["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["message"]["text"].startswith("rule TST002 (exploding) failed")


def test_sarif_file_outside_the_working_folder_gets_an_absolute_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "a.py").write_text("print(1)\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    log = json.loads(format_sarif(lint_paths([outside], rules=DUMMY_RULES), DUMMY_RULES))
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": (outside / "a.py").as_uri()}


def test_sarif_of_the_registered_rules_on_the_examples_validates() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    log = json.loads(format_sarif(lint_paths([examples]), ALL_RULES))
    jsonschema.validate(log, json.loads(SARIF_SCHEMA.read_text()), cls=jsonschema.Draft4Validator)
    driver = log["runs"][0]["tool"]["driver"]
    assert [rule["id"] for rule in driver["rules"]] == [rule.code for rule in ALL_RULES]
    for result in log["runs"][0]["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]


def test_json_related_site_in_another_file_names_that_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = Path(__file__).parent / "fixtures" / "projects" / "amp003_pos_clip_helper_module"
    monkeypatch.chdir(project)
    amp003 = [rule for rule in ALL_RULES if rule.code == "AMP003"]
    (record,) = json.loads(format_json(lint_paths(["train.py"], rules=amp003, jobs=1)))
    files = [site.get("filename", "") for site in record["related"]]
    assert files[0].endswith("utils/grads.py")
    assert files[1:] == ["", "", ""]
