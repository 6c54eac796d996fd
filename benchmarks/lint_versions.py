"""Lint time of this amp-lint against another version of itself, on the same files, in one run.

A change to a rule must not make linting much slower. This times two source trees of amp-lint
— this checkout and a baseline (e.g. main, exported with
``git archive main linter | tar -x -C /tmp/main-src``) — as command-line runs over the same
corpus, interleaved (baseline, ours, baseline, ours...), and prints the median wall and CPU
seconds of each and their ratio. CPU time (user + system of the child processes) is the steadier
figure on a shared machine.

    python benchmarks/lint_versions.py --baseline /tmp/main-src --corpus /path/to/site-packages
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: This checkout's source tree (the folder holding ``linter/``).
OURS = Path(__file__).resolve().parents[1]


def run_once(source_tree: Path, corpus: Path, jobs: int, cwd: str) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds and stdout of one ``python -m linter`` run from ``source_tree``."""
    env = {**os.environ, "PYTHONPATH": str(source_tree)}
    command = [sys.executable, "-m", "linter", "--exit-zero", "--jobs", str(jobs), str(corpus)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"lint_versions: {source_tree} failed:\n{done.stderr[-2000:]}")
    return wall, cpu, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="source tree to compare")
    parser.add_argument("--corpus", type=Path, help="folder of .py files")
    parser.add_argument("--jobs", type=int, default=1, help="workers, both (default 1)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="CI check of this script: this checkout against itself on examples/, one run each",
    )
    args = parser.parse_args()
    if args.smoke:
        args.baseline = args.baseline or OURS
        args.corpus = args.corpus or OURS / "examples"
        args.repeat = 1
    if args.baseline is None or args.corpus is None:
        parser.error("--baseline and --corpus are required (or --smoke)")
    if not (args.baseline / "linter" / "__init__.py").exists():
        raise SystemExit(f"lint_versions: {args.baseline} has no linter/ package")
    # An empty folder as cwd, so that no pyproject.toml on the way up changes the settings.
    cwd = tempfile.mkdtemp(prefix="lint-versions-")
    trees = {"baseline": args.baseline.resolve(), "ours": OURS}
    walls: dict[str, list[float]] = {name: [] for name in trees}
    cpus: dict[str, list[float]] = {name: [] for name in trees}
    findings: dict[str, int] = {}
    for _ in range(args.repeat):
        for name, tree in trees.items():
            wall, cpu, stdout = run_once(tree, args.corpus, args.jobs, cwd)
            walls[name].append(wall)
            cpus[name].append(cpu)
            findings[name] = sum(1 for line in stdout.splitlines() if ": AMP" in line)
    files = sum(1 for _ in args.corpus.rglob("*.py"))
    print(f"corpus: {args.corpus} ({files} .py files); jobs {args.jobs}; {args.repeat} runs each")
    print(f"{'tree':<10} {'findings':>8} {'wall s':>9} {'cpu s':>9}")
    for name in trees:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name:<10} {findings[name]:>8} {wall:>9.2f} {cpu:>9.2f}")
    wall_ratio = statistics.median(walls["ours"]) / statistics.median(walls["baseline"])
    cpu_ratio = statistics.median(cpus["ours"]) / statistics.median(cpus["baseline"])
    print(f"ours / baseline: wall {wall_ratio:.2f}x, cpu {cpu_ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
