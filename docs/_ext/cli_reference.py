"""The ``argparse-reference`` directive: a CLI reference rendered from the real argument parser.

Usage: an argument ``package.module:function`` naming a function that returns an
``argparse.ArgumentParser``. Every option, its help, choices and default come from that parser,
so the page cannot drift from the command. Each rendered option is recorded in the build
environment (`RENDERED`), so ``page_coverage`` can fail the build when a command's option is
documented nowhere.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterator

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


#: Attribute of the build environment: docname -> {(command, argument)} rendered on that page.
RENDERED = "ampscale_cli_rendered"


def _documented(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions if action.help is not argparse.SUPPRESS]


def argument_names(action: argparse.Action) -> tuple[str, ...]:
    """How an argument is spelt on the command line: its flags, or a positional's metavar."""
    if action.option_strings:
        return tuple(action.option_strings)
    return (action.metavar if isinstance(action.metavar, str) else action.dest,)


def command_arguments(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str]]:
    """(command, argument) for every argument of a command and its subcommands, recursively.

    A parser with subcommands (``python -m scaler COMMAND``) contributes only its subcommands'
    arguments: the reference documents each subcommand, not the dispatcher."""
    actions = _documented(parser)
    commands = [a for a in actions if isinstance(a, argparse._SubParsersAction)]
    if commands:
        for subparser in dict.fromkeys(p for action in commands for p in action.choices.values()):
            yield from command_arguments(subparser)
        return
    for action in actions:
        for name in argument_names(action):
            yield parser.prog, name


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
        rendered = getattr(self.env, RENDERED, {})
        setattr(self.env, RENDERED, rendered)
        rendered.setdefault(self.env.docname, set()).update(command_arguments(parser))
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


def _purge(app: Sphinx, env: object, docname: str) -> None:
    getattr(env, RENDERED, {}).pop(docname, None)


def _merge(app: Sphinx, env: object, docnames: set[str], other: object) -> None:
    rendered = getattr(env, RENDERED, {})
    setattr(env, RENDERED, rendered)
    for docname, arguments in getattr(other, RENDERED, {}).items():
        if docname in docnames:
            rendered.setdefault(docname, set()).update(arguments)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("argparse-reference", ArgparseReference)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
