"""Output formats: one function per format, each turning a `LintResult` into text.

``text`` is ruff's and flake8's ``path:line:col: CODE message``; ``json`` is for scripts;
``sarif`` is SARIF 2.1.0 as GitHub code scanning ingests it; ``github`` is GitHub Actions
workflow commands, which annotate a pull request without uploading anything; ``gitlab`` is
GitLab's Code Quality report (a merge request shows the findings it adds and resolves);
``junit`` is JUnit XML, which most CI systems show as failed tests.
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import json
import os
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from linter._diagnostic import Diagnostic, FileError, one_line
from linter._engine import Change
from linter._fix import Fix
from linter._rule import Rule
from linter._version import __version__
from linter.api import LintResult

#: Version of SARIF written, and its schema.
SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def format_error(error: FileError) -> str:
    """One stderr line for a file that could not be linted."""
    return f"amp-lint: error: {error.path}: {error.message}"


def location(d: Diagnostic) -> str:
    """``path:line:col``, or ``path:cell N:line:col`` in a notebook (as ruff writes it)."""
    cell = f"cell {d.cell}:" if d.cell else ""
    return f"{d.path}:{cell}{d.line}:{d.column}"


def format_text(result: LintResult, rules: Sequence[type[Rule]] = ()) -> str:
    """``path:line:col: CODE message``, one finding a line, sorted; ``[*]`` marks the findings
    that ``--fix`` would fix."""
    return "".join(
        f"{location(d)}: {d.code} {'[*] ' if result.fixable(d) else ''}{one_line(d.message)}\n"
        for d in result.diagnostics
    )


def summary_line(result: LintResult) -> str:
    """ruff's closing line: how many findings (and how many were fixed), or that all passed
    (never when a file failed)."""
    count = len(result.diagnostics)
    fixed = len(result.fixed)
    total = count + fixed
    found = f"Found {total} error{'s' if total != 1 else ''}" if total else "No findings"
    if fixed:
        found += f" ({fixed} fixed, {count} remaining)"
    failed = len({error.path for error in result.errors})
    if failed:
        return f"{found}; {failed} file{'s' if failed != 1 else ''} could not be checked."
    return f"{found}." if total else "All checks passed!"


def fix_hint(result: LintResult) -> str | None:
    """ruff's hint under the summary: how many findings ``--fix`` (or ``--unsafe-fixes``) fixes."""
    ready = sum(result.fixable(d) for d in result.diagnostics)
    hidden = sum(d.fix is not None and not result.fixable(d) for d in result.diagnostics)
    hidden_text = (
        f"{hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the "
        "`--unsafe-fixes` option"
    )
    if ready and hidden:
        return f"[*] {ready} fixable with the `--fix` option ({hidden_text})."
    if ready:
        return f"[*] {ready} fixable with the `--fix` option."
    if hidden:
        return f"No fixes available ({hidden_text})."
    return None


def format_fixes(result: LintResult) -> str:
    """``--show-fixes``: the findings fixes removed, counted per file and code."""
    if not result.fixed:
        return ""
    counts = Counter((d.path, d.code, d.name) for d in result.fixed)
    total = len(result.fixed)
    lines = [f"Fixed {total} error{'s' if total != 1 else ''}:"]
    for path in sorted({path for path, _, _ in counts}):
        lines.append(f"- {path}:")
        lines.extend(
            f"    {count} × {code} ({name})"
            for (where, code, name), count in sorted(counts.items())
            if where == path
        )
    return "\n".join(lines) + "\n"


