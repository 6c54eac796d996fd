"""Rules that are off by default: left out of a run with no ``select``, on when a selector picks
them (``ALL``, a prefix, the code or name, ``extend-select``), marked in --list-rules/--explain."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from lint_dummies import DUMMY_RULES, PrintCall

import linter.cli
import linter.rules
from linter._selection import SelectorError, enabled_rules
from linter.api import lint_paths, lint_source
from linter.cli import main
from linter.config import Settings, load_settings


class NoisyPrint(PrintCall):
    """Flags every ``print(...)`` call too, but only when asked for.

    ## What it does
    Reports ``print`` calls.
    """

    code = "TST004"
    name = "noisy-print"
    summary = "a call of print, off by default"
    default_enabled = False


RULES = (*DUMMY_RULES, NoisyPrint)


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> tuple[type[linter.Rule], ...]:
    monkeypatch.setattr(linter.rules, "ALL_RULES", RULES)
    monkeypatch.setattr(linter.cli, "ALL_RULES", RULES)
    return RULES


def codes(rules: tuple[type[linter.Rule], ...]) -> set[str]:
    return {rule.code for rule in rules}


def test_the_default_set_leaves_out_rules_that_are_off_by_default() -> None:
    assert codes(enabled_rules(RULES, None, ())) == {"TST001", "TST002", "TST003"}


@pytest.mark.parametrize("selector", ["ALL", "TST", "TST00", "TST004", "noisy-print"])
def test_any_selector_that_picks_the_rule_turns_it_on(selector: str) -> None:
    assert NoisyPrint in enabled_rules(RULES, [selector], ())


def test_extend_select_adds_it_to_the_default_set() -> None:
    assert codes(enabled_rules(RULES, None, (), ["TST004"])) == {
        "TST001",
        "TST002",
        "TST003",
        "TST004",
    }


def test_ignore_still_wins_over_all() -> None:
    assert NoisyPrint not in enabled_rules(RULES, ["ALL"], ["TST004"])


def test_an_explicit_select_replaces_the_default_set() -> None:
    assert enabled_rules(RULES, ["TST004"], ()) == (NoisyPrint,)


def test_a_run_with_default_settings_does_not_report_it() -> None:
    reported = {d.code for d in lint_source("print(1)\n", rules=RULES)}
    assert reported == {"TST001"}


def test_a_run_with_select_all_reports_it() -> None:
    reported = {d.code for d in lint_source("print(1)\n", rules=RULES, select=["ALL"])}
    assert reported == {"TST001", "TST004"}


def test_lint_paths_with_extend_select_reports_it(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("print(1)\n")
    result = lint_paths([tmp_path], rules=RULES, extend_select=["TST004"], jobs=1)
    assert {d.code for d in result.diagnostics} == {"TST001", "TST004"}


def test_a_config_without_select_keeps_the_default_set(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.amp-lint]\nignore = ['TST002']\n")
    settings = load_settings(path, rules=RULES)
    assert settings.select is None
    assert codes(enabled_rules(RULES, settings.select, settings.ignore)) == {"TST001", "TST003"}


def test_a_config_with_select_all_turns_it_on(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.amp-lint]\nselect = ['ALL']\n")
    settings = load_settings(path, rules=RULES)
    assert NoisyPrint in enabled_rules(RULES, settings.select, settings.ignore)


def test_nothing_selected_names_the_default_set_in_the_error() -> None:
    with pytest.raises(SelectorError, match=r"select the rules on by default, .*ignore \['TST'\]"):
        lint_source("print(1)\n", rules=RULES, settings=Settings(ignore=("TST",)))


def test_list_rules_marks_it_off_in_a_fourth_column(
    registry: tuple[type[linter.Rule], ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--list-rules"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "TST001\tprint-call\ta call of print"
    assert lines[-1] == "TST004\tnoisy-print\ta call of print, off by default\toff by default"


def test_explain_says_it_is_off_and_how_to_turn_it_on(
    registry: tuple[type[linter.Rule], ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--explain", "TST004"]) == 0
    out = capsys.readouterr().out
    assert "off by default: run it with `--extend-select TST004`" in out
    assert main(["--explain", "TST001"]) == 0
    assert "off by default" not in capsys.readouterr().out


def test_the_command_line_runs_it_only_when_asked(
    registry: tuple[type[linter.Rule], ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "job.py").write_text("print(1)\n")
    monkeypatch.chdir(tmp_path)
    main(["--no-cache", "job.py"])
    assert "TST004" not in capsys.readouterr().out
    main(["--no-cache", "--extend-select", "TST004", "job.py"])
    assert "job.py:1:1: TST004 print called" in capsys.readouterr().out


def test_the_rule_pages_say_off_by_default() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "_ext"))
    import rule_pages

    assert not rule_pages.on_by_default(NoisyPrint)
    assert rule_pages.on_by_default(PrintCall)
    page = rule_pages.render_rule_page(NoisyPrint)
    assert "off by default · defined in" in page
    assert "This rule is **off by default**" in page
    index = rule_pages.render_index((PrintCall, NoisyPrint))
    assert "| none | off |" in index
    assert "only when a selector picks it: `--extend-select` with its code" in index
    assert "| none | on |" in index
