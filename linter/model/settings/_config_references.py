"""Which config files (or dict literals) a module's code loads, and what names hold them.

Recognised, by shape and qualified name, never by variable names:

- ``deepspeed.initialize(config=... | config_params=...)``: a dict literal (or a name bound once
  to one), a path (literal, constant, ``os.path.join(os.path.dirname(__file__), ...)``), the
  ``json.load`` of one, or, with only ``args=``, the default of a ``--deepspeed_config`` /
  ``--deepspeed`` flag (what DeepSpeed reads from ``args``);
- ``HfArgumentParser(...).parse_json_file(path)``: ``TrainingArguments`` JSON;
- ``@hydra.main(config_path=..., config_name=...)``: the primary YAML, its defaults list one level
  deep, every option of each config group it names (any of them can be picked at launch);
- ``OmegaConf.load(path)``, ``yaml.safe_load(open(path))``, ``json.load(open(path))``, also
  through ``with open(path) as f``;
- ``LightningCLI(parser_kwargs={"default_config_files": [...]})``;
- ``Accelerator()`` without ``mixed_precision=``: the accelerate config files shipped beside the
  module or at the project root, recognised by their keys (``compute_environment``,
  ``distributed_type``), since ``accelerate launch --config_file`` names them outside Python.

A path resolves relative to the referencing file's folder, then to the project root (the folder
holding ``pyproject.toml``, ``setup.cfg`` or ``.git`` above it); a path that does not resolve, or
that leaves the project, is unknown. `config_dependencies` lists every file and folder consulted,
for the cache key of the module's result.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libcst as cst

from linter.model.project import ModuleContext
from linter.model.settings._command_line import DeclaredSettings
from linter.model.settings._config_files import (
    ACCELERATE,
    CONFIG_SUFFIXES,
    LIGHTNING_CLI,
    ConfigFile,
    ConfigValue,
    project_root,
    read_config,
    shape_of,
)
from linter.model.settings._module_constants import ModuleConstants
from linter.model.syntax import (
    ModuleIndex,
    dotted_name,
    import_aliases,
    keyword,
    last_part,
    module_index,
    positional,
    string_value,
)

#: Who reads a config (`ConfigReference.reader`).
DEEPSPEED_READER = "deepspeed"
TRAINING_ARGUMENTS_READER = "training-arguments"
HYDRA_READER = "hydra"
FILE_READER = "file"
LIGHTNING_CLI_READER = "lightning-cli"
ACCELERATE_READER = "accelerate"

#: Calls that load a whole file into a mapping (``OmegaConf.load(path)``, ``json.load(f)``).
_LOADERS = frozenset(
    {
        "omegaconf.OmegaConf.load",
        "yaml.safe_load",
        "yaml.load",
        "yaml.full_load",
        "json.load",
        "toml.load",
        "tomllib.load",
    }
)
#: Flags whose value DeepSpeed reads as its config when only ``args`` is passed.
_DEEPSPEED_FLAGS = ("deepspeed_config", "deepspeed")
_DEEPSPEED_INITIALIZE = frozenset({"deepspeed.initialize"})
_HYDRA_MAIN = frozenset({"hydra.main"})
_LIGHTNING_CLIS = frozenset(
    {
        "lightning.pytorch.cli.LightningCLI",
        "pytorch_lightning.cli.LightningCLI",
        "lightning.pytorch.LightningCLI",
        "lightning.LightningCLI",
    }
)
_ACCELERATORS = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
#: Folders (beside the module, at the project root) searched for shipped accelerate / Lightning
#: CLI configs, which Python code does not name.
_CONFIG_FOLDERS = ("", "configs", "config", "conf")
#: At most this many YAML files are opened per searched folder.
_MAX_DISCOVERED = 40


@dataclass(frozen=True, slots=True)
class ConfigReference:
    """One place where the module's code loads a config."""

    #: The Python node that names it (the call, the ``@hydra.main(...)`` decorator).
    node: cst.CSTNode
    #: Who reads it: one of the ``*_READER`` constants.
    reader: str
    #: The path as the code spells it; None for a dict literal or discovered files.
    spelled: str | None
    #: The configs the code may load here, each read or carrying a note (for Hydra: the primary
    #: config, then the configs its defaults list merges at the root); empty when unresolved.
    configs: tuple[ConfigFile, ...] = ()
    #: Hydra config groups named in the defaults list, with every option shipped for each.
    groups: tuple[tuple[str, tuple[ConfigFile, ...]], ...] = ()
    #: Python names bound to the loaded config (``cfg``), read where `scope` is.
    names: tuple[str, ...] = ()
    #: The function those names are local to (the Hydra main's parameter); None: the module.
    scope: cst.FunctionDef | None = None
    #: Files and folders looked at to resolve it, absolute (`config_dependencies`).
    consulted: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        """Every config it may load was found and parsed."""
        return bool(self.configs) and all(config.data is not None for config in self.configs)

    @property
    def notes(self) -> tuple[str, ...]:
        """One line per config that could not be read."""
        every = [*self.configs, *(c for _group, options in self.groups for c in options)]
        return tuple(config.note for config in every if config.note is not None)

    def values(self, key: str) -> tuple[tuple[ConfigFile, ConfigValue], ...] | None:
        """Every value ``key`` may take in the configs this code can load, with the file it is
        in; None when one of them does not say (the key is unknown, not absent)."""
        if not self.known:
            return None
        primary = self.configs[0].value(key)
        if primary is not None:
            return ((self.configs[0], primary),)
        head, _, rest = key.partition(".")
        for group, options in self.groups:
            if head != group or not rest or not options:
                continue
            found = []
            for option in options:
                inner = key if "@package _global_" in option.text else rest
                setting = option.value(inner) if option.data is not None else None
                if setting is None:
                    return None
                found.append((option, ConfigValue(key, setting.value, setting.line)))
            return tuple(found)
        for config in reversed(self.configs[1:]):
            setting = config.value(key)
            if setting is not None:
                return ((config, setting),)
        return None