def format_diff(change: Change) -> str:
    """A unified diff of one fixed file, ``a/`` and ``b/`` prefixed as git writes them."""
    lines = difflib.unified_diff(
        change.before.splitlines(keepends=True),
        change.after.splitlines(keepends=True),
        fromfile=f"a/{change.path}",
        tofile=f"b/{change.path}",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def format_file_counts(result: LintResult) -> str:
    """What happened to the files (``--statistics``): a file naming none of the rules' trigger
    words is skipped unparsed, so its syntax errors are not reported."""
    return (
        f"files: {result.files_checked} checked, {result.files_parsed} parsed, "
        f"{result.files_skipped} skipped by the pre-filter (no trigger words), "
        f"{result.files_cached} from the cache\n"
    )


def format_statistics(result: LintResult, rules: Sequence[type[Rule]] = ()) -> str:
    """Findings counted per code, most frequent first (``--statistics``); ``[*]`` marks a code
    with findings ``--fix`` would fix."""
    counts = Counter((d.code, d.name) for d in result.diagnostics)
    fixable = {d.code for d in result.diagnostics if result.fixable(d)}
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    width = max((len(str(count)) for count in counts.values()), default=1)
    return "".join(
        f"{count:>{width}}\t{code}\t{'[*] ' if code in fixable else ''}{name}\n"
        for (code, name), count in ordered
    )


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
                {
                    "location": {"row": r.line, "column": r.column},
                    "message": r.message,
                    **({"filename": r.path} if r.path else {}),
                    **({"cell": r.cell} if r.cell else {}),
                }
                for r in d.related
            ],
            "cell": d.cell or None,
            "fix": _json_fix(d.fix),
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


def _json_fix(fix: Fix | None) -> dict[str, Any] | None:
    """ruff's ``fix`` object: applicability, message and the edits."""
    if fix is None:
        return None
    return {
        "applicability": fix.applicability,
        "message": fix.message,
        "edits": [
            {
                "content": edit.content,
                "location": {"row": edit.line, "column": edit.column},
                "end_location": {"row": edit.end_line, "column": edit.end_column},
            }
            for edit in fix.edits
        ],
    }


