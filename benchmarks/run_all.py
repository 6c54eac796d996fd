"""Run every benchmark in this folder; `--smoke` runs each at a tiny size (a CI check, not data)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    scripts = sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name)
    if not scripts:
        print("no benchmarks yet")
        return 0
    failed = 0
    for script in scripts:
        command = [sys.executable, str(script), *(["--smoke"] if args.smoke else [])]
        print(f"$ {' '.join(command)}", flush=True)
        failed += subprocess.run(command, check=False).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
