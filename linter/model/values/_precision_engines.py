"""Training engines that manage mixed precision themselves, and what each one picks.

A DeepSpeed engine whose config turns on ``fp16`` or ``bf16`` casts the model and (for fp16)
scales the loss in its own optimizer; ``Accelerator(mixed_precision="fp16")`` builds its own
GradScaler and autocast; a Lightning ``Trainer``/``Fabric`` with ``precision="16-mixed"`` (or a
``MixedPrecision("16-mixed", ...)`` plugin) does the same. The setting may be an argument, a flag
default, a DeepSpeed dict literal or a config file (`linter.model.settings._config_references`); an
engine
whose setting the module does not show is not listed (unknown stays unknown).
"""

from __future__ import annotations

import os.path
import re
from dataclasses import dataclass

import libcst as cst

from linter.model.project import ENGINE, ModuleContext, ValueRecord, context_of
from linter.model.settings import (
    ACCELERATE,
    ACCELERATE_READER,
    DEEPSPEED,
    DEEPSPEED_READER,
    LIGHTNING_CLI,
    LIGHTNING_CLI_READER,
    ConfigFile,
    ConfigValue,
    ModuleConstants,
    config_references,
    precision_facts,
    precision_of,
)
from linter.model.syntax import (
    BF16,
    FP16,
    ModuleIndex,
    PathFacts,
    dotted_name,
    import_aliases,
    keyword,
    module_index,
    positional,
    words,
)
from linter.model.values._imported_values import imported_values

DEEPSPEED_ENGINE = "DeepSpeed"
ACCELERATE_ENGINE = "Accelerate"
LIGHTNING_ENGINE = "Lightning"

#: Constructors whose ``precision=`` argument Lightning's precision plugins follow.
LIGHTNING_TRAINERS = frozenset(
    {
        "lightning.Trainer",
        "lightning.pytorch.Trainer",
        "lightning.pytorch.trainer.Trainer",
        "pytorch_lightning.Trainer",
        "lightning.Fabric",
        "lightning.fabric.Fabric",
        "lightning_fabric.Fabric",
    }
)
#: Lightning's AMP plugins (precision first, as their first parameter); each keeps a GradScaler
#: for ``"16-mixed"`` unless given one.
LIGHTNING_AMP_PLUGINS = frozenset(
    {
        "lightning.pytorch.plugins.MixedPrecision",
        "lightning.pytorch.plugins.precision.MixedPrecision",
        "lightning.fabric.plugins.MixedPrecision",
        "lightning.fabric.plugins.precision.MixedPrecision",
        "pytorch_lightning.plugins.MixedPrecisionPlugin",
        "pytorch_lightning.plugins.precision.MixedPrecisionPlugin",
        "pytorch_lightning.plugins.MixedPrecision",
    }
)
ACCELERATORS = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
_DEEPSPEED_INITIALIZE = "deepspeed.initialize"


@dataclass(frozen=True, slots=True)
class PrecisionEngine:
    """An engine that runs mixed precision itself."""

    #: The call that builds it (``deepspeed.initialize``, ``Accelerator``, ``Trainer``...).
    node: cst.Call
    #: `DEEPSPEED_ENGINE`, `ACCELERATE_ENGINE` or `LIGHTNING_ENGINE`.
    framework: str
    #: ``fp16`` or ``bf16``.
    precision: str
    #: Whether it keeps its own loss scaler (fp16 in every framework here).
    scales: bool
    #: Where the setting comes from, for a message: ``mixed_precision="fp16"``, ``"bf16.enabled":
    #: true in ds_config.json, line 9``.
    source: str
    #: DeepSpeed: its config turns on its ``torch_autocast`` mode (an outer autocast is allowed).
    torch_autocast: bool = False
    #: Names bound to the engine (``model_engine`` of ``model_engine, opt, _, _ = ...``).
    names: tuple[str, ...] = ()
    #: The config file the setting is in, when it is in one.
    config_path: str | None = None


def precision_engines(context: ModuleContext) -> tuple[PrecisionEngine, ...]:
    """The module's precision-managing engines, in source order; built once per module."""
    index = module_index(context)
    return index.shared(PrecisionEngine, lambda: tuple(_find(context, index)))


