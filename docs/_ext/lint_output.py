"""The ``lint-output`` directive: run amp-lint while the docs build and show what it printed.

Usage: the directive's argument is the command line after ``amp-lint``, with paths relative to
the repository root, e.g. ``examples/fp16_get_scale_every_step.py``. Findings shown in the docs
are then always the linter's current messages, never a pasted copy.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from linter.cli import main

#: Paths in the directive are relative to the repository root (the folder above docs/).
REPOSITORY = Path(__file__).resolve().parents[2]


def run_amp_lint(arguments: list[str]) -> tuple[int, str]:
    """Exit status and combined output of ``amp-lint <arguments>`` run from the repository root
    (without the result cache: a docs build leaves no ``.amp_lint_cache`` in the source tree)."""
    output = io.StringIO()
    previous = os.getcwd()
    os.chdir(REPOSITORY)
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            status = main(["--no-cache", *arguments])
    finally:
        os.chdir(previous)
    return status, output.getvalue()


class LintOutput(SphinxDirective):
    """A console block: the command, what it printed, and its exit status."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = False

    def run(self) -> list[nodes.Node]:
        arguments = shlex.split(self.arguments[0])
        status, output = run_amp_lint(arguments)
        text = f"$ amp-lint {shlex.join(arguments)}\n{output.rstrip()}\n$ echo $?\n{status}"
        # A terminal wraps amp-lint's long lines; the page does too (the "lint-output" class).
        return [nodes.literal_block(text=text, language="console", classes=["lint-output"])]


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("lint-output", LintOutput)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
