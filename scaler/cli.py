"""``python -m scaler``: parse arguments, run the inspection, choose the exit code.

``inspect PATH`` exits 0 when nothing speaks against fp16 training, 1 when something does
(a bf16 checkpoint, a bf16-pretrained family, weights beyond fp16's range), and 2 when the path
cannot be read or holds nothing readable (pickle files are never opened) or on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from scaler._checkpoint_inspect import CheckpointError, inspect_checkpoint
from scaler._fp16_verdict import fp16_verdict, inspected_nothing, verdict_json, verdict_text

EXIT_FP16_OK = 0
EXIT_NOT_FP16_SAFE = 1
EXIT_ERROR = 2


_INSPECT_DESCRIPTION = (
    "Read a .safetensors file or a Hugging Face model folder (config.json and safetensors "
    "shards) without building the model, and say whether fp16 training is advisable. Pickle "
    "files (.bin, .pt...) are listed, never opened. Exit 0: no evidence against fp16; 1: not "
    "fp16-safe; 2: unreadable."
)


def _add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="a .safetensors file or a model folder")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--count-out-of-range",
        action="store_true",
        help="also read every weight and count those fp16 cannot hold (slower)",
    )


def build_inspect_parser() -> argparse.ArgumentParser:
    """The ``inspect`` command's parser on its own (the docs' CLI reference renders it)."""
    parser = argparse.ArgumentParser(
        prog="python -m scaler inspect", description=_INSPECT_DESCRIPTION
    )
    _add_inspect_arguments(parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m scaler`` parser, with its commands."""
    parser = argparse.ArgumentParser(
        prog="python -m scaler", description="ampscale's loss-scaler tools."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    inspect = commands.add_parser(
        "inspect",
        help="say whether a checkpoint can be trained in fp16",
        description=_INSPECT_DESCRIPTION,
    )
    _add_inspect_arguments(inspect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        report = inspect_checkpoint(args.path, count_out_of_range=args.count_out_of_range)
    except CheckpointError as exc:
        print(f"python -m scaler inspect: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if inspected_nothing(report):
        reasons = "; ".join(f"{s.path.name}: {s.reason}" for s in report.skipped)
        print(
            f"python -m scaler inspect: error: {report.path}: nothing readable to inspect "
            f"({reasons})",
            file=sys.stderr,
        )
        return EXIT_ERROR
    verdict = fp16_verdict(report)
    if args.json:
        print(json.dumps(verdict_json(verdict), indent=2))
    else:
        print(verdict_text(verdict))
    return EXIT_FP16_OK if verdict.fp16_advisable else EXIT_NOT_FP16_SAFE