def config_references(context: ModuleContext) -> tuple[ConfigReference, ...]:
    """The configs ``context``'s code loads, in source order; built once per module."""
    index = module_index(context)
    return index.shared(ConfigReference, lambda: tuple(_References(context, index).found))


def config_dependencies(context: ModuleContext) -> tuple[str, ...]:
    """Absolute paths of the files and folders a module's lint result depends on besides its
    own text: every config it references, every candidate location tried for one (a config
    created there later changes the result) and every folder listed to find config-group
    options or shipped accelerate / Lightning CLI configs. Sorted, without duplicates."""
    return tuple(sorted({path for ref in config_references(context) for path in ref.consulted}))


def config_notes(context: ModuleContext) -> tuple[str, ...]:
    """One line per referenced config that could not be read or parsed."""
    return tuple(dict.fromkeys(note for ref in config_references(context) for note in ref.notes))


@dataclass(frozen=True, slots=True)
class ConfigRead:
    """An expression that reads a setting of a loaded config (``cfg.trainer.precision``)."""

    #: The reference whose config it reads.
    reference: ConfigReference
    #: The dotted key path read.
    key: str
    #: Each value it may hold, with its file.
    values: tuple[tuple[ConfigFile, ConfigValue], ...]


def config_read(
    references: tuple[ConfigReference, ...], index: ModuleIndex, node: cst.BaseExpression
) -> ConfigRead | None:
    """What ``node`` reads when it is ``cfg.a.b`` / ``cfg["a"]["b"]`` of a loaded config whose
    every loadable file states the key; None otherwise (unknown stays unknown)."""
    parts: list[str] = []
    current: cst.BaseExpression = node
    while True:
        if isinstance(current, cst.Attribute):
            parts.append(current.attr.value)
            current = current.value
        elif isinstance(current, cst.Subscript) and len(current.slice) == 1:
            element = current.slice[0].slice
            key = string_value(element.value) if isinstance(element, cst.Index) else None
            if key is None:
                return None
            parts.append(key)
            current = current.value
        else:
            break
    if not isinstance(current, cst.Name) or not parts:
        return None
    key = ".".join(reversed(parts))
    for reference in references:
        if current.value not in reference.names:
            continue
        if reference.scope is not None and reference.scope not in set(index.ancestors(node)):
            continue
        values = reference.values(key)
        return ConfigRead(reference, key, values) if values else None
    return None


# -- finding references --------------------------------------------------------------------


