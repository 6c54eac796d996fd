"""amp-lint reading whole projects, side by side with ``ruff check --isolated --select ALL``.

For a tree of real training code (a folder of repositories, each its own project), in one run:

- **cold**: ``amp-lint`` with an empty cache (summaries, project, lint) vs ruff with every rule,
  and vs TorchFix with every rule when it is installed (the ``bench`` extra, or
  ``--torchfix PATH``): TorchFix is, like amp-lint, a libcst linter of PyTorch code, so its row
  shows what parsing with libcst costs on the same tree (it reads one file at a time and keeps no
  cache, so it has a cold row only);
- **warm**: ``amp-lint`` again, every result and summary from the cache;
- **one file edited**: a function of one summarised module gains a line, then ``amp-lint`` again
  (that module and the files whose results used its summary are linted again);

each as wall and CPU time (the child processes' user + system time) and peak memory (the largest
resident size of any process of the run), reported with ratios to ruff. Runs alternate
(ruff, amp-lint, ruff, ...) so load on the machine falls on both alike. The edited file is
restored afterwards.

    python benchmarks/lint_project.py --corpus /path/to/repos --repeat 3 [--torchfix PATH]
    python benchmarks/lint_project.py --smoke      # this repository's examples/, once
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lint_throughput import find_torchfix

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


#: Runs a command and prints the CPU time and peak resident size of it and its workers: a
#: process of its own, so the peak is this run's, not the largest of the benchmark so far.
_PROBE = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(u.ru_utime + u.ru_stime, u.ru_maxrss, done.returncode)\n"
    "sys.stderr.write(done.stderr.decode(errors='replace')[-2000:])\n"
)


def _measure(
    command: list[str], cwd: Path, env: dict[str, str], ok: tuple[str, ...] = ("0",)
) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the command and its workers), peak resident KiB.

    ``ok``: the exit statuses of a finished run (TorchFix exits 1 when it reports anything).
    """
    start = time.perf_counter()
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE, *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    cpu, peak, status = probe.stdout.split()
    if status not in ok:  # a run that failed at once (a config it rejects) is no measurement
        raise SystemExit(f"{command[0]} exited {status} in {cwd}: {probe.stderr.strip()}")
    return wall, float(cpu), int(peak)


def _ruff() -> str | None:
    found = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    return found if os.path.exists(found) else None


def _edit_one(corpus: Path) -> tuple[Path, str] | None:
    """A module with a GradScaler step in a function, its text before the edit."""
    for path in sorted(corpus.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        match = re.search(r"^(\s+)\S*scaler\.step\(", text, re.MULTILINE)
        if match:
            edited = text[: match.start()] + f"{match.group(1)}pass\n" + text[match.start() :]
            path.write_text(edited, encoding="utf-8")
            return path, text
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--corpus", type=Path, help="folder of projects (repositories) to lint")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement")
    parser.add_argument("--smoke", action="store_true", help="examples/, once (a CI check)")
    parser.add_argument("--torchfix", help="path of the torchfix executable (default: installed)")
    args = parser.parse_args()
    corpus = (ROOT / "examples") if args.smoke else args.corpus
    if corpus is None or not corpus.is_dir():
        parser.error("--corpus must name a folder (or pass --smoke)")
    repeat = 1 if args.smoke else args.repeat
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # amp-lint's bytecode, compiled once as pip compiles an installed package: without it, a
    # shell with PYTHONDONTWRITEBYTECODE set compiles the linter again in every run (0.25 s of
    # a warm run here).
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "linter")], check=True, env=env
    )
    cache = Path(tempfile.mkdtemp(prefix="amp-lint-bench-"))
    # Every rule, as ruff runs with ALL (AMP015 is off by default).
    amp = [sys.executable, "-m", "linter", ".", "--select", "ALL", "--exit-zero"]
    amp += ["--cache-dir", str(cache)]
    ruff = _ruff()
    torchfix = find_torchfix(args.torchfix)
    rows: dict[str, list[tuple[float, float, int]]] = {}
    try:
        for _ in range(repeat):
            if ruff is not None:
                # --isolated: every file with every rule, whatever the repositories' own ruff
                # settings say (one pins another ruff version, which stops ruff at once).
                ruff_command = [
                    ruff, "check", "--isolated", "--select", "ALL", "--no-cache", "--exit-zero",
                ]  # fmt: skip
                rows.setdefault("ruff ALL (no cache)", []).append(
                    _measure([*ruff_command, "--quiet", "."], corpus, env)
                )
            if torchfix is not None:
                rows.setdefault("TorchFix ALL (no cache)", []).append(
                    _measure([*torchfix, "--select", "ALL", "."], corpus, env, ok=("0", "1"))
                )
            shutil.rmtree(cache, ignore_errors=True)
            rows.setdefault("amp-lint cold", []).append(_measure(amp, corpus, env))
            rows.setdefault("amp-lint warm", []).append(_measure(amp, corpus, env))
            if args.smoke:
                continue
            edited = _edit_one(corpus)
            try:
                rows.setdefault("amp-lint, one file edited", []).append(_measure(amp, corpus, env))
            finally:
                if edited is not None:
                    edited[0].write_text(edited[1], encoding="utf-8")
            _measure(amp, corpus, env)  # back to the unedited results
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    files = sum(1 for _ in corpus.rglob("*.py"))
    print(f"corpus: {corpus} ({files} .py files), {repeat} run(s) each, medians")
    base = rows.get("ruff ALL (no cache)")
    base_wall = statistics.median(r[0] for r in base) if base else None
    base_cpu = statistics.median(r[1] for r in base) if base else None
    print(f"{'':28} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9} {'wall/ruff':>10} {'cpu/ruff':>9}")
    for name, runs in rows.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        peak = max(r[2] for r in runs) / 1024
        ratios = (
            f"{wall / base_wall:>10.2f} {cpu / base_cpu:>9.2f}"
            if base_wall and base_cpu
            else f"{'-':>10} {'-':>9}"
        )
        print(f"{name:28} {wall:8.2f} {cpu:8.2f} {peak:9.0f} {ratios}")
    if ruff is None:
        print("ruff not found: install it (pip install ruff) for the comparison")
    if torchfix is None:
        print("TorchFix not found: install the bench extra, or pass --torchfix PATH, for its row")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
