"""The build fails when a rule, a command-line argument or an integration module has no page."""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import pytest
from docs_site import DOCS

import scaler.integrations
from linter.rules import ALL_RULES

sys.path.insert(0, str(DOCS / "_ext"))
import cli_reference
import page_coverage

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

ROOT = DOCS.parent


def _configured_commands() -> list[str]:
    tree = ast.parse((DOCS / "conf.py").read_text(encoding="utf-8"))
    return next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["ampscale_commands"]
    )


def test_every_command_people_run_is_checked() -> None:
    # Console scripts, and packages runnable with `python -m`: each one's parser is listed.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    modules = {target.split(":")[0] for target in project["scripts"].values()}
    modules |= {f"{path.parent.name}.cli" for path in ROOT.glob("*/__main__.py")}
    assert modules == {"linter.cli", "scaler.cli"}
    assert {target.split(":")[0] for target in _configured_commands()} == modules


def test_the_real_commands_are_all_on_a_page() -> None:
    # What the docs render today (cli.md's directives, and editors.md's for `amp-lint server`)
    # covers every argument of both commands.
    rendered = [
        pair
        for target in (
            "linter.cli:build_parser",
            "linter.cli:build_server_parser",
            "scaler.cli:build_inspect_parser",
        )
        for pair in cli_reference.command_arguments(cli_reference.load_parser(target))
    ]
    assert page_coverage.missing_arguments(_configured_commands(), rendered) == []
    assert ("amp-lint", "--unsafe-fixes") in rendered
    assert ("amp-lint server", "--debounce") in rendered
    assert ("python -m scaler inspect", "--count-out-of-range") in rendered


def _parser_with_a_new_subcommand() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tool")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    inspect = commands.add_parser("inspect")
    inspect.add_argument("path", metavar="PATH", help="a file")
    export = commands.add_parser("export")
    export.add_argument("--to", help="where")
    return parser


def test_an_undocumented_argument_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        page_coverage, "load_parser", lambda target: _parser_with_a_new_subcommand()
    )
    rendered = [("tool inspect", "PATH"), ("tool inspect", "-h"), ("tool inspect", "--help")]
    missing = page_coverage.missing_arguments(["tool:parser"], rendered)
    assert missing == [("tool export", "-h"), ("tool export", "--help"), ("tool export", "--to")]


def test_a_rule_without_a_page_is_reported() -> None:
    pages = {f"reference/rules/{rule.code.lower()}" for rule in ALL_RULES}
    assert page_coverage.missing_rule_pages(pages) == []
    dropped = ALL_RULES[-1]
    assert page_coverage.missing_rule_pages(
        pages - {f"reference/rules/{dropped.code.lower()}"}
    ) == [dropped.code]


def test_every_integration_module_is_checked() -> None:
    names = page_coverage.integration_modules()
    on_disk = {
        f"scaler.integrations.{path.stem}"
        for path in Path(scaler.integrations.__file__).parent.glob("*.py")
        if not path.name.startswith("_")
    }
    assert set(names) == on_disk
    assert "scaler.integrations.lightning" in names


def test_an_integration_module_without_a_how_to_is_reported() -> None:
    how_tos = [
        (DOCS / "guides" / name).read_text(encoding="utf-8")
        for name in ("hf-trainer.md", "accelerate.md", "lightning.md")
    ]
    modules = [*page_coverage.integration_modules(), "scaler.integrations.keras"]
    assert page_coverage.modules_without_how_to(modules, how_tos) == ["scaler.integrations.keras"]
