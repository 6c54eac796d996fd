"""What parsing alone costs a Python linter, side by side with ``ruff check --select ALL``'s run.

Issue 19 asks a cold amp-lint run to be no slower than ruff with every rule. This measures the
floor under that goal on the same tree, in one run, with as many worker processes as amp-lint
uses (one per available CPU):

- **ruff ALL (no cache)**: every ``.py`` file, every rule (the reference);
- **read + decode**: every ``.py`` file read and decoded, nothing more;
- **CPython ast**: ``ast.parse`` of each file and one ``ast.walk`` of its tree, for every file
  and for the files amp-lint summarises;
- **libcst**: ``libcst.parse_module`` of the files that pass amp-lint's own pre-filter with every
  rule on (those the rules read), and of the files amp-lint summarises (those, the project files
  they import and the files that import them: the project model's reading), and nothing else: no
  metadata, no summary, no rule.

A row at or above ruff's wall time says that no linter doing that step, however its rules and
summaries are written, meets the goal on this tree. Nothing here imports or runs what it reads.

    python benchmarks/parse_floor.py --corpus /path/to/repos --repeat 3
    python benchmarks/parse_floor.py --smoke      # this repository's examples/, once
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from lint_project import ROOT, _measure, _ruff

_STEPS = ("read", "ast", "libcst")


def _one(step: str, path: str) -> int:
    """Do ``step`` to one file; the number of files it did (0 when the file cannot be read)."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return 0
    if step == "ast":
        try:
            sum(1 for _ in ast.walk(ast.parse(text)))
        except (SyntaxError, ValueError, RecursionError):
            return 0
    elif step == "libcst":
        import libcst

        try:
            libcst.parse_module(text)
        except (libcst.ParserSyntaxError, RecursionError):
            return 0
    return 1


def _run_step(step: str, listing: str) -> int:
    """The worker side: ``step`` over every file listed, in one process per available CPU."""
    paths = Path(listing).read_text(encoding="utf-8").splitlines()
    workers = _workers()
    chunk = max(1, min(16, len(paths) // (4 * workers)))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        done = sum(pool.map(_one, [step] * len(paths), paths, chunksize=chunk))
    print(f"{step}: {done} of {len(paths)} files", file=sys.stderr)
    return 0


def _pre_filtered(paths: list[Path]) -> list[Path]:
    """The files amp-lint's pre-filter sends to the parser with every rule selected."""
    sys.path.insert(0, str(ROOT))
    from linter.rules import ALL_RULES

    kept = []
    for path in paths:
        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if any(rule.wants(text) for rule in ALL_RULES):
            kept.append(path)
    return kept


def _summarised(paths: list[Path], corpus: Path) -> list[Path]:
    """The files a cold ``amp-lint`` run over ``corpus`` summarises (its own plan, no cache)."""
    sys.path.insert(0, str(ROOT))
    from linter.model.assembly._project_build import files_to_summarise, roots_of
    from linter.rules import ALL_RULES

    def wants(text: str) -> bool:
        return any(rule.wants(text) for rule in ALL_RULES)

    chosen: list[Path] = []
    by_root = roots_of([str(p.resolve()) for p in paths], [str(corpus.resolve())])
    for root, files in by_root.items():
        chosen += [Path(path) for path in files_to_summarise(root, files, wants)]
    return sorted(chosen)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--corpus", type=Path, help="folder of projects (repositories) to read")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement")
    parser.add_argument("--smoke", action="store_true", help="examples/, once (a CI check)")
    parser.add_argument("--step", choices=_STEPS, help=argparse.SUPPRESS)
    parser.add_argument("--files", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        return _run_step(args.step, args.files)
    corpus = (ROOT / "examples") if args.smoke else args.corpus
    if corpus is None or not corpus.is_dir():
        parser.error("--corpus must name a folder (or pass --smoke)")
    repeat = 1 if args.smoke else args.repeat
    every = sorted(corpus.rglob("*.py"))
    parsed = _pre_filtered(every)
    summarised = _summarised(every, corpus)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    ruff = _ruff()
    rows: dict[str, list[tuple[float, float, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="parse-floor-") as scratch:
        listings = {}
        for name, files in (("every", every), ("parsed", parsed), ("summarised", summarised)):
            listings[name] = Path(scratch, name)
            listings[name].write_text("".join(f"{p}\n" for p in files), encoding="utf-8")
        steps = (
            ("read + decode, every file", "read", "every"),
            ("CPython ast, every file", "ast", "every"),
            ("CPython ast, files summarised", "ast", "summarised"),
            ("libcst, files with trigger words", "libcst", "parsed"),
            ("libcst, files summarised", "libcst", "summarised"),
        )
        me = [sys.executable, str(Path(__file__).resolve())]
        for _ in range(repeat):
            if ruff is not None:
                ruff_command = [
                    ruff, "check", "--isolated", "--select", "ALL", "--no-cache", "--exit-zero",
                ]  # fmt: skip
                rows.setdefault("ruff ALL (no cache)", []).append(
                    _measure([*ruff_command, "--quiet", "."], corpus, env)
                )
            for name, step, listing in steps:
                command = [*me, "--step", step, "--files", str(listings[listing])]
                rows.setdefault(name, []).append(_measure(command, corpus, env))
    print(
        f"corpus: {corpus} ({len(every)} .py files; {len(parsed)} pass amp-lint's pre-filter, "
        f"{len(summarised)} are summarised)"
    )
    print(f"{repeat} run(s) each, medians; {_workers()} worker processes")
    base = rows.get("ruff ALL (no cache)")
    base_wall = statistics.median(r[0] for r in base) if base else None
    print(f"{'':32} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9} {'wall/ruff':>10}")
    for name, runs in rows.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        peak = max(r[2] for r in runs) / 1024
        ratio = f"{wall / base_wall:>10.2f}" if base_wall else f"{'-':>10}"
        print(f"{name:32} {wall:8.2f} {cpu:8.2f} {peak:9.0f} {ratio}")
    if ruff is None:
        print("ruff not found: install it (pip install ruff) for the comparison")
    return 0


def _workers() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


if __name__ == "__main__":
    raise SystemExit(main())