def _find(context: ModuleContext, index: ModuleIndex) -> list[PrecisionEngine]:
    aliases = import_aliases(index)
    constants = ModuleConstants(index)
    found: list[PrecisionEngine] = []
    for reference in config_references(context):
        if not reference.known or not isinstance(reference.node, cst.Call):
            continue
        call = reference.node
        if reference.reader == DEEPSPEED_READER:
            facts = precision_facts(reference.configs[0], DEEPSPEED)
            if facts.engine_precision and facts.precision in (FP16, BF16):
                setting = next(s for s in facts.evidence if s.value is True)
                found.append(
                    PrecisionEngine(
                        call,
                        DEEPSPEED_ENGINE,
                        facts.precision,
                        facts.precision == FP16,
                        describe_setting(context, reference.configs[0], setting),
                        facts.torch_autocast,
                        _engine_names(index, call),
                        _path(context, reference.configs[0]),
                    )
                )
        elif reference.reader in (ACCELERATE_READER, LIGHTNING_CLI_READER):
            shape = ACCELERATE if reference.reader == ACCELERATE_READER else LIGHTNING_CLI
            every = [precision_facts(config, shape) for config in reference.configs]
            picked = {facts.precision for facts in every}
            if picked != {FP16} and picked != {BF16}:
                continue
            precision: str = picked.pop() or ""
            framework = ACCELERATE_ENGINE if shape == ACCELERATE else LIGHTNING_ENGINE
            config, setting = reference.configs[0], every[0].evidence[0]
            source = describe_setting(context, config, setting)
            if len(reference.configs) > 1:
                source += f" (and in each of the other {len(reference.configs) - 1} configs)"
            found.append(
                PrecisionEngine(
                    call, framework, precision, precision == FP16, source, config_path=config.path
                )
            )
    for call in index.nodes(cst.Call):
        name = dotted_name(call.func)
        qualified = aliases.qualify(name) if name is not None else ""
        if qualified in ACCELERATORS:
            argument = keyword(call, "mixed_precision") or positional(call, 2)
            keyword_name = "mixed_precision"
        elif qualified in LIGHTNING_TRAINERS:
            argument = keyword(call, "precision")
            keyword_name = "precision"
        elif qualified in LIGHTNING_AMP_PLUGINS:
            argument = keyword(call, "precision") or positional(call, 0)
            keyword_name = "precision"
        else:
            continue
        if argument is None:
            continue
        value = constants.resolve(argument.value)
        literal = _literal(value)
        picks = precision_of(literal)
        if picks not in (FP16, BF16) or picks is None:
            continue
        framework = ACCELERATE_ENGINE if qualified in ACCELERATORS else LIGHTNING_ENGINE
        source = f"`{keyword_name}={literal!r}`".replace("'", '"')
        declared = constants.describe(argument.value)
        if declared is not None:
            source += f" (the default of {declared})"
        found.append(PrecisionEngine(call, framework, picks, picks == FP16, source))
    found += _built_elsewhere(index)
    return sorted(found, key=lambda engine: index.order.get(engine.node, 0))


def _built_elsewhere(index: ModuleIndex) -> list[PrecisionEngine]:
    """Engines a function of another module builds and returns (``engine = build_engine(
    model, args)``), placed at the call (`linter.model.values._exported_values`)."""
    context = context_of(index)
    if context is None or context.project is None:
        return []

    values = imported_values(index)
    engines = frozenset({ENGINE})
    found = []
    for call in index.nodes(cst.Call):
        built = values.of_call(call, kinds=engines)
        if built is None:
            continue
        found.append(_placed(*built, call, _engine_names(index, call)))
    for cls in index.nodes(cst.ClassDef):
        inherited = values.inherited(cls, engines)
        calls = index.calls_named(".__init__")
        init = next((c for c in calls if _runs_base_init(index, c, cls)), None)
        if init is None:
            continue
        for record, path in inherited:
            name = "self." + record.holder.partition(".self.")[2]
            found.append(_placed(record, path, init, (name,)))
    return found


def _runs_base_init(index: ModuleIndex, call: cst.Call, cls: cst.ClassDef) -> bool:
    """``super().__init__(...)`` in the ``__init__`` of ``cls``: where its base builds what it
    keeps in ``self``."""
    function = index.enclosing_function(call)
    receiver = call.func.value  # type: ignore[attr-defined]  # calls_named(".m") holds attribute calls only
    return (
        function is not None
        and function.name.value == "__init__"
        and index.enclosing_class(call) is cls
        and isinstance(receiver, cst.Call)
        and dotted_name(receiver.func) == "super"
    )


def _placed(
    record: ValueRecord, path: str, call: cst.Call, names: tuple[str, ...]
) -> PrecisionEngine:
    """An engine of another module, placed at the local call that builds it."""
    return PrecisionEngine(
        call,
        record.dtype,
        record.precision,
        record.scales,
        f"{record.source} in {path}",
        record.torch_autocast,
        names,
    )