def format_github(result: LintResult, rules: Sequence[type[Rule]] = ()) -> str:
    """GitHub Actions ``::error`` workflow commands, one per finding."""
    return "".join(
        f"::error file={_property(d.path)},line={d.line},col={d.column},"
        f"endLine={d.end_line},endColumn={d.end_column},title={_property(d.code)}"
        f"::{_data(f'{_cell_prefix(d)}{d.code} {d.message}')}\n"
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
    if d.cell:
        # SARIF has no notion of a notebook cell: the region counts lines within the cell the
        # property names, as the cell's number in Jupyter shows it.
        location["properties"] = {"cell": d.cell}
    if rule_index is not None:
        result["ruleIndex"] = rule_index
    if d.fix is not None and not d.cell:
        result["fixes"] = [_sarif_fix(d.path, d.fix)]
    if d.related:
        result["relatedLocations"] = [
            {
                "id": number,
                "message": {"text": related.message},
                "physicalLocation": {
                    **_artifact(related.path or d.path),
                    "region": {"startLine": related.line, "startColumn": related.column},
                },
            }
            for number, related in enumerate(d.related, start=1)
        ]
    return result


def _sarif_fix(path: str, fix: Fix) -> dict[str, Any]:
    return {
        "description": {"text": f"{fix.message} ({fix.applicability})"},
        "artifactChanges": [
            {
                **_artifact(path),
                "replacements": [
                    {
                        "deletedRegion": {
                            "startLine": edit.line,
                            "startColumn": edit.column,
                            "endLine": edit.end_line,
                            "endColumn": edit.end_column,
                        },
                        "insertedContent": {"text": edit.content},
                    }
                    for edit in fix.edits
                ],
            }
        ],
    }


def _cell_prefix(d: Diagnostic) -> str:
    return f"cell {d.cell}: " if d.cell else ""


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


#: Line and cell numbers in a message ("the loop at line 14"): they move with any edit above,
#: so a fingerprint leaves them out.
_MOVING_NUMBERS = re.compile(r"\b(line|cell) \d+")
#: GitLab Code Quality severities: every finding is a bug that breaks or slows training.
GITLAB_SEVERITY = "major"


def format_gitlab(result: LintResult, rules: Sequence[type[Rule]] = ()) -> str:
    """A GitLab Code Quality report: a JSON list of issues with stable fingerprints.

    GitLab compares a merge request's report with the target branch's by fingerprint, so a
    fingerprint must not change when unrelated lines move: it hashes the path, the code, the
    message without line numbers and the text of the reported line, never a position; equal
    findings in one file are told apart by their order.
    """
    lines = _SourceLines()
    seen: Counter[str] = Counter()
    issues: list[dict[str, Any]] = []
    for d in result.diagnostics:
        key = "\0".join(
            (
                _relative(d.path),
                d.code,
                _MOVING_NUMBERS.sub(r"\1 #", d.message),
                lines.text(d.path, d.cell, d.line).strip(),
            )
        )
        seen[key] += 1
        fingerprint = hashlib.sha256(f"{key}\0{seen[key]}".encode()).hexdigest()
        issues.append(
            {
                "description": f"{_cell_prefix(d)}{d.code} {one_line(d.message)}",
                "check_name": d.code,
                "fingerprint": fingerprint,
                "severity": GITLAB_SEVERITY,
                "location": {
                    "path": _relative(d.path),
                    "lines": {"begin": d.line, "end": max(d.end_line, d.line)},
                },
            }
        )
    for error in result.errors:
        key = f"{_relative(error.path)}\0file-error\0{error.message}"
        issues.append(
            {
                "description": f"could not be checked: {error.message}",
                "check_name": "file-error",
                "fingerprint": hashlib.sha256(key.encode()).hexdigest(),
                "severity": "blocker",
                "location": {"path": _relative(error.path), "lines": {"begin": 1}},
            }
        )
    return json.dumps(issues, indent=2) + "\n"


def format_junit(result: LintResult, rules: Sequence[type[Rule]] = ()) -> str:
    """JUnit XML: one test suite per file with findings or errors, one failed test case per
    finding, an errored one per file that could not be checked; a clean run is one passed
    test case (CI systems show an empty report as "no tests")."""
    by_path: dict[str, list[Diagnostic]] = {}
    for d in result.diagnostics:
        by_path.setdefault(d.path, []).append(d)
    errors: dict[str, list[FileError]] = {}
    for error in result.errors:
        errors.setdefault(error.path, []).append(error)
    root = ET.Element(
        "testsuites",
        name="amp-lint",
        tests=str(max(1, len(result.diagnostics) + len(result.errors))),
        failures=str(len(result.diagnostics)),
        errors=str(len(result.errors)),
    )
    for path in sorted({*by_path, *errors}):
        found, failed = by_path.get(path, []), errors.get(path, [])
        suite = ET.SubElement(
            root,
            "testsuite",
            name=path,
            tests=str(len(found) + len(failed)),
            failures=str(len(found)),
            errors=str(len(failed)),
        )
        for d in found:
            case = ET.SubElement(
                suite, "testcase", name=f"{d.code} {d.name}".strip(), classname=path, file=path
            )
            case.set("line", str(d.line))
            failure = ET.SubElement(case, "failure", message=one_line(d.message), type=d.code)
            failure.text = f"{location(d)}: {d.code} {one_line(d.message)}"
        for error in failed:
            case = ET.SubElement(suite, "testcase", name="file-error", classname=path, file=path)
            ET.SubElement(case, "error", message=error.message, type="file-error")
    if not by_path and not errors:
        suite = ET.SubElement(root, "testsuite", name="amp-lint", tests="1", failures="0")
        ET.SubElement(suite, "testcase", name="no findings", classname="amp-lint")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


class _SourceLines:
    """The text of a reported line, read from the file once per path (empty when the file
    cannot be read again: standard input, a file removed since)."""

    def __init__(self) -> None:
        self._files: dict[str, dict[int, list[str]]] = {}

    def text(self, path: str, cell: int, line: int) -> str:
        if path not in self._files:
            self._files[path] = _cells_lines(path)
        lines = self._files[path].get(cell, [])
        return lines[line - 1] if 0 < line <= len(lines) else ""


def _cells_lines(path: str) -> dict[int, list[str]]:
    """Cell number (``0`` for a module) to its lines."""
    from linter._notebook import Notebook
    from linter._source import SourceError, load_document, read_source

    try:
        document = load_document(path, read_source(path))
    except (SourceError, OSError):
        return {}
    if isinstance(document, Notebook):
        return {cell.number: cell.text.splitlines() for cell in document.cells}
    return {0: document.text.splitlines()}


def _relative(path: str) -> str:
    """The path relative to the current folder (GitLab wants paths from the project root),
    with ``/`` separators; a path outside it stays as given."""
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute, os.getcwd())
    except ValueError:
        return path
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return path.replace(os.sep, "/")
    return relative.replace(os.sep, "/")


#: Format name to the function that renders it (``--format``).
FORMATS: dict[str, Callable[[LintResult, Sequence[type[Rule]]], str]] = {
    "text": format_text,
    "json": format_json,
    "sarif": format_sarif,
    "github": format_github,
    "gitlab": format_gitlab,
    "junit": format_junit,
}
