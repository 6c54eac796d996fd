"""Fail the build when something users can run has no page: a rule, a command-line argument, or
a framework integration module.

Rule pages are generated from ``linter.rules.ALL_RULES`` (``rule_pages``); here we check the
generation really produced a document for each. Every argument of every command in the
``ampscale_commands`` setting (``module:function`` returning the command's parser, subcommands
followed) must be rendered by an ``argparse-reference`` directive somewhere. Every public module
of ``scaler.integrations`` must be named (``scaler.integrations.NAME``) by a how-to page under
``guides/``. Each miss is a warning of type ``ampscale``, so the strict build (``-W``) fails.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Iterable
from pathlib import Path

from cli_reference import RENDERED, command_arguments, load_parser
from rule_pages import RULES_DIR, page_name
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util import logging

import scaler.integrations
from linter.rules import ALL_RULES

logger = logging.getLogger(__name__)

#: Folder (relative to the docs source) of the how-to pages an integration module needs.
HOW_TO_DIR = "guides/"


def missing_rule_pages(found_docs: Iterable[str]) -> list[str]:
    """Codes of registered rules whose generated page is not among the documents."""
    found = set(found_docs)
    return [
        rule.code for rule in ALL_RULES if f"{RULES_DIR.as_posix()}/{page_name(rule)}" not in found
    ]


def missing_arguments(
    commands: Iterable[str], rendered: Iterable[tuple[str, str]]
) -> list[tuple[str, str]]:
    """(command, argument) pairs of the real parsers that no reference page rendered."""
    shown = set(rendered)
    return [
        pair
        for target in commands
        for pair in dict.fromkeys(command_arguments(load_parser(target)))
        if pair not in shown
    ]


def integration_modules() -> list[str]:
    """Dotted names of the public modules in ``scaler.integrations``."""
    return [
        f"{scaler.integrations.__name__}.{module.name}"
        for module in pkgutil.iter_modules(scaler.integrations.__path__)
        if not module.name.startswith("_")
    ]


def modules_without_how_to(modules: Iterable[str], how_to_texts: Iterable[str]) -> list[str]:
    """The modules that no how-to page's source names."""
    texts = list(how_to_texts)
    return [module for module in modules if not any(module in text for text in texts)]


def _warn(message: str, *args: object) -> None:
    logger.warning(message, *args, type="ampscale", subtype="page-coverage")


def check_coverage(app: Sphinx, env: BuildEnvironment) -> None:
    for code in missing_rule_pages(env.found_docs):
        _warn("rule %s has no page under %s", code, RULES_DIR.as_posix())
    rendered = {pair for pairs in getattr(env, RENDERED, {}).values() for pair in pairs}
    for command, argument in missing_arguments(app.config.ampscale_commands, rendered):
        _warn(
            "command %r: argument %s is on no page (add an argparse-reference)", command, argument
        )
    how_tos = [
        Path(env.doc2path(docname)).read_text(encoding="utf-8")
        for docname in sorted(env.found_docs)
        if docname.startswith(HOW_TO_DIR)
    ]
    for module in modules_without_how_to(integration_modules(), how_tos):
        _warn("integration module %s has no how-to page under %s", module, HOW_TO_DIR)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("ampscale_commands", [], "env", types=[list])
    app.connect("env-check-consistency", check_coverage)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
