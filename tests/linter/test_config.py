"""Configuration: finding the file, validating every key, and rule selection."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_dummies import DUMMY_RULES, Configurable, Exploding, PrintCall

from linter._selection import SelectorError, check_selectors, enabled_rules
from linter.config import ConfigError, Settings, find_config, load_settings


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pyproject.toml"
    path.write_text(text)
    return path


def load(path: Path) -> Settings:
    return load_settings(path, rules=DUMMY_RULES)


def test_nearest_pyproject_with_our_table_wins(tmp_path: Path) -> None:
    outer = write(tmp_path, "[tool.amp-lint]\nignore = ['TST001']\n")
    write(tmp_path / "pkg", "[project]\nname = 'x'\n")
    inner = tmp_path / "pkg" / "deep"
    inner.mkdir()
    assert find_config(inner) == outer


def test_no_config_gives_defaults(tmp_path: Path) -> None:
    assert load_settings(start=tmp_path, rules=DUMMY_RULES) == Settings()


def test_settings_read_every_known_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[tool.amp-lint]\n"
        "select = ['TST']\nignore = ['TST002']\nextend-select = ['configurable']\n"
        "exclude = ['gen']\nextend-exclude = ['old/**']\n"
        "[tool.amp-lint.per-file-ignores]\n'tests/**' = ['TST001']\n"
        "[tool.amp-lint.configurable]\nnames = ['x']\nlimit = 2\nratio = 1\n",
    )
    settings = load(path)
    assert settings.select == ("TST",)
    assert settings.ignore == ("TST002",)
    assert settings.extend_select == ("configurable",)
    assert settings.exclude == ("gen",)
    assert settings.extend_exclude == ("old/**",)
    assert settings.per_file_ignores == (("tests/**", ("TST001",)),)
    assert settings.rule_options == {"TST003": {"names": ["x"], "limit": 2, "ratio": 1}}
    assert settings.root == str(tmp_path)


def test_project_root_is_a_folder_relative_to_the_configuration(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    path = write(tmp_path / "tooling", "[tool.amp-lint]\nproject-root = '../repo'\n")
    assert load(path).project_root == str(tmp_path / "repo")
    assert load(write(tmp_path, "[tool.amp-lint]\n")).project_root is None


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("selct = ['ALL']", "unknown key 'selct' in [tool.amp-lint]"),
        ("project-roots = '.'", "unknown key 'project-roots' in [tool.amp-lint]"),
        ("project-root = 1", "project-root: expected a folder name, got 1"),
        (
            "project-root = 'pyproject.toml'",
            "project-root: {folder}/pyproject.toml is not a folder",
        ),
        ("project-root = 'missing'", "project-root: {folder}/missing is not a folder"),
        ("select = ['TST999']", "select: unknown rule selector 'TST999'"),
        ("ignore = ['AMP999']", "ignore: unknown rule selector 'AMP999'"),
        ("select = 'TST001'", "select: expected a list of strings, got 'TST001'"),
        ("exclude = [1]", "exclude: expected a list of strings, got [1]"),
        ("per-file-ignores = ['x']", "per-file-ignores: expected a table of glob = [codes]"),
        (
            "[tool.amp-lint.per-file-ignores]\n'a.py' = ['NOPE1']",
            "per-file-ignores 'a.py': unknown rule selector 'NOPE1'",
        ),
        (
            "[tool.amp-lint.configurable]\nlimit = '3'",
            "[tool.amp-lint.configurable]: limit must be an integer, got '3'",
        ),
        (
            "[tool.amp-lint.configurable]\nlimit = true",
            "[tool.amp-lint.configurable]: limit must be an integer, got True",
        ),
        (
            "[tool.amp-lint.configurable]\nstrict = 1",
            "[tool.amp-lint.configurable]: strict must be true or false, got 1",
        ),
        (
            "[tool.amp-lint.configurable]\nnames = 'x'",
            "[tool.amp-lint.configurable]: names must be a list of strings, got 'x'",
        ),
        (
            "[tool.amp-lint.configurable]\nnmes = []",
            "[tool.amp-lint.configurable]: unknown option 'nmes' (known: limit, names, ratio, "
            "strict)",
        ),
        ("[tool.amp-lint.no-such-rule]\nx = 1", "unknown key 'no-such-rule' in [tool.amp-lint]"),
    ],
)
def test_bad_config_is_an_error_naming_file_and_key(
    tmp_path: Path, table: str, message: str
) -> None:
    path = write(tmp_path, table if table.startswith("[") else f"[tool.amp-lint]\n{table}\n")
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value) == f"{path}: {message.format(folder=tmp_path)}"


def test_invalid_toml_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "[tool.amp-lint\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml: invalid TOML: "):
        load(path)


def test_explicit_config_without_our_table_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "[project]\nname = 'x'\n")
    with pytest.raises(ConfigError, match=r"no \[tool.amp-lint\] table"):
        load(path)


def test_missing_explicit_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope.toml: cannot read: No such file"):
        load(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("select", "ignore", "extend", "expected"),
    [
        (["ALL"], [], [], (PrintCall, Exploding, Configurable)),
        (["TST00"], ["TST002"], [], (PrintCall, Configurable)),
        (["TST001"], [], ["exploding"], (PrintCall, Exploding)),
        (["print-call"], [], [], (PrintCall,)),
        (["TST001"], ["TST"], [], ()),
    ],
)
def test_selection_by_code_prefix_name_and_all_with_ignore_winning(
    select: list[str], ignore: list[str], extend: list[str], expected: tuple[type, ...]
) -> None:
    assert enabled_rules(DUMMY_RULES, select, ignore, extend) == expected


def test_family_prefix_is_valid_before_any_rule_has_it() -> None:
    check_selectors(["AMP", "AMP0", "ALL"], (), "select")
    with pytest.raises(SelectorError, match="unknown rule selector 'AMP001'"):
        check_selectors(["AMP001"], (), "select")


def test_command_line_select_replaces_and_ignore_extends() -> None:
    settings = Settings(select=("TST001",), ignore=("TST002",))
    merged = settings.with_overrides(select=["TST003"], ignore=["TST001"], extend_select=["X"])
    assert (merged.select, merged.ignore, merged.extend_select) == (
        ("TST003",),
        ("TST002", "TST001"),
        ("X",),
    )


def test_readme_config_example_is_valid(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    settings = load_settings(write(tmp_path, example))
    assert settings.per_file_ignores == (("tests/**", ("AMP001",)),)
