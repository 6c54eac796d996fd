"""Settings from the nearest ``pyproject.toml`` with a ``[tool.amp-lint]`` table.

Like ruff, the search starts in the current directory and walks up; a ``pyproject.toml`` without
the table is passed over. Globs in ``exclude`` and ``per-file-ignores`` are relative to the folder
that holds the file that set them. Anything unknown or mistyped is an error naming the key and
the file: a silently ignored typo in a lint config is a check that never runs.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from linter._discovery import DEFAULT_INCLUDE
from linter._rule import Rule, RuleOption
from linter._selection import SelectorError, check_selectors

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

#: Folder names a folder walk never enters (``exclude`` replaces this list, as in ruff).
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".git",
    ".hg",
    ".svn",
    ".bzr",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    ".eggs",
    "*.egg-info",
    "build",
    "dist",
    "__pycache__",
    "node_modules",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".amp_lint_cache",
)

#: What a misspelling of "amp-lint" may add: separators and case.
_SPELLING_NOISE = re.compile(r"[-_. ]")
_LIST_KEYS = (
    "select",
    "ignore",
    "extend-select",
    "exclude",
    "extend-exclude",
    "include",
    "extend-include",
    "fixable",
    "unfixable",
)
_SELECTOR_KEYS = ("select", "ignore", "extend_select", "fixable", "unfixable")
_KNOWN_KEYS = frozenset((*_LIST_KEYS, "per-file-ignores", "cache-dir", "project-root"))


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a lint run takes from configuration; the defaults run every rule that is on by
    default."""

    #: Selectors of the rules to run: codes, prefixes, names, or ``ALL``; ``None`` (not set)
    #: runs the rules on by default (`Rule.default_enabled`), ``ALL`` every rule.
    select: tuple[str, ...] | None = None
    #: Selectors of the rules not to run; ignoring wins over selecting.
    ignore: tuple[str, ...] = ()
    #: Selectors added to ``select`` (so a command line ``--select`` can keep them).
    extend_select: tuple[str, ...] = ()
    #: Globs a folder walk skips; replaces `DEFAULT_EXCLUDE`.
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    #: Globs a folder walk skips, in addition to ``exclude``.
    extend_exclude: tuple[str, ...] = ()
    #: Globs of the files a folder walk collects; replaces `DEFAULT_INCLUDE`.
    include: tuple[str, ...] = DEFAULT_INCLUDE
    #: Globs collected in addition to ``include``.
    extend_include: tuple[str, ...] = ()
    #: Selectors of the rules whose fixes ``--fix`` may apply.
    fixable: tuple[str, ...] = ("ALL",)
    #: Selectors of the rules whose fixes are never applied; wins over ``fixable``.
    unfixable: tuple[str, ...] = ()
    #: Folder of the result cache, as configured (relative paths are relative to ``root``).
    cache_dir: str | None = None
    #: The project root every linted file belongs to (absolute), for the rare tree where the
    #: evidence amp-lint finds roots by cannot settle it; None finds each file's root.
    project_root: str | None = None
    #: (glob, selectors) pairs: rules not run on files the glob matches.
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: Rule code to the options set in ``[tool.amp-lint.<rule-name>]``.
    rule_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Folder the globs are relative to; ``None`` means the current directory.
    root: str | None = None
    #: The file these settings came from, if any.
    source: str | None = None
    #: Warnings for the user about the configuration search (e.g. a misspelt table name).
    notes: tuple[str, ...] = ()

    def with_overrides(
        self,
        *,
        select: Sequence[str] | None = None,
        ignore: Sequence[str] | None = None,
        extend_select: Sequence[str] | None = None,
    ) -> Settings:
        """These settings with command-line choices applied: ``select`` replaces, the rest add."""
        return replace(
            self,
            select=self.select if select is None else tuple(select),
            ignore=(*self.ignore, *(ignore or ())),
            extend_select=(*self.extend_select, *(extend_select or ())),
        )


