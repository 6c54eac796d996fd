"""The search every kind of fp16 site shares: which model a switch applies to, and on which runs.

`Fp16SiteSearch` holds one module's bf16 (or, for AMP008, fp16) origins, its fp16 switches and its
path facts; the GradScaler sites (`linter.model.values._fp16_scaler_sites`) and the autocasts,
casts and framework switches (`linter.model.values._fp16_sites`) are found on top of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from linter.model.project import ModuleContext
from linter.model.settings import (
    DeclaredSettings,
    DtypeChoice,
    Fp16Switches,
    ModuleConstants,
    SwitchOn,
    argument_options,
    dtype_choices,
)
from linter.model.syntax import (
    BF16,
    FP16,
    Fact,
    ModuleIndex,
    descendants,
    dotted_name,
    import_aliases,
    keyword,
    last_part,
    module_index,
    path_facts,
    positional,
    string_value,
)
from linter.model.values._bf16_families import Bf16Family
from linter.model.values._bf16_origins import Bf16Origins
from linter.model.values._bound_contexts import BoundContext, bound_contexts
from linter.model.values._model_origins import Bf16Origin

#: autocast context managers, by qualified name.
AUTOCAST = frozenset(
    {
        "torch.autocast",
        "torch.amp.autocast",
        "torch.amp.autocast_mode.autocast",
        "torch.cuda.amp.autocast",
        "torch.cuda.amp.autocast_mode.autocast",
    }
)
#: autocasts whose default dtype is float16 whatever the device argument says.
CUDA_AUTOCAST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
#: Text a file with a finding must contain: an fp16 switch (in the file, or in the config a
#: ``parse_json_file`` or DeepSpeed reads), and a sign of training.
_FP16_TEXT = re.compile(
    r"float16|half|autocast|GradScaler|fp16|precision\s*=\s*[\"']?16|[\"']16-(?:mixed|true)"
    r"|Accelerator\s*\(|parse_json_file|deepspeed\.initialize",
    re.IGNORECASE,
)
_TRAINING_TEXT = re.compile(r"\.(?:backward|fit|train)\s*\(|Trainer\b")
#: ...and a bf16 origin: a load, a `.bfloat16()`, a checkpoint named to a Trainer, or a `.to(`
#: cast in a file that spells `bfloat16` (the dtype may sit in a constant).
_BF16_ORIGIN_TEXT = re.compile(r"from_pretrained|\.bfloat16\s*\(|Trainer\b")
_CAST_TEXT = re.compile(r"\.to\s*\(")


def unscales_fp16(call: cst.Call) -> bool:
    """A ``ShardedGradScaler`` (FSDP's, fairscale's): its ``unscale_`` passes
    ``allow_fp16=True`` (torch's ``sharded_grad_scaler.py``), so fp16 gradients do not raise."""
    name = dotted_name(call.func)
    return name is not None and last_part(name) == "ShardedGradScaler"


def may_train(source: str) -> bool:
    """Cheap text test for `Fp16SiteSearch.trains`: a ``.backward(``/``.fit(``/``.train(`` call
    or a ``*Trainer``."""
    return _TRAINING_TEXT.search(source) is not None


def may_hold_a_finding(source: str) -> bool:
    """Cheap text test that skips the walk for files that cannot hold a finding."""
    # Cheapest first: the case-blind fp16 pattern costs most (2 of a tree's 11 s of planning).
    return (
        _TRAINING_TEXT.search(source) is not None
        and (
            _BF16_ORIGIN_TEXT.search(source) is not None
            or ("bfloat16" in source and _CAST_TEXT.search(source) is not None)
        )
        and _FP16_TEXT.search(source) is not None
    )


@dataclass(frozen=True, slots=True)
class Fp16Site:
    """A place that puts a model into fp16."""

    #: Node reported.
    node: cst.CSTNode
    #: What it is, for the message (e.g. ``fp16 autocast``).
    what: str
    #: How to train in bf16 instead.
    fix: str
    #: The model it applies to (display text) and where that model became bf16.
    model: str
    origin: Bf16Origin
    #: When the switch is on: None for always, else which runs (``when run with ...``).
    when: str | None = None
    #: Facts that hold on the runs where the switch is on.
    facts: frozenset[Fact] = frozenset()
    #: Whether the switch trains through a GradScaler (a GradScaler, ``fp16=True``,
    #: ``mixed_precision="fp16"``, Lightning ``16-mixed``), not only computes in fp16.
    loss_scaling: bool = False
    #: Further sites that tie the switch to the model: (node, description) pairs, e.g. the
    #: optimizer over its parameters and the ``scaler.step(optimizer)`` that unscales them
    #: (last: where the gradients are unscaled — the step, the Trainer, the ``prepare`` call).
    through: tuple[tuple[cst.CSTNode, str], ...] = ()
    #: For a switch on a runtime flag (``GradScaler(enabled=args.fp16)``, only with
    #: ``runtime_flags``): the facts under which it is on. The pair is certain only where the
    #: model's origin sits under the same facts (``if args.fp16: model.half()``).
    requires: frozenset[Fact] = frozenset()
    #: The checkpoint name, where the switch is handed a name rather than a model
    #: (``SFTTrainer(model="google/gemma-3-1b-it")``, or a constant holding it).
    checkpoint: str | None = None


def holder_names(node: cst.BaseExpression) -> set[str]:
    """Plain names an expression reads (``named`` of ``[p for n, p in named]``), not the parts
    of attribute reads (``model`` of ``model.parameters()``: `model_in` sees those)."""
    names: set[cst.Name] = set()
    parts: set[cst.CSTNode] = set()
    for child in (node, *descendants(node)):
        if isinstance(child, cst.Attribute):
            parts.update((child.value, child.attr))
        elif isinstance(child, cst.Name):
            names.add(child)
    return {name.value for name in names - parts}


def assigned_name(index: ModuleIndex, node: cst.CSTNode) -> str | None:
    """The name ``node`` is bound to: ``x = node``, or ``x = node if flag else None`` (an arm of
    a conditional expression binds it as ``if flag: x = node`` does: the common spelling of a
    switched scaler, ``GradScaler() if args.amp else None``, made no site before)."""
    parent = index.parent.get(node)
    if isinstance(parent, cst.IfExp) and (node is parent.body or node is parent.orelse):
        parent = index.parent.get(parent)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        return dotted_name(parent.targets[0].target)
    return None


def is_receiver(
    index: ModuleIndex, value: cst.BaseExpression, call: cst.CSTNode, bound: str | None
) -> bool:
    """``value`` is the object ``call`` created: the call itself, or the name it was bound to,
    read where that binding is visible — a local of the same function (two test methods each
    with their own ``training_args`` are two objects), an attribute of the same class, or a
    module-level name."""
    if value is call:
        return True
    if bound is None or dotted_name(value) != bound:
        return False
    if bound.startswith("self."):
        return index.enclosing_class(value) is index.enclosing_class(call)
    function = index.enclosing_function(call)
    return function is None or index.enclosing_function(value) is function


class Fp16SiteSearch:
    """One module's origins, switches and paths, and the questions every kind of site asks."""

    def __init__(
        self,
        context: ModuleContext,
        extra_families: tuple[Bf16Family, ...] = (),
        target: str = BF16,
        *,
        runtime_flags: bool = False,
    ) -> None:
        self.context = context
        self.index = module_index(context)
        self.aliases = import_aliases(self.index)
        self.settings = settings = DeclaredSettings(self.index)
        self.paths = path_facts(self.index)
        self.origins = Bf16Origins(
            self.index,
            self.aliases,
            ModuleConstants(self.index, settings),
            self.paths,
            extra_families,
            target,
            choices=dtype_choices(self.index),
        )
        self.switches = Fp16Switches(self.index, settings, self.paths.facts)
        self.calls: list[cst.Call] = self.index.nodes(cst.Call)
        #: Whether GradScalers enabled by a runtime flag make sites (see `Fp16Site.requires`).
        self.runtime_flags = runtime_flags

    def qualified(self, node: cst.BaseExpression) -> str | None:
        name = dotted_name(node)
        return self.aliases.qualify(name) if name is not None else None

    def trains(self) -> bool:
        """Inference-only code (``.half()`` for generation) is out of scope: no loss scale."""
        for call in self.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("backward", "fit", "train"):
                return True
            name = dotted_name(func)
            if name is not None and last_part(name).endswith("Trainer"):
                return True
        return False

    def model_in(
        self, expression: cst.BaseExpression, at: cst.CSTNode
    ) -> tuple[str, Bf16Origin] | None:
        """The first bf16 model mentioned in ``expression`` (``model``, ``model.parameters()``)."""
        for node in (expression, *descendants(expression)):
            if not isinstance(node, cst.Name | cst.Attribute | cst.Call):
                continue
            if isinstance(node, cst.Call):
                origin = self.origins.of_expression(node, at)
                if origin is not None:
                    return self.context.module.code_for_node(node), origin
                continue
            name = dotted_name(node)
            while name:
                origin = self.origins.of_name(name, at)
                if origin is not None:
                    return name, origin
                name = name.rpartition(".")[0]
        return None

    def unset_flag(self, node: cst.BaseExpression) -> str | None:
        """The flag ``node`` reads (``args.deepspeed``) when it is declared here with no value
        by default (``add_argument("--deepspeed", default=None)``, or no ``default``): the runs
        that do not pass it leave it None. None for anything else."""
        setting = self.settings.of(node)
        if setting is None:
            return None
        default, declaration = setting.default, setting.declaration
        required = isinstance(declaration, cst.Call) and keyword(declaration, "required")
        if required and not (
            isinstance(required.value, cst.Name) and required.value.value == "False"
        ):
            return None  # given on every run
        unset = (default is None and isinstance(declaration, cst.Call)) or (
            isinstance(default, cst.Name) and default.value == "None"
        )
        return setting.flag if unset else None

    def _runtime_switch(self, flag: cst.BaseExpression) -> SwitchOn | None:
        """(Only with ``runtime_flags``.) A switch on a flag the linter cannot evaluate
        (``GradScaler(enabled=args.fp16)``, ``TrainingArguments(fp16=args.fp16)``): on the runs
        where that flag is true, its facts the site's ``requires``."""
        if not self.runtime_flags or self.switches.fixed(flag):
            return None
        requires = self.paths.facts.of_test(flag, True)
        code = self.context.module.code_for_node(flag)
        return SwitchOn(requires, f"when `{code}` is true") if requires else None

    def _enabled(self, call: cst.Call) -> SwitchOn | None:
        """No ``enabled=``, or one that is on (``enabled=torch.cuda.is_available()``)."""
        enabled = keyword(call, "enabled")
        if enabled is None:
            return SwitchOn(frozenset())
        return self.switches.truthy(enabled.value)

    def _autocast_dtype(self, call: cst.Call) -> str | None:
        """fp16 for an fp16 autocast, including one with no dtype on a device that is not
        the CPU (CUDA's default is fp16; ``device_type=device.type`` is CUDA where it trains)."""
        name = self.qualified(call.func)
        if name not in AUTOCAST:
            return None
        dtype = keyword(call, "dtype")
        if dtype is not None:
            return self.origins.dtype(dtype.value)
        if name in CUDA_AUTOCAST:
            return FP16
        device = keyword(call, "device_type") or positional(call, 0)
        if device is None:
            return None
        device_name = string_value(device.value)
        if device_name is None:
            return FP16 if isinstance(device.value, cst.Name | cst.Attribute) else None
        return FP16 if device_name == "cuda" else None

    def _entered(self, item: cst.WithItem) -> list[BoundContext]:
        """The autocasts a ``with`` item enters: the call itself, or what the name it enters is
        bound to (`linter.model.values._bound_contexts`)."""
        if isinstance(item.item, cst.Call) and self.qualified(item.item.func) in AUTOCAST:
            return [BoundContext(item.item, item.item)]
        return [
            bound
            for bound in bound_contexts(self.index, self.paths.facts, item)
            if self.qualified(bound.call.func) in AUTOCAST
        ]

    def _fp16_run(self, call: cst.Call) -> DtypeChoice | None:
        """The run on which an autocast computes in fp16: every run for a static fp16 dtype,
        else the default or first choice of the flag that picks a run-time dtype."""
        dtype = self._autocast_dtype(call)
        if dtype == FP16:
            return DtypeChoice(FP16, None, frozenset())
        if dtype is not None or keyword(call, "dtype") is None:
            return None
        options = argument_options(self.index, call)
        return options.first(FP16) if options is not None else None

    def _bf16_autocast_functions(self) -> set[cst.CSTNode | None]:
        return {
            self.index.enclosing_function(call)
            for call in self.calls
            if self.qualified(call.func) in AUTOCAST
            and (dtype := keyword(call, "dtype")) is not None
            and self.origins.dtype(dtype.value) == BF16
        }
