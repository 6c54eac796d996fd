"""Lint throughput on real PyTorch code nobody here wrote: amp-lint against TorchFix.

The corpus is the installed ``torch`` package's own ``.py`` sources (found without importing
torch), sampled evenly so every run of the same size lints the same files. Both linters run as
their command-line tools on the same files with the same number of worker processes, in one run;
the table gives wall time, files/s and the ratio. A second table times one ~700-line file end to
end, process start included: what a pre-commit hook costs per commit.

TorchFix comes with the ``bench`` extra (``pip install -c constraints.txt '.[bench]'``; it pins
libcst<1.6, so locally it lives in a venv of its own: pass ``--torchfix /path/to/bin/torchfix``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from linter import Finding, ModuleContext, Rule, lint_paths
from linter.rules import ALL_RULES

#: Largest file in the smoke run's corpus.
SMOKE_MAX_BYTES = 8_000
#: The pre-commit case: torch's own GradScaler module (714 lines in torch 2.13).
SINGLE_FILE = Path("amp", "grad_scaler.py")


class ParseOnly(Rule):
    """Matches every file and reports nothing: the cost of parsing everything, no pre-filter."""

    code = "BENCH0"
    name = "parse-only"
    summary = "parse every file"
    triggers = ("",)
    valid = ()
    invalid = ()

    def check(self, context: ModuleContext) -> list[Finding]:
        return []


def torch_sources() -> tuple[Path, list[Path]]:
    """torch's package folder and its ``.py`` files, sorted."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("lint_throughput: torch is not installed; it is the corpus")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root, sorted(root.rglob("*.py"))


def sample(files: Sequence[Path], count: int) -> list[Path]:
    """``count`` files spread evenly over the sorted list (deterministic)."""
    if count >= len(files):
        return list(files)
    step = len(files) / count
    return [files[int(index * step)] for index in range(count)]


def find_torchfix(explicit: str | None) -> list[str] | None:
    """The command that runs TorchFix, or None when it is not installed."""
    if explicit:
        return [explicit]
    found = shutil.which("torchfix")
    if found:
        return [found]
    if importlib.util.find_spec("torchfix") is not None:
        return [sys.executable, "-m", "torchfix"]
    return None


def timed(command: Sequence[str], cwd: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``repeat`` calls (ours is cheap enough to repeat; TorchFix is not)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def row(name: str, files: int, seconds: float, baseline: float | None) -> str:
    ratio = f"{baseline / seconds:8.1f}x" if baseline else " " * 9
    return f"{name:<34} {files:>6} {seconds:>9.2f} {files / seconds:>9.1f} {ratio}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny corpus, for CI")
    parser.add_argument("--files", type=int, default=229, help="corpus size (default 229)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workers, both")
    parser.add_argument("--torchfix", help="path of the torchfix executable")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each amp-lint timing")
    args = parser.parse_args()
    count = 8 if args.smoke else args.files
    repeat = 1 if args.smoke else args.repeat

    root, every = torch_sources()
    # The smoke run checks that everything runs, so it skips torch's few huge generated files
    # (TorchFix spends minutes on sparse/_triton_ops_meta.py alone).
    pool = [p for p in every if p.stat().st_size < SMOKE_MAX_BYTES] if args.smoke else every
    files = sample(pool, count)
    names = [str(path) for path in files]
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    torchfix = find_torchfix(args.torchfix)
    ours = [sys.executable, "-m", "linter", "--exit-zero", "--quiet", "--jobs", str(args.jobs)]
    # An empty folder as cwd, so that no pyproject.toml on the way up changes the settings.
    cwd = tempfile.mkdtemp(prefix="lint-bench-")

    print(f"corpus: {len(files)} of {len(every)} .py files in {root} ({lines} lines)")
    print(f"amp-lint rules: {', '.join(rule.code for rule in ALL_RULES) or 'none registered'}")
    print(f"jobs: {args.jobs}; TorchFix: {' '.join(torchfix) if torchfix else 'NOT AVAILABLE'}")

    # Every timing below reads the files from the page cache, TorchFix's included.
    result = lint_paths(names, jobs=args.jobs)
    parse_all_seconds = median_seconds(
        lambda: lint_paths(names, jobs=args.jobs, rules=(ParseOnly,)), 1
    )
    in_process = median_seconds(lambda: lint_paths(names, jobs=args.jobs), repeat)
    ours_run = timed([*ours, *names], cwd)[1]
    if ours_run.returncode not in (0, 1):
        print(ours_run.stderr, file=sys.stderr)
    ours_seconds = median_seconds(lambda: timed([*ours, *names], cwd), repeat)
    print(
        f"amp-lint: {len(result.diagnostics)} findings, {result.files_parsed} of "
        f"{result.files_checked} files passed the pre-filter and were parsed, "
        f"{len(result.errors)} errors"
    )

    baseline = None
    if torchfix:
        torchfix_seconds, torchfix_run = timed([*torchfix, "--jobs", str(args.jobs), *names], cwd)
        if torchfix_run.returncode not in (0, 1):
            print(f"TorchFix failed ({torchfix_run.returncode}):\n{torchfix_run.stderr[-2000:]}")
        else:
            baseline = torchfix_seconds
            found = len([line for line in torchfix_run.stdout.splitlines() if ": TOR" in line])
            print(f"TorchFix: {found} findings")
    else:
        print("TorchFix is NOT AVAILABLE: install the bench extra, or pass --torchfix PATH")

    print(f"\n{'linter':<34} {'files':>6} {'wall s':>9} {'files/s':>9} {'vs TorchFix':>9}")
    if baseline:
        print(row("TorchFix (CLI)", len(files), baseline, None))
    print(row(f"amp-lint (CLI, median of {repeat})", len(files), ours_seconds, baseline))
    print(row(f"amp-lint (API, median of {repeat})", len(files), in_process, baseline))
    print(row("amp-lint, no pre-filter (API)", len(files), parse_all_seconds, baseline))

    single = root / SINGLE_FILE
    if not single.exists():
        single = min(every, key=lambda path: abs(path.read_bytes().count(b"\n") - 700))
    size = single.read_bytes().count(b"\n")
    print(f"\nsingle file, end to end (process start included): {single} ({size} lines)")
    ours_times = [timed([*ours, str(single)], cwd)[0] for _ in range(repeat)]
    print(f"  amp-lint : median {statistics.median(ours_times):.3f} s over {repeat} runs")
    if torchfix and baseline:
        theirs = [timed([*torchfix, str(single)], cwd)[0] for _ in range(repeat)]
        print(f"  TorchFix : median {statistics.median(theirs):.3f} s over {repeat} runs")
    shutil.rmtree(cwd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
