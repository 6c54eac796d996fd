"""Run the tests that spawn processes or depend on timing many times in a row; fail on any failure.

A flake that shows up once in three runs passes a single CI run two times out of three. This runs
each target ``--runs`` times (30 by default) in fresh pytest processes, prints one line per run
and a summary such as ``30/30 passed``, and exits non-zero if any run failed, printing the
failed runs' output so the failure can be read.

Usage::

    python tools/stress_distributed.py                 # the gloo tests, 30 runs
    python tools/stress_distributed.py --runs 10 --xdist 2
    python tools/stress_distributed.py tests/scaler/test_scaler_distributed.py tests/other.py
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The gloo tests (worker processes). Other tests that start processes (the console script, the
#: pre-commit hook, the no-torch and never-executes checks, the packaging build) can be named on
#: the command line, with ``--xdist 2`` to run them as CI does.
DEFAULT_TARGETS = (
    "tests/scaler/test_scaler_distributed.py",
    "tests/scaler/integrations/test_integration_accelerate_fsdp2.py",
)


def run_once(targets: list[str], xdist: int | None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *targets]
    if xdist:
        command += ["-n", str(xdist)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", default=list(DEFAULT_TARGETS))
    parser.add_argument("--runs", type=int, default=30, help="runs in a row (default 30)")
    parser.add_argument("--xdist", type=int, default=None, help="pytest-xdist workers per run")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    failures: list[tuple[int, subprocess.CompletedProcess[str]]] = []
    for run in range(1, args.runs + 1):
        start = time.perf_counter()
        result = run_once(args.targets, args.xdist)
        last = (result.stdout.strip().splitlines() or ["(no output)"])[-1]
        status = "ok" if result.returncode == 0 else f"FAILED (exit {result.returncode})"
        print(f"run {run:>3}/{args.runs}: {status} in {time.perf_counter() - start:.1f}s: {last}")
        sys.stdout.flush()
        if result.returncode != 0:
            failures.append((run, result))
    for run, result in failures:
        print(f"\n===== run {run} output =====\n{result.stdout}\n{result.stderr}")
    passed = args.runs - len(failures)
    print(f"{passed}/{args.runs} passed: {' '.join(args.targets)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