class _References:
    def __init__(self, context: ModuleContext, index: ModuleIndex) -> None:
        self._context = context
        self._index = index
        self._aliases = import_aliases(index)
        self._settings = DeclaredSettings(index)
        self._constants = ModuleConstants(index, self._settings)
        here = Path(context.path)
        self._folder = here.resolve().parent if here.is_file() else None
        self._root = project_root(here) if self._folder is not None else None
        self.found: list[ConfigReference] = []
        for call in index.nodes(cst.Call):
            self._call(call)
        for function in index.nodes(cst.FunctionDef):
            for decorator in function.decorators:
                self._hydra(function, decorator.decorator)

    def _qualified(self, call: cst.Call) -> str:
        name = dotted_name(call.func)
        return self._aliases.qualify(name) if name is not None else ""

    def _call(self, call: cst.Call) -> None:
        qualified = self._qualified(call)
        if qualified in _DEEPSPEED_INITIALIZE:
            self._deepspeed(call)
        elif isinstance(call.func, cst.Attribute) and call.func.attr.value == "parse_json_file":
            argument = keyword(call, "json_file") or positional(call, 0)
            if argument is not None:
                self._file(call, TRAINING_ARGUMENTS_READER, argument.value)
        elif qualified in _LOADERS:
            argument = keyword(call, "stream") or positional(call, 0)
            if argument is not None:
                self._file(call, FILE_READER, self._opened(argument.value) or argument.value)
        elif qualified in _LIGHTNING_CLIS:
            self._lightning_cli(call)
        elif (
            qualified in _ACCELERATORS
            and keyword(call, "mixed_precision") is None
            and not any(arg.star for arg in call.args)
        ):
            self._discovered(call, ACCELERATE_READER, ACCELERATE)

    # -- readers ------------------------------------------------------------------------------

    def _deepspeed(self, call: cst.Call) -> None:
        argument = keyword(call, "config") or keyword(call, "config_params")
        value: cst.BaseExpression | None = argument.value if argument is not None else None
        if value is None and keyword(call, "args") is not None:
            for flag in _DEEPSPEED_FLAGS:
                setting = self._settings.settings.get(flag)
                if setting is not None and setting.default is not None:
                    value = setting.default
                    break
        if value is None:
            self.found.append(ConfigReference(call, DEEPSPEED_READER, None))
            return
        literal = self._dict_literal(value)
        if literal is not None:
            data, node = literal
            line = self._context.position(node).start.line
            config = ConfigFile(self._context.path, data, default_line=line)
            self.found.append(ConfigReference(call, DEEPSPEED_READER, None, (config,)))
            return
        loaded = self._bound(value)
        if isinstance(loaded, cst.Call) and self._qualified(loaded) in _LOADERS:
            inner = keyword(loaded, "stream") or positional(loaded, 0)
            if inner is not None:
                value = self._opened(inner.value) or inner.value
        self._file(call, DEEPSPEED_READER, value, bind=False)

    def _file(
        self, call: cst.Call, reader: str, path: cst.BaseExpression, *, bind: bool = True
    ) -> None:
        spelled = self._path_text(path)
        names = self._assigned_names(call) if bind else ()
        if spelled is None:
            self.found.append(ConfigReference(call, reader, None, names=names))
            return
        config, consulted = self._resolve(spelled)
        configs = (config,) if config is not None else ()
        self.found.append(
            ConfigReference(call, reader, spelled, configs, names=names, consulted=consulted)
        )

    def _hydra(self, function: cst.FunctionDef, decorator: cst.BaseExpression) -> None:
        if not isinstance(decorator, cst.Call) or self._qualified(decorator) not in _HYDRA_MAIN:
            return
        path_arg = keyword(decorator, "config_path") or positional(decorator, 0)
        name_arg = keyword(decorator, "config_name") or positional(decorator, 1)
        folder = self._path_text(path_arg.value) if path_arg is not None else ""
        name = string_value(self._constants.resolve(name_arg.value)) if name_arg else None
        params = function.params.params
        names = (params[0].name.value,) if params else ()
        if folder is None or name is None or self._folder is None:
            self.found.append(
                ConfigReference(decorator, HYDRA_READER, None, names=names, scope=function)
            )
            return
        base = (self._folder / folder).resolve()
        consulted = [str(base)]
        primary = self._inside(base / _with_suffix(name))
        if primary is None:
            self.found.append(
                ConfigReference(
                    decorator,
                    HYDRA_READER,
                    name,
                    names=names,
                    scope=function,
                    consulted=(*consulted, str(base / _with_suffix(name))),
                )
            )
            return
        configs = [read_config(primary)]
        consulted.append(str(primary))
        groups = []
        for entry in _defaults(configs[0].data):
            if isinstance(entry, str) and entry != "_self_":
                merged = self._inside(base / _with_suffix(entry))
                if merged is not None:
                    configs.append(read_config(merged))
                    consulted.append(str(merged))
            elif isinstance(entry, dict) and len(entry) == 1:
                group = next(iter(entry))
                if not isinstance(group, str) or group.startswith(("override ", "hydra")):
                    continue
                options = self._folder_configs(base / group.lstrip("/"))
                consulted.append(str(base / group.lstrip("/")))
                consulted.extend(option.path for option in options)
                groups.append((group.lstrip("/"), options))
        self.found.append(
            ConfigReference(
                decorator,
                HYDRA_READER,
                name,
                tuple(configs),
                tuple(groups),
                names,
                function,
                tuple(consulted),
            )
        )

    def _lightning_cli(self, call: cst.Call) -> None:
        kwargs = keyword(call, "parser_kwargs")
        data = self._literal(kwargs.value) if kwargs is not None else None
        files = data.get("default_config_files") if isinstance(data, dict) else None
        if not (isinstance(files, list) and files and all(isinstance(f, str) for f in files)):
            self._discovered(call, LIGHTNING_CLI_READER, LIGHTNING_CLI)
            return
        configs: list[ConfigFile] = []
        consulted: list[str] = []
        for spelled in files:
            config, tried = self._resolve(spelled)
            consulted.extend(tried)
            if config is None:
                self.found.append(
                    ConfigReference(call, LIGHTNING_CLI_READER, spelled, consulted=tuple(tried))
                )
                return
            configs.append(config)
        self.found.append(
            ConfigReference(
                call, LIGHTNING_CLI_READER, None, tuple(configs), consulted=tuple(consulted)
            )
        )

    def _discovered(self, call: cst.Call, reader: str, shape: str) -> None:
        """Configs of ``shape`` shipped beside the module or at the project root."""
        if self._folder is None:
            return
        folders = dict.fromkeys(
            (base / sub).resolve()
            for base in (self._folder, self._root or self._folder)
            for sub in _CONFIG_FOLDERS
        )
        configs = [
            config
            for folder in folders
            for config in self._folder_configs(folder)
            if config.data is not None and shape_of(config) == shape
        ]
        if configs:
            consulted = (*map(str, folders), *(c.path for c in configs))
            self.found.append(
                ConfigReference(call, reader, None, tuple(configs), consulted=consulted)
            )

    # -- values ---------------------------------------------------------------------------------

    def _bound(self, node: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(node, cst.Name | cst.Attribute):
            bound = self._constants.bound_value(node)
            if bound is not None:
                return bound
        return node

    def _dict_literal(self, node: cst.BaseExpression) -> tuple[dict[str, Any], cst.CSTNode] | None:
        """A dict literal (or a name bound once to one and never changed item by item)."""
        target = self._bound(node)
        if target is not node and self._mutated(node):
            return None
        data = self._literal(target)
        return (data, target) if isinstance(data, dict) else None

    def _mutated(self, node: cst.BaseExpression) -> bool:
        name = dotted_name(node)
        for assign in self._index.nodes(cst.Assign):
            for target in assign.targets:
                inner: cst.BaseExpression = target.target
                while isinstance(inner, cst.Subscript):
                    inner = inner.value
                if inner is not target.target and dotted_name(inner) == name:
                    return True
        return any(
            isinstance(call.func, cst.Attribute) and dotted_name(call.func.value) == name
            for call in self._index.calls_named(".update") + self._index.calls_named(".setdefault")
        )

    def _literal(self, node: cst.BaseExpression, depth: int = 0) -> Any:
        """The Python value of a literal expression; `_UNKNOWN` for anything computed."""
        if depth > 8:
            return _UNKNOWN
        if isinstance(node, cst.SimpleString | cst.ConcatenatedString):
            value = node.evaluated_value
            return value if isinstance(value, str) else _UNKNOWN
        if isinstance(node, cst.Integer | cst.Float):
            return node.evaluated_value
        if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.value]
        if isinstance(node, cst.List | cst.Tuple):
            return [self._literal(e.value, depth + 1) for e in node.elements]
        if isinstance(node, cst.Dict):
            data: dict[Any, Any] = {}
            for element in node.elements:
                if not isinstance(element, cst.DictElement):
                    return _UNKNOWN  # `**base`: keys this file does not show
                key = self._literal(element.key, depth + 1)
                if not isinstance(key, str):
                    return _UNKNOWN
                data[key] = self._literal(element.value, depth + 1)
            return data
        if (
            isinstance(node, cst.Call)
            and dotted_name(node.func) == "dict"
            and not any(arg.keyword is None for arg in node.args)
        ):
            return {
                arg.keyword.value: self._literal(arg.value, depth + 1)
                for arg in node.args
                if arg.keyword is not None
            }
        if isinstance(node, cst.Name | cst.Attribute):
            bound = self._constants.bound_value(node)
            if bound is not None and bound is not node:
                return self._literal(bound, depth + 1)
        return _UNKNOWN

    def _opened(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """The path of ``open(path)`` directly or through ``with open(path) as f``."""
        if isinstance(node, cst.Call) and dotted_name(node.func) in ("open", "io.open"):
            argument = keyword(node, "file") or positional(node, 0)
            return argument.value if argument is not None else None
        if isinstance(node, cst.Name):
            for alias in self._index.nodes(cst.AsName):
                item = self._index.parent.get(alias)
                if (
                    isinstance(item, cst.WithItem)
                    and isinstance(alias.name, cst.Name)
                    and alias.name.value == node.value
                ):
                    return self._opened(item.item)
        return None

    def _path_text(self, node: cst.BaseExpression) -> str | None:
        """The relative path an expression spells: a literal, a constant or flag default, or a
        join onto the module's own folder (``os.path.dirname(__file__)``,
        ``Path(__file__).parent``)."""
        value = string_value(self._constants.resolve(node))
        if value is not None:
            return value
        node = self._bound(node)
        if isinstance(node, cst.Call) and last_part(dotted_name(node.func) or "") == "join":
            parts = [arg.value for arg in node.args]
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
            parts = [node.left, node.right]
        else:
            return None
        if not parts or "__file__" not in self._context.module.code_for_node(parts[0]):
            return None
        rest = [string_value(self._constants.resolve(part)) for part in parts[1:]]
        if not rest or any(part is None for part in rest):
            return None
        return "/".join(part for part in rest if part is not None)

    def _assigned_names(self, call: cst.Call) -> tuple[str, ...]:
        """The names an assignment of ``call`` binds (``a, b = parse_json_file(...)``)."""
        parent = self._index.parent.get(call)
        if not isinstance(parent, cst.Assign):
            return ()
        names = []
        for target in parent.targets:
            inner = target.target
            elements = inner.elements if isinstance(inner, cst.Tuple | cst.List) else [inner]
            for element in elements:
                value = element.value if isinstance(element, cst.Element) else element
                if isinstance(value, cst.Name):
                    names.append(value.value)
        return tuple(names)

    # -- files ----------------------------------------------------------------------------------

    def _resolve(self, spelled: str) -> tuple[ConfigFile | None, tuple[str, ...]]:
        """The config a relative path names: beside the module, else at the project root."""
        if self._folder is None or Path(spelled).is_absolute() or not spelled.strip():
            return None, ()
        tried: list[str] = []
        for base in dict.fromkeys((self._folder, self._root or self._folder)):
            try:
                candidate = (base / spelled).resolve()
            except (OSError, ValueError):  # an embedded NUL, a symlink loop
                return None, tuple(tried)
            tried.append(str(candidate))
            if self._inside(candidate) is not None:
                return read_config(candidate), tuple(tried)
        return None, tuple(tried)

    def _inside(self, candidate: Path) -> Path | None:
        """``candidate`` when it is a file in the project (or the module's folder)."""
        limit = self._root or self._folder
        try:
            candidate = candidate.resolve()
            if limit is None or not candidate.is_file() or not candidate.is_relative_to(limit):
                return None
        except (OSError, ValueError):
            return None
        return candidate

    def _folder_configs(self, folder: Path) -> tuple[ConfigFile, ...]:
        limit = self._root or self._folder
        if limit is None or not folder.is_dir() or not folder.resolve().is_relative_to(limit):
            return ()
        try:
            files = sorted(
                p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()
            )
        except OSError:
            return ()
        return tuple(read_config(path) for path in files[:_MAX_DISCOVERED])


_UNKNOWN: Any = type("Unknown", (), {"__repr__": lambda self: "UNKNOWN"})()


def _with_suffix(name: str) -> str:
    return name if Path(name).suffix in CONFIG_SUFFIXES else f"{name}.yaml"


def _defaults(data: dict[str, Any] | None) -> list[object]:
    entries = (data or {}).get("defaults")
    return list(entries) if isinstance(entries, list) else []
