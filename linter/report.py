"""Output formats: one function per format, each turning a `LintResult` into text.

``text`` is ruff's and flake8's ``path:line:col: CODE message``; ``json`` is for scripts;
``sarif`` is SARIF 2.1.0 as GitHub code scanning ingests it; ``github`` is GitHub Actions
workflow commands, which annotate a pull request without uploading anything.
"""

from __future__ import annotations

import inspect
import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from linter._diagnostic import Diagnostic, FileError, one_line
from linter._rule import Rule
from linter._version import __version__
from linter.api import LintResult

#: Version of SARIF written, and its schema.
SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def format_error(error: FileError) -> str:
    """One stderr line for a file that could not be linted."""
    return f"amp-lint: error: {error.path}: {error.message}"


def format_text(result: LintResult, rules: Sequence[type[Rule]] = ()) -> str:
    """``path:line:col: CODE message``, one finding a line, sorted."""
    return "".join(
        f"{d.path}:{d.line}:{d.column}: {d.code} {one_line(d.message)}\n"
        for d in result.diagnostics
    )


def summary_line(result: LintResult) -> str:
    """ruff's closing line: how many findings, or that all passed (never when a file failed)."""
    count = len(result.diagnostics)
    found = f"Found {count} error{'s' if count != 1 else ''}" if count else "No findings"
    failed = len({error.path for error in result.errors})
    if failed:
        return f"{found}; {failed} file{'s' if failed != 1 else ''} could not be checked."
    return f"{found}." if count else "All checks passed!"


def format_statistics(result: LintResult, rules: Sequence[type[Rule]] = ()) -> str:
    """Findings counted per code, most frequent first (``--statistics``)."""
    counts = Counter((d.code, d.name) for d in result.diagnostics)
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    width = max((len(str(count)) for count in counts.values()), default=1)
    return "".join(f"{count:>{width}}\t{code}\t{name}\n" for (code, name), count in ordered)


def format_json(result: LintResult, rules: Sequence[type[Rule]] = ()) -> str:
    """A JSON list with one object per finding, then one per file that could not be checked
    (``code`` null, as ruff writes its syntax errors, and the reason as ``message``)."""
    records: list[dict[str, Any]] = [
        {
            "filename": d.path,
            "code": d.code,
            "name": d.name,
            "message": d.message,
            "location": {"row": d.line, "column": d.column},
            "end_location": {"row": d.end_line, "column": d.end_column},
            "related": [
                {"location": {"row": r.line, "column": r.column}, "message": r.message}
                for r in d.related
            ],
        }
        for d in result.diagnostics
    ]
    records += [
        {
            "filename": error.path,
            "code": None,
            "name": "file-error",
            "message": error.message,
            "location": None,
            "end_location": None,
            "related": [],
        }
        for error in result.errors
    ]
    return json.dumps(records, indent=2) + "\n"


def format_github(result: LintResult, rules: Sequence[type[Rule]] = ()) -> str:
    """GitHub Actions ``::error`` workflow commands, one per finding."""
    return "".join(
        f"::error file={_property(d.path)},line={d.line},col={d.column},"
        f"endLine={d.end_line},endColumn={d.end_column},title={_property(d.code)}"
        f"::{_data(f'{d.code} {d.message}')}\n"
        for d in result.diagnostics
    )


def format_sarif(result: LintResult, rules: Sequence[type[Rule]] = ()) -> str:
    """A SARIF 2.1.0 log with one run; files that failed become tool notifications."""
    described = list(rules)
    known = {rule.code for rule in described}
    index = {rule.code: position for position, rule in enumerate(described)}
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "amp-lint",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_sarif_rule(rule) for rule in described],
            }
        },
        "columnKind": "unicodeCodePoints",
        "originalUriBaseIds": {"%SRCROOT%": {"uri": _folder_uri(os.getcwd())}},
        "invocations": [
            {
                "executionSuccessful": not result.errors,
                "toolExecutionNotifications": [
                    {
                        "level": "error",
                        "message": {"text": error.message},
                        "locations": [{"physicalLocation": _artifact(error.path)}],
                    }
                    for error in result.errors
                ],
            }
        ],
        "results": [
            _sarif_result(d, index.get(d.code) if d.code in known else None)
            for d in result.diagnostics
        ],
    }
    log = {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}
    return json.dumps(log, indent=2) + "\n"


def _sarif_rule(rule: type[Rule]) -> dict[str, Any]:
    docs = inspect.cleandoc(rule.__doc__ or rule.summary)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": docs},
        # The whole rule page travels in the log: ampscale has no hosted docs site to link to.
        "help": {"text": docs, "markdown": docs},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["correctness", "amp"]},
    }


def _sarif_result(d: Diagnostic, rule_index: int | None) -> dict[str, Any]:
    location = _artifact(d.path)
    location["region"] = {
        "startLine": d.line,
        "startColumn": d.column,
        "endLine": max(d.end_line, d.line),
        "endColumn": d.end_column if d.end_line else d.column + 1,
    }
    result: dict[str, Any] = {
        "ruleId": d.code,
        "level": "error",
        "message": {"text": d.message},
        "locations": [{"physicalLocation": location}],
    }
    if rule_index is not None:
        result["ruleIndex"] = rule_index
    if d.related:
        result["relatedLocations"] = [
            {
                "id": number,
                "message": {"text": related.message},
                "physicalLocation": {
                    **_artifact(d.path),
                    "region": {"startLine": related.line, "startColumn": related.column},
                },
            }
            for number, related in enumerate(d.related, start=1)
        ]
    return result


def _artifact(path: str) -> dict[str, Any]:
    """An artifactLocation: relative to %SRCROOT% (the current folder) when inside it."""
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute, os.getcwd())
    except ValueError:  # another drive, on Windows
        relative = os.pardir
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return {"artifactLocation": {"uri": _folder_uri(absolute).rstrip("/")}}
    uri = quote(relative.replace(os.sep, "/"))
    return {"artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"}}


def _folder_uri(path: str) -> str:
    posix = os.path.abspath(path).replace(os.sep, "/")
    return "file://" + quote(posix if posix.startswith("/") else "/" + posix) + "/"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


#: Format name to the function that renders it (``--format``).
FORMATS: dict[str, Callable[[LintResult, Sequence[type[Rule]]], str]] = {
    "text": format_text,
    "json": format_json,
    "sarif": format_sarif,
    "github": format_github,
}
