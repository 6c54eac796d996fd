"""Lint throughput on real PyTorch code nobody here wrote: amp-lint against TorchFix.

The corpus is the installed ``torch`` package's own ``.py`` sources (found without importing
torch), sampled evenly so every run of the same size lints the same files. Both linters run as
their command-line tools on the same files with the same number of worker processes, in one run;
the table gives wall time, files/s and the ratio. A second table times one ~700-line file end to
end, process start included: what a pre-commit hook costs per commit.

One more check, ours alone (the cost per finding is `findings_scaling.py`'s):

- The result cache, cold against warm, on real library code: the seven wheels of transformers,
  accelerate, diffusers, timm, peft, trl and pytorch-lightning, unpacked. ``--fetch-wheels``
  downloads them once (``pip download --no-deps``) into ``benchmarks/.wheels`` (git-ignored);
  ``--wheels DIR`` or ``$AMP_LINT_BENCH_WHEELS`` points at a folder of them unpacked elsewhere.
  The smoke run never downloads, and skips this check when the corpus is absent.

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
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from linter import Finding, ModuleContext, Rule, lint_paths
from linter.rules import ALL_RULES

#: Largest file in the smoke run's corpus.
SMOKE_MAX_BYTES = 8_000
#: The pre-commit case: torch's own GradScaler module (714 lines in torch 2.13).
SINGLE_FILE = Path("amp", "grad_scaler.py")
#: How the benchmarks run amp-lint's command.
LINTER = (sys.executable, "-m", "linter", "--exit-zero", "--quiet")
#: The library wheels of the cache check (pip names).
WHEELS = (
    "transformers",
    "accelerate",
    "diffusers",
    "timm",
    "peft",
    "trl",
    "pytorch-lightning",
)
#: Where ``--fetch-wheels`` puts them.
WHEELS_HOME = Path(__file__).resolve().parent / ".wheels"


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


def fetch_wheels(home: Path) -> Path:
    """Download the library wheels (no dependencies) and unpack each into ``home/src``."""
    wheels = home / "wheels"
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(wheels), *WHEELS]
    subprocess.run(command, check=True)
    for wheel in sorted(wheels.glob("*.whl")):
        target = home / "src" / wheel.stem
        if not target.exists():
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(target)
    return home / "src"


def wheels_corpus(explicit: str | None) -> Path | None:
    for candidate in (explicit, os.environ.get("AMP_LINT_BENCH_WHEELS"), WHEELS_HOME / "src"):
        if candidate and Path(candidate).is_dir() and any(Path(candidate).iterdir()):
            return Path(candidate)
    return None


def cache_cold_warm(corpus: Path, jobs: int, repeat: int, limit: int | None) -> None:
    """End-to-end CLI time on the corpus with an empty cache, then with the filled one."""
    files = sorted(str(path) for path in corpus.rglob("*.py"))
    notebooks = sorted(str(path) for path in corpus.rglob("*.ipynb"))
    targets = files[:limit] if limit else [str(corpus)]
    shown = f"{len(targets)} files" if limit else f"{len(files)} .py + {len(notebooks)} notebooks"
    print(f"\nresult cache, cold vs warm (CLI, {jobs} jobs): {corpus} ({shown})")
    cache = tempfile.mkdtemp(prefix="lint-cache-")
    command = [*LINTER, "--jobs", str(jobs), "--cache-dir", cache, *targets]
    cwd = tempfile.mkdtemp(prefix="lint-bench-")
    cold, cold_run = timed(command, cwd)
    warm_runs = [timed(command, cwd) for _ in range(repeat)]
    warm = statistics.median(seconds for seconds, _ in warm_runs)
    same = all(run.stdout == cold_run.stdout for _, run in warm_runs)
    print(f"  cold (empty cache)   : {cold:8.2f} s")
    print(f"  warm (median of {repeat})  : {warm:8.2f} s")
    print(
        f"  cold / warm          : {cold / warm:8.1f}x (same findings: {'yes' if same else 'NO'})"
    )
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(cwd, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny corpus, for CI")
    parser.add_argument("--files", type=int, default=229, help="corpus size (default 229)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workers, both")
    parser.add_argument("--torchfix", help="path of the torchfix executable")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each amp-lint timing")
    parser.add_argument("--wheels", help="folder of the unpacked library wheels (cache check)")
    parser.add_argument(
        "--fetch-wheels", action="store_true", help=f"download the wheels into {WHEELS_HOME}"
    )
    args = parser.parse_args()
    if args.fetch_wheels:
        print(f"wheels unpacked in {fetch_wheels(WHEELS_HOME)}")
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
    # No result cache: this compares linting, and TorchFix keeps none.
    ours = [*LINTER, "--no-cache", "--jobs", str(args.jobs)]
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

    corpus = wheels_corpus(args.wheels)
    if corpus is None:
        print(
            "\nresult cache, cold vs warm: SKIPPED, no wheels corpus "
            "(run with --fetch-wheels once, or pass --wheels DIR)"
        )
    else:
        cache_cold_warm(corpus, args.jobs, repeat, 200 if args.smoke else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