def _literal(node: cst.BaseExpression) -> object:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if isinstance(node, cst.Integer):
        return int(node.value)
    return None


def _engine_names(index: ModuleIndex, call: cst.Call) -> tuple[str, ...]:
    """``engine`` of ``engine, optimizer, _, _ = deepspeed.initialize(...)`` or of
    ``engine = deepspeed.initialize(...)[0]``."""
    parent = index.parent.get(call)
    first_of_tuple = True
    if isinstance(parent, cst.Subscript) and parent.value is call:
        parent, first_of_tuple = index.parent.get(parent), False
    if not isinstance(parent, cst.Assign):
        return ()
    names = []
    for target in parent.targets:
        inner: cst.BaseExpression = target.target
        if isinstance(inner, cst.Tuple | cst.List) and first_of_tuple and inner.elements:
            inner = inner.elements[0].value
        name = dotted_name(inner)
        if name is not None:
            names.append(name)
    return tuple(names)


def _path(context: ModuleContext, config: ConfigFile) -> str | None:
    return None if config.path == context.path and not config.text else config.path


def describe_setting(context: ModuleContext, config: ConfigFile, setting: ConfigValue) -> str:
    """A config's setting as a message names it: the quoted key and value, then the file and
    line (``in ds_config.json, line 4``), or the config dict's line in the module."""
    value = "true" if setting.value is True else repr(setting.value).replace("'", '"')
    if config.path == context.path and not config.text:
        return f"`{setting.key}: {value}` in the config dict on line {setting.line}"
    where = f", line {setting.line}" if setting.line else ""
    return f"`{setting.key}: {value}` in {_short(context, config.path)}{where}"


def _short(context: ModuleContext, path: str) -> str:
    """A config path relative to the module's folder when it is below it, else as is."""
    folder = os.path.dirname(os.path.abspath(context.path))
    relative = os.path.relpath(path, folder)
    return path if relative.startswith("..") else relative


#: Words of a test or switch that ties torch AMP to a precision or an engine choice
#: (``enabled=args.fp16``, ``if not args.deepspeed:``, ``if precision == "16-mixed":``).
SWITCH_WORDS = re.compile(
    r"fp16|float16|half|bf16|bfloat16|precision|dtype|mixed|deepspeed|accelerat|lightning|"
    r"scal|(^|_)(amp|ds|zero)(_|$)",
    re.IGNORECASE,
)


def switched(index: ModuleIndex, paths: PathFacts, node: cst.CSTNode) -> bool:
    """``node`` (a GradScaler or autocast call) runs only on some precision or engine choice:
    a non-literal ``enabled=`` argument, or a branch around it (``if``, ``x if c else y``,
    ``c and x``) whose test names a precision or an engine. Then it may belong to the path
    without the engine, and is left alone."""
    if isinstance(node, cst.Call):
        enabled = keyword(node, "enabled")
        if any(arg.star for arg in node.args) or (
            enabled is not None
            and not (isinstance(enabled.value, cst.Name) and enabled.value.value == "True")
        ):
            return True
    for statement, _arm in paths.arms(node):
        if any(SWITCH_WORDS.search(word) for word in words(statement.test)):
            return True
    child = node
    for ancestor in index.ancestors(node):
        test = None
        if isinstance(ancestor, cst.IfExp) and child is not ancestor.test:
            test = ancestor.test
        elif isinstance(ancestor, cst.BooleanOperation):
            test = ancestor.left if child is ancestor.right else ancestor.right
        elif isinstance(ancestor, cst.BaseStatement | cst.BaseSmallStatement):
            return False
        if test is not None and any(SWITCH_WORDS.search(word) for word in words(test)):
            return True
        child = ancestor
    return False


def beside(index: ModuleIndex, node: cst.CSTNode, engine: PrecisionEngine) -> bool:
    """``node`` belongs to the run the engine trains: both in one function (or both at module
    level), in methods of one class, in a function that calls the one building the engine, or —
    for Lightning — in a LightningModule the module trains. Two unrelated functions of one file
    (a benchmark comparing native AMP with Accelerate) are not."""
    here, there = index.enclosing_function(node), index.enclosing_function(engine.node)
    if here is there:
        return True
    owner = index.enclosing_class(node)
    if owner is not None and owner is index.enclosing_class(engine.node):
        return True
    if here is not None and there is not None:
        callers = index.calls_named(there.name.value) + index.calls_named("." + there.name.value)
        if any(here in set(index.ancestors(call)) for call in callers):
            return True
    return (
        engine.framework == LIGHTNING_ENGINE
        and owner is not None
        and any((dotted_name(base.value) or "").endswith("LightningModule") for base in owner.bases)
    )
