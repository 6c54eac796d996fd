"""The ``argparse-reference`` directive: a CLI reference rendered from the real argument parser.

Usage: an argument ``package.module:function`` naming a function that returns an
``argparse.ArgumentParser``. Every option, its help, choices and default come from that parser,
so the page cannot drift from the command.
"""

from __future__ import annotations

import argparse
import importlib

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from table_nodes import build_table


def load_parser(target: str) -> argparse.ArgumentParser:
    """Call the ``module:function`` named by ``target`` and return its parser."""
    module_name, sep, function_name = target.partition(":")
    if not sep or not function_name:
        raise ValueError(f"argparse-reference: expected 'module:function', got {target!r}")
    parser = getattr(importlib.import_module(module_name), function_name)()
    if not isinstance(parser, argparse.ArgumentParser):
        raise TypeError(f"argparse-reference: {target} returned {type(parser).__name__}")
    return parser


def _help_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    # argparse lets help strings interpolate %(default)s, %(prog)s and the action's fields.
    values = {**vars(action), "prog": parser.prog}
    for key in ("choices",):
        if values.get(key) is not None:
            values[key] = ", ".join(map(str, values[key]))
    try:
        return action.help % values
    except (KeyError, TypeError, ValueError):
        return action.help


def _invocation(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar or action.dest
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    if action.metavar is not None:
        metavar = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    elif action.choices is not None:
        metavar = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        metavar = action.dest.upper()
    return ", ".join(f"{flag} {metavar}" for flag in action.option_strings)


def _default_text(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, False):
        return ""
    if isinstance(action.default, list | tuple):
        return " ".join(map(str, action.default))
    return str(action.default)


def _literal(text: str) -> nodes.Node:
    paragraph = nodes.paragraph()
    paragraph += nodes.literal(text=text)
    return paragraph


class ArgparseReference(SphinxDirective):
    """Render usage, description and one table per argument group (rubric-titled)."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        parser = load_parser(self.arguments[0])
        output: list[nodes.Node] = [
            nodes.literal_block(text=parser.format_usage().strip(), language="text")
        ]
        if parser.description:
            output.append(nodes.paragraph(text=parser.description))
        for group in parser._action_groups:  # argparse has no public way to list its groups.
            actions = [a for a in group._group_actions if a.help is not argparse.SUPPRESS]
            if not actions:
                continue
            output.append(nodes.rubric(text=(group.title or "arguments").capitalize()))
            if group.description:
                output.append(nodes.paragraph(text=group.description))
            rows = [
                [_literal(_invocation(a)), _help_text(parser, a), _default_text(a)] for a in actions
            ]
            output.append(
                build_table(["argument", "meaning", "default"], rows, widths=[30, 55, 15])
            )
        if parser.epilog:
            output.append(nodes.paragraph(text=parser.epilog))
        return output


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("argparse-reference", ArgparseReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