def find_config(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` (default: cwd) with our table."""
    return _search(start).path


@dataclass(frozen=True, slots=True)
class _Found:
    """What the upward search found: the configured file (parsed once), and what to say."""

    #: The nearest ``pyproject.toml`` with a ``[tool.amp-lint]`` table, if any.
    path: Path | None
    #: Its parsed document.
    document: Mapping[str, Any]
    #: Warnings about files passed over (a misspelt table name).
    notes: tuple[str, ...]


def _search(start: str | os.PathLike[str] | None) -> _Found:
    folder = Path(start if start is not None else os.getcwd()).absolute()
    notes: list[str] = []
    for candidate_folder in (folder, *folder.parents):
        candidate = candidate_folder / "pyproject.toml"
        if not candidate.is_file():
            continue
        data = _read_bytes(candidate)
        try:
            document = _parse_toml(candidate, data)
        except ConfigError:
            # A broken pyproject.toml only matters if it is ours.
            if b"[tool.amp-lint" in data:
                raise
            continue
        tool = document.get("tool")
        if isinstance(tool, dict) and "amp-lint" in tool:
            return _Found(candidate, document, tuple(notes))
        misspelt = _misspelt_table(tool)
        if misspelt is not None:
            notes.append(f"{candidate}: {misspelt} is not read; the table is [tool.amp-lint]")
    return _Found(None, {}, tuple(notes))


def _misspelt_table(tool: Any) -> str | None:
    """``[tool.amp_lint]``, ``[tool.amplint]``, ``[tool.AMP-Lint]``...: a table meant for us."""
    if not isinstance(tool, dict):
        return None
    for key in tool:
        if key != "amp-lint" and _SPELLING_NOISE.sub("", key.lower()) == "amplint":
            return f"[tool.{key}]"
    return None


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None


def _parse_toml(path: Path, data: bytes) -> dict[str, Any]:
    try:
        # Annotated: under Python 3.10 it is tomli, which the type check may not have installed.
        parsed: dict[str, Any] = tomllib.loads(data.decode("utf-8"))
        return parsed
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None


def load_settings(
    config: str | os.PathLike[str] | None = None,
    *,
    start: str | os.PathLike[str] | None = None,
    rules: Sequence[type[Rule]] | None = None,
) -> Settings:
    """Settings from ``config``, or from the nearest configured ``pyproject.toml``, or defaults.

    ``rules`` (default: every registered rule) is what selectors and option tables are checked
    against. A misspelt table name on the way up is not an error (the file may configure other
    tools) but comes back in ``Settings.notes``.
    """
    if rules is None:
        from linter.rules import ALL_RULES

        rules = ALL_RULES
    if config is not None:
        path = Path(config)
        document: Mapping[str, Any] = _parse_toml(path, _read_bytes(path))
        notes: tuple[str, ...] = ()
    else:
        found = _search(start)
        if found.path is None:
            return Settings(notes=found.notes)
        path, document, notes = found.path, found.document, found.notes
    tool = document.get("tool", {})
    table = tool.get("amp-lint") if isinstance(tool, dict) else None
    if table is None:
        misspelt = _misspelt_table(tool)
        hint = f" ({misspelt} is misspelt)" if misspelt else ""
        raise ConfigError(f"{path}: no [tool.amp-lint] table{hint}")
    settings = settings_from_table(table, path=str(path), rules=rules)
    return replace(settings, notes=notes)


def settings_from_table(
    table: Mapping[str, Any], *, path: str, rules: Sequence[type[Rule]]
) -> Settings:
    """Validate a ``[tool.amp-lint]`` table (already parsed) and turn it into `Settings`."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: [tool.amp-lint] must be a table")
    by_name = {rule.name: rule for rule in rules}
    values: dict[str, Any] = {}
    rule_options: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        if key in _LIST_KEYS:
            values[key.replace("-", "_")] = _string_list(value, f"{path}: {key}")
        elif key == "cache-dir":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{path}: cache-dir: expected a folder name, got {value!r}")
            values["cache_dir"] = str(Path(path).absolute().parent / value)
        elif key == "project-root":
            values["project_root"] = _project_root(value, path)
        elif key == "per-file-ignores":
            values["per_file_ignores"] = _per_file_ignores(value, path)
        elif key in by_name:
            rule = by_name[key]
            rule_options[rule.code] = _rule_options(rule, value, path)
        else:
            raise ConfigError(f"{path}: unknown key {key!r} in [tool.amp-lint]")
    try:
        for key in _SELECTOR_KEYS:
            check_selectors(values.get(key, ()), rules, f"{path}: {key.replace('_', '-')}")
        for pattern, selectors in values.get("per_file_ignores", ()):
            check_selectors(selectors, rules, f"{path}: per-file-ignores {pattern!r}")
    except SelectorError as error:
        raise ConfigError(str(error)) from None
    return Settings(
        **values,
        rule_options=rule_options,
        root=str(Path(path).absolute().parent),
        source=path,
    )


def _string_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def _project_root(value: Any, path: str) -> str:
    """``project-root``: a folder, relative to the configuration's own."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{path}: project-root: expected a folder name, got {value!r}")
    folder = os.path.normpath(Path(path).absolute().parent / value)
    if not os.path.isdir(folder):
        raise ConfigError(f"{path}: project-root: {folder} is not a folder")
    return folder


def _per_file_ignores(value: Any, path: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: per-file-ignores: expected a table of glob = [codes]")
    return tuple(
        (pattern, _string_list(codes, f"{path}: per-file-ignores {pattern!r}"))
        for pattern, codes in value.items()
    )


def _rule_options(rule: type[Rule], value: Any, path: str) -> dict[str, Any]:
    where = f"{path}: [tool.amp-lint.{rule.name}]"
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a table of options")
    options = {option.name: option for option in rule.options}
    checked: dict[str, Any] = {}
    for key, setting in value.items():
        option = options.get(key)
        if option is None:
            known = ", ".join(sorted(options)) or "none"
            raise ConfigError(f"{where}: unknown option {key!r} (known: {known})")
        if not _has_option_type(option, setting):
            raise ConfigError(f"{where}: {key} must be {_describe_type(option)}, got {setting!r}")
        checked[key] = list(setting) if option.type in (list, tuple) else setting
    return checked


def _has_option_type(option: RuleOption, value: Any) -> bool:
    expected = option.type
    if expected in (list, tuple):
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    if expected is bool:
        return isinstance(value, bool)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


def _describe_type(option: RuleOption) -> str:
    if option.type in (list, tuple):
        return "a list of strings"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        option.type, f"of type {option.type.__name__}"
    )
