"""The `amp-lint` command: parse arguments, run the linter, choose the exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from linter import __version__
from linter.rules import ALL_RULES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="amp-lint",
        description="Find fp16 mixed-precision (AMP) pitfalls in PyTorch training code.",
    )
    parser.add_argument("paths", nargs="*", default=["."], help="files or folders to lint")
    parser.add_argument("--version", action="version", version=f"amp-lint {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    build_parser().parse_args(argv)
    if not ALL_RULES:
        print("amp-lint: no rules are registered yet; nothing was checked", file=sys.stderr)
    return 0
