"""The `amp-lint` command: parse arguments, run the linter, choose the exit code.

Exit codes follow ruff: 0 clean, 1 findings, 2 a usage or configuration error, or a file that
could not be read or parsed (the other files are still linted and reported). ``--exit-zero``
makes findings and unreadable files exit 0; usage and configuration errors still exit 2. A run
ended by Ctrl-C (SIGINT) or SIGTERM stops at once, its worker processes killed on the way out
(see `linter._worker_pool`), says so in one line and exits 130 or 143, as shells report a
command a signal ended.
"""

from __future__ import annotations

import argparse
import inspect
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

from linter._cache import CACHE_ENV, cache_location
from linter._selection import OFF_BY_DEFAULT, SelectorError, find_rule, how_to_enable
from linter._version import __version__
from linter.api import STDIN, LintResult, lint_paths
from linter.config import ConfigError, load_settings
from linter.report import (
    FORMATS,
    fix_hint,
    format_diff,
    format_error,
    format_file_counts,
    format_fixes,
    format_statistics,
    summary_line,
)
from linter.rules import ALL_RULES

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2
#: A run ended by SIGINT (Ctrl-C) or SIGTERM: 128 + the signal's number, as shells report it.
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM


def _selectors(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (the docs generate the CLI reference from it)."""
    parser = argparse.ArgumentParser(
        prog="amp-lint",
        description="Find fp16 mixed-precision (AMP) pitfalls in PyTorch training code.",
        epilog="Exit status: 0 no findings, 1 findings, 2 usage, configuration, read or parse "
        "error (--exit-zero: 0 unless usage or configuration), 130 or 143 when Ctrl-C or "
        "SIGTERM ended the run. Settings come from the nearest "
        "pyproject.toml with a [tool.amp-lint] table. 'amp-lint server' starts the language "
        "server instead (a folder named server: ./server).",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        default=["."],
        metavar="PATH",
        help="files or folders to lint (default: .); '-' reads standard input",
    )
    parser.add_argument(
        "--format",
        choices=sorted(FORMATS),
        default="text",
        help="output format (default: text): text, json, sarif (GitHub code scanning), github "
        "(Actions annotations), gitlab (Code Quality report), junit (JUnit XML)",
    )
    parser.add_argument(
        "--output-file",
        "-o",
        metavar="FILE",
        help="write the report (--format's output, or --statistics) to FILE instead of "
        "standard output",
    )
    parser.add_argument(
        "--select",
        type=_selectors,
        metavar="CODES",
        help="comma-separated rule codes, prefixes or names to run (replaces the config's)",
    )
    parser.add_argument(
        "--extend-select",
        type=_selectors,
        metavar="CODES",
        help="rules to run in addition to those selected",
    )
    parser.add_argument(
        "--ignore", type=_selectors, metavar="CODES", help="rules not to run (wins over select)"
    )
    parser.add_argument(
        "--statistics",
        action="store_true",
        help="print the number of findings per rule, and how many files were checked, parsed, "
        "skipped by the pre-filter and taken from the cache",
    )
    parser.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 even when there are findings or files that could not be read or parsed "
        "(usage and configuration errors still exit 2)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="read settings from this pyproject.toml instead of searching for one",
    )
    parser.add_argument(
        "--stdin-filename",
        metavar="NAME",
        help="the name standard input ('-') has in output and for per-file-ignores",
    )
    parser.add_argument(
        "--project-root",
        metavar="DIR",
        help="the project every linted file belongs to, for a tree where amp-lint cannot tell "
        "(default: found per file: the nearest folder with a pyproject.toml, setup.py, "
        "setup.cfg or .git, else the folder a script puts on its own sys.path, else the top "
        "of its package chain; never the current folder)",
    )
    parser.add_argument(
        "--force-exclude",
        action="store_true",
        help="apply the excludes to files named on the command line too (for pre-commit)",
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=_positive,
        metavar="N",
        help="worker processes for many files (default: one per CPU)",
    )
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="print findings and errors only, no summary"
    )
    parser.add_argument(
        "--explain", metavar="CODE", help="print the documentation of a rule (code or name)"
    )
    parser.add_argument(
        "--list-rules", action="store_true", help="print every rule's code, name and summary"
    )
    parser.add_argument("--version", action="version", version=f"amp-lint {__version__}")
    fixes = parser.add_argument_group(
        "fixes",
        "As in ruff. A fix is applied only if the fixed file parses and no longer has the "
        "finding; fixes run again until none applies (10 rounds at most); each file is "
        "replaced atomically, keeping its encoding, BOM, line endings and permissions, and a "
        "file changed since it was read is left alone (exit 2). '# noqa' stops a fix too.",
    )
    fixes.add_argument(
        "--fix", action="store_true", help="apply the safe fixes and report what is left"
    )
    fixes.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="apply (with --fix) or show as [*] the fixes that change behaviour too",
    )
    fixes.add_argument(
        "--diff",
        action="store_true",
        help="print the fixes as a unified diff and write nothing (exit 1 if there is a diff)",
    )
    fixes.add_argument(
        "--fix-only",
        action="store_true",
        help="apply the fixes, report nothing else, and exit 0 unless a file failed",
    )
    fixes.add_argument(
        "--show-fixes", action="store_true", help="list the findings that fixes removed"
    )
    fixes.add_argument(
        "--add-noqa",
        action="store_true",
        help="write '# noqa: CODE' on the line of every finding (a baseline for old code; "
        "existing codes and comments are kept, files replaced atomically as by --fix) and exit "
        "0; AMP100 later reports the codes that no longer suppress anything",
    )
    cache = parser.add_argument_group(
        "cache",
        "Results are kept per file, keyed by its contents, the amp-lint version and the "
        "file's settings, in .amp_lint_cache next to the pyproject.toml (or in the current "
        "folder); an unchanged file is not linted again.",
    )
    cache.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    cache.add_argument(
        "--cache-dir",
        metavar="DIR",
        help=f"where the cache lives (default: ${CACHE_ENV}, the cache-dir setting, or "
        ".amp_lint_cache)",
    )
    return parser


#: The first argument that starts the language server instead of linting.
SERVER_COMMAND = "server"
#: Milliseconds a buffer must stay unchanged before the server lints it again, by default.
DEFAULT_DEBOUNCE_MS = 300


def build_server_parser() -> argparse.ArgumentParser:
    """The parser of ``amp-lint server`` (the docs generate its reference from it)."""
    parser = argparse.ArgumentParser(
        prog=f"amp-lint {SERVER_COMMAND}",
        description="Run amp-lint as a language server over standard input and output, for "
        "editors: findings as you type, quick fixes, 'disable for this line', hover.",
        epilog="It needs the server extra (in a clone of ampscale: pip install '.[server]'). "
        "Settings come from "
        "each file's nearest pyproject.toml with a [tool.amp-lint] table, reloaded when a "
        "pyproject.toml changes.",
    )
    parser.add_argument(
        "--debounce",
        type=_non_negative,
        default=DEFAULT_DEBOUNCE_MS,
        metavar="MS",
        help="milliseconds a buffer must stay unchanged before it is linted again (default: "
        f"{DEFAULT_DEBOUNCE_MS}); opening and saving lint at once",
    )
    parser.add_argument("--version", action="version", version=f"amp-lint {__version__}")
    return parser


def _non_negative(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {number}")
    return number


def _server(argv: Sequence[str]) -> int:
    args = build_server_parser().parse_args(argv)
    try:
        from linter.server import serve
    except ImportError as error:
        missing = (error.name or "").partition(".")[0]
        if missing not in ("pygls", "lsprotocol"):
            raise
        return _usage_error(
            f"amp-lint server needs the server extra, ampscale[server] ({missing} is not "
            "installed); in a clone of ampscale: pip install '.[server]'"
        )
    return serve(debounce=args.debounce / 1000)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] == [SERVER_COMMAND]:
        return _server(arguments[1:])
    args = build_parser().parse_args(arguments)
    try:
        with _sigterm_raises():
            return _run(args)
    except BrokenPipeError:
        # The reader went away (`amp-lint . | head`): stop quietly, as Python's docs advise,
        # so the interpreter's final flush does not print a second error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("amp-lint: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except _Terminated:
        print("amp-lint: terminated", file=sys.stderr)
        return EXIT_TERMINATED


class _Terminated(BaseException):
    """SIGTERM, raised where the main thread is, so that a run unwinds as it does on Ctrl-C:
    its worker pools kill their workers on the way out. (A BaseException, as
    KeyboardInterrupt is, so that no ``except Exception`` takes it for a file's failure.)"""


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises `_Terminated` within the block; the previous handler comes back after
    it (`main` is also called in-process, by tests and by tools). Signal handlers can only be
    set from the main thread: called from another, SIGTERM keeps its handler."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def _run(args: argparse.Namespace) -> int:
    if args.list_rules:
        return _list_rules()
    if args.explain is not None:
        return _explain(args.explain)
    fixing = args.fix or args.fix_only
    if args.add_noqa and (fixing or args.diff):
        return _usage_error("--add-noqa cannot be combined with --fix, --fix-only or --diff")
    if args.add_noqa and STDIN in args.paths:
        return _usage_error("--add-noqa writes files; it cannot read standard input ('-')")
    stdin_fixed = fixing and not args.diff and STDIN in args.paths
    stdin = sys.stdin.buffer.read() if stdin_fixed else None
    try:
        settings = load_settings(args.config)
        result = lint_paths(
            args.paths,
            select=args.select,
            ignore=args.ignore,
            extend_select=args.extend_select,
            settings=settings,
            jobs=args.jobs,
            force_exclude=args.force_exclude,
            stdin_filename=args.stdin_filename,
            fix=fixing and not args.diff,
            diff=args.diff,
            unsafe_fixes=args.unsafe_fixes,
            stdin=stdin,
            add_noqa=args.add_noqa,
            project_root=args.project_root,
            cache_dir=None
            if args.no_cache
            else cache_location(args.cache_dir, settings.cache_dir, settings.root),
        )
    except (ConfigError, SelectorError) as error:
        return _usage_error(str(error))
    for note in settings.notes:
        print(f"amp-lint: warning: {note}", file=sys.stderr)
    if STDIN not in args.paths and args.stdin_filename is not None:
        print("amp-lint: warning: --stdin-filename is used only with '-'", file=sys.stderr)
    if result.files_checked == 0 and not result.errors:
        print("amp-lint: warning: No Python files found under the given paths", file=sys.stderr)
    if args.diff:
        return _report_diff(result)
    if args.add_noqa:
        return _report_add_noqa(result, args.exit_zero)
    if stdin_fixed:
        # As ruff: the fixed source goes to stdout (an editor replaces the buffer with it), so
        # the findings left go to stderr.
        shown = args.stdin_filename or STDIN
        changed = [change.data for change in result.changes if change.path == shown]
        sys.stdout.flush()
        sys.stdout.buffer.write(changed[0] if changed else stdin or b"")
        sys.stdout.flush()
    out = sys.stderr if stdin_fixed else sys.stdout
    report = ""
    if args.statistics:
        report = format_statistics(result, ALL_RULES)
        sys.stderr.write(format_file_counts(result))
    elif not args.fix_only:
        report = FORMATS[args.format](result, ALL_RULES)
    if args.show_fixes and args.format == "text":
        report += format_fixes(result)
    if args.output_file is not None:
        problem = _write_report(args.output_file, report)
        if problem is not None:
            return _usage_error(problem)
    else:
        out.write(report)
    for note in result.notes:
        print(f"amp-lint: note: {note}", file=sys.stderr)
    for failure in result.errors:
        print(format_error(failure), file=sys.stderr)
    if args.format == "text" and not args.quiet:
        if args.fix_only:
            fixed = len(result.fixed)
            print(f"Fixed {fixed} error{'s' if fixed != 1 else ''}.", file=sys.stderr)
        else:
            print(summary_line(result), file=sys.stderr)
            hint = fix_hint(result)
            if hint:
                print(hint, file=sys.stderr)
    if args.exit_zero:
        return EXIT_CLEAN
    if result.errors:
        return EXIT_ERROR
    if result.diagnostics and not args.fix_only:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _write_report(path: str, report: str) -> str | None:
    """Write the report to ``--output-file``; the one-line reason when that fails."""
    try:
        with open(path, "w", encoding="utf-8", newline="") as stream:
            stream.write(report)
    except OSError as error:
        return f"--output-file: cannot write {path}: {error.strerror or error}"
    return None


def _report_add_noqa(result: LintResult, exit_zero: bool) -> int:
    """``--add-noqa``: say how many codes were written (as ruff does); exit 0 unless a file
    could not be read, parsed or written."""
    for note in result.notes:
        print(f"amp-lint: note: {note}", file=sys.stderr)
    for error in result.errors:
        print(format_error(error), file=sys.stderr)
    added = result.noqa_added
    print(f"Added # noqa for {added} finding{'s' if added != 1 else ''}.", file=sys.stderr)
    return EXIT_ERROR if result.errors and not exit_zero else EXIT_CLEAN


def _report_diff(result: LintResult) -> int:
    """``--diff``: the changes as unified diffs on stdout; nothing is written."""
    for change in result.changes:
        sys.stdout.write(format_diff(change))
    for note in result.notes:
        print(f"amp-lint: note: {note}", file=sys.stderr)
    for error in result.errors:
        print(format_error(error), file=sys.stderr)
    fixed = len(result.fixed)
    print(f"Would fix {fixed} error{'s' if fixed != 1 else ''}.", file=sys.stderr)
    if result.errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if result.changes else EXIT_CLEAN


def _usage_error(message: str) -> int:
    print(f"amp-lint: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _list_rules() -> int:
    if not ALL_RULES:
        print("amp-lint: no rules are registered", file=sys.stderr)
    for rule in ALL_RULES:
        # A fourth column only where a rule is off, so the common three-column lines stay put.
        off = "" if rule.default_enabled else f"\t{OFF_BY_DEFAULT}"
        print(f"{rule.code}\t{rule.name}\t{rule.summary}{off}")
    return EXIT_CLEAN


def _explain(code_or_name: str) -> int:
    rule = find_rule(code_or_name, ALL_RULES)
    if rule is None:
        return _usage_error(f"--explain: unknown rule {code_or_name!r}")
    print(f"# {rule.name} ({rule.code})\n")
    print(f"{rule.summary}\n")
    if not rule.default_enabled:
        print(f"{OFF_BY_DEFAULT}: {how_to_enable(rule)}\n")
    print(inspect.cleandoc(rule.__doc__ or ""))
    if rule.options:
        print("\n## Options\n")
        for option in rule.options:
            print(f"- `{option.name}` (default `{option.default!r}`): {option.doc}")
    return EXIT_CLEAN
