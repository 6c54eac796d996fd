"""The fp16 switches of one module, and the bf16 model each applies to (AMP002's analysis).

A site counts only when it provably applies to a model with a bf16 origin: the model called
under the autocast, the model whose optimizer the GradScaler steps, ``Trainer(model=..., args=...)``
with those arguments, ``accelerator.prepare(model, ...)``, the LightningModule given to ``fit``.

Built with ``target=FP16`` the same search pairs the switches with models that are fp16
themselves (AMP008): then the switches that bring a GradScaler (``loss_scaling``) matter.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from linter.model.project._module_context import ModuleContext
from linter.model.settings._command_line import DeclaredSettings
from linter.model.settings._dtype_choices import DtypeChoice, argument_options, dtype_choices
from linter.model.settings._fp16_switches import Fp16Switches, SwitchOn
from linter.model.settings._module_constants import ModuleConstants
from linter.model.syntax._call_arguments import keyword, positional, string_value
from linter.model.syntax._dotted_names import dotted_name, import_aliases, last_part
from linter.model.syntax._dtype_names import BF16, FP16
from linter.model.syntax._module_index import ModuleIndex, descendants, module_index
from linter.model.syntax._path_facts import Fact, path_facts
from linter.model.values._bf16_families import Bf16Family
from linter.model.values._bf16_origins import Bf16Origin, Bf16Origins
from linter.model.values._bound_contexts import BoundContext, bound_contexts
from linter.model.values._handed_arguments import argument_for
from linter.model.values._imported_values import imported_autocast
from linter.model.values._precision_engines import precision_engines
from linter.model.values._scaler_receivers import scaler_receivers

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
#: Hugging Face argument classes with an ``fp16`` switch (transformers and TRL).
TRAINING_ARGUMENTS = frozenset(
    {
        "TrainingArguments",
        "Seq2SeqTrainingArguments",
        "SFTConfig",
        "DPOConfig",
        "ORPOConfig",
        "KTOConfig",
        "CPOConfig",
        "GRPOConfig",
        "RewardConfig",
    }
)
#: Lightning ``precision=`` values that mean fp16.
LIGHTNING_FP16 = frozenset({"16", "16-mixed", "16-true"})
#: ...and those that train through a GradScaler ("16-true" casts the model and scales nothing).
LIGHTNING_LOSS_SCALING = frozenset({"16", "16-mixed"})
#: Packages whose ``Trainer``/``Fabric`` take Lightning's ``precision=``.
LIGHTNING_PACKAGES = ("lightning", "pytorch_lightning")
#: Methods through which a model is called (``model.generate(...)`` runs ``model``).
_MODEL_METHODS = frozenset({"forward", "generate", "__call__"})

#: Text a file with a finding must contain: an fp16 switch, and a sign of training.
_FP16_TEXT = re.compile(
    r"float16|half|autocast|GradScaler|fp16|precision\s*=\s*[\"']?16|[\"']16-(?:mixed|true)"
    r"|Accelerator\s*\(",
    re.IGNORECASE,
)
_TRAINING_TEXT = re.compile(r"\.(?:backward|fit|train)\s*\(|Trainer\b")
#: ...and a bf16 origin: a load, a `.bfloat16()`, a checkpoint named to a Trainer, or a `.to(`
#: cast in a file that spells `bfloat16` (the dtype may sit in a constant).
_BF16_ORIGIN_TEXT = re.compile(r"from_pretrained|\.bfloat16\s*\(|Trainer\b")
_CAST_TEXT = re.compile(r"\.to\s*\(")


def _unscales_fp16(call: cst.Call) -> bool:
    """A ``ShardedGradScaler`` (FSDP's, fairscale's): its ``unscale_`` passes
    ``allow_fp16=True`` (torch's ``sharded_grad_scaler.py``), so fp16 gradients do not raise."""
    name = dotted_name(call.func)
    return name is not None and last_part(name) == "ShardedGradScaler"


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


def _holder_names(node: cst.BaseExpression) -> set[str]:
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


def _assigned_name(index: ModuleIndex, node: cst.CSTNode) -> str | None:
    """The name ``node`` is bound to: ``x = node``, or ``x = node if flag else None`` (an arm of
    a conditional expression binds it as ``if flag: x = node`` does: the common spelling of a
    switched scaler, ``GradScaler() if args.amp else None``, made no site before)."""
    parent = index.parent.get(node)
    if isinstance(parent, cst.IfExp) and (node is parent.body or node is parent.orelse):
        parent = index.parent.get(parent)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        return dotted_name(parent.targets[0].target)
    return None


def _is_receiver(
    index: ModuleIndex, value: cst.BaseExpression, call: cst.Call, bound: str | None
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


class Fp16Sites:
    """Finds the fp16 sites of one module and the bf16 model each applies to."""

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
        settings = DeclaredSettings(self.index)
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

    # -- the sites ---------------------------------------------------------------------------

    def sites(self, *, loss_scaling_only: bool = False) -> Iterator[Fp16Site]:
        """Sites whose origin can run on one path with them (same run, same arm); with
        ``loss_scaling_only``, only the switches that bring a GradScaler."""
        handed = tuple(self._handed_to_scalers())
        if not handed and not self.trains():
            return
        found = (
            *(() if loss_scaling_only else self._autocasts()),
            *self._grad_scalers(),
            *handed,
            *(() if loss_scaling_only else self._casts()),
            *self._training_arguments(),
            *self._accelerators(),
            *self._lightning(),
        )
        for site in found:
            if loss_scaling_only and not site.loss_scaling:
                continue
            if not self.paths.exclusive(site.origin.node, site.node, site.origin.facts, site.facts):
                yield site

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

    def _autocasts(self) -> Iterator[Fp16Site]:
        for with_node in self.index.nodes(cst.With):
            for item in with_node.items:
                yield from self._imported_autocast(item, with_node)
                for entered in self._entered(item):
                    call = entered.call
                    run = self._fp16_run(call)
                    if run is None:
                        continue
                    enabled = self._enabled(call)
                    if enabled is None:
                        continue
                    found = self._model_run_in(with_node.body)
                    if found is None:
                        continue
                    what = "fp16 autocast"
                    if keyword(call, "dtype") is None:
                        what = "autocast with no dtype (fp16 on CUDA)"
                    yield Fp16Site(
                        entered.node,
                        what,
                        "use `dtype=torch.bfloat16` and drop the GradScaler",
                        *found,
                        run.when or enabled.when,
                        enabled.facts | entered.facts | run.facts,
                    )

    def _imported_autocast(self, item: cst.WithItem, with_node: cst.With) -> Iterator[Fp16Site]:
        """``with autocast_ctx:`` / ``with amp():`` on an fp16 autocast another module of the
        project builds (`linter.model.values._exported_values`)."""
        entered = imported_autocast(self.index, item.item, item)
        if entered is None or entered[0].dtype != FP16:
            return
        found = self._model_run_in(with_node.body)
        if found is not None:
            code = self.context.module.code_for_node(item.item)
            what = f"`{code}` (an fp16 autocast of {entered[1]}, line {entered[0].line})"
            fix = "build it with `dtype=torch.bfloat16` and drop the GradScaler"
            yield Fp16Site(item.item, what, fix, *found)

    def _model_run_in(self, body: cst.CSTNode) -> tuple[str, Bf16Origin] | None:
        for node in descendants(body):
            if not isinstance(node, cst.Call):
                continue
            callee = node.func
            if isinstance(callee, cst.Attribute) and callee.attr.value in _MODEL_METHODS:
                callee = callee.value
            for candidate in (callee, *(arg.value for arg in node.args)):
                if isinstance(candidate, cst.Name | cst.Attribute):
                    name = dotted_name(candidate)
                    origin = self.origins.of_name(name, node) if name else None
                    if name and origin is not None:
                        return name, origin
        return None

    def _bf16_autocast_functions(self) -> set[cst.CSTNode | None]:
        return {
            self.index.enclosing_function(call)
            for call in self.calls
            if self.qualified(call.func) in AUTOCAST
            and (dtype := keyword(call, "dtype")) is not None
            and self.origins.dtype(dtype.value) == BF16
        }

    def _grad_scalers(self) -> Iterator[Fp16Site]:
        receivers = scaler_receivers(self.index)
        bf16_autocast = None
        for call in self.calls:
            if not receivers.is_constructor_call(call):
                continue
            if self.origins.target == FP16 and _unscales_fp16(call):
                continue  # AMP008's error is `unscale_` refusing fp16 gradients
            scaler = _assigned_name(self.index, call)
            enabled = self._enabled(call)
            requires: frozenset[Fact] = frozenset()
            flag = keyword(call, "enabled")
            if enabled is None and self.runtime_flags and flag is not None:
                requires = self.paths.facts.of_test(flag.value, True)
                code = self.context.module.code_for_node(flag.value)
                enabled = SwitchOn(requires, f"when `{code}` is true") if requires else None
            if scaler is None or enabled is None:
                continue
            if self.origins.target == BF16:
                if bf16_autocast is None:
                    bf16_autocast = self._bf16_autocast_functions()
                # A bf16 model under bf16 compute: the scaler is redundant (AMP010's case), not
                # harmful. fp16 parameters (AMP008) raise at `unscale_` whatever autocast runs.
                if self.index.enclosing_function(call) in bf16_autocast:
                    continue
            found = self._model_behind_scaler(scaler)
            if found is not None:
                model, origin, through = found
                yield Fp16Site(
                    call,
                    "GradScaler (fp16 loss scaling)",
                    "train with bf16 autocast and no GradScaler",
                    model,
                    origin,
                    enabled.when,
                    enabled.facts,
                    loss_scaling=True,
                    through=through,
                    requires=requires,
                )

    def _model_behind_scaler(
        self, scaler: str
    ) -> tuple[str, Bf16Origin, tuple[tuple[cst.CSTNode, str], ...]] | None:
        """The model whose optimizer ``<scaler>.step(optimizer)`` (or ``unscale_``) steps, its
        origin, and the (optimizer, step) sites that tie them together."""
        steps: dict[str | None, cst.Call] = {}
        for method in ("step", "unscale_"):
            for call in self.index.calls_named("." + method):
                arg = positional(call, 0)
                if arg is not None and dotted_name(call.func.value) == scaler:  # type: ignore[attr-defined]  # calls_named(".m") holds attribute calls only
                    steps.setdefault(dotted_name(arg.value), call)
        for node in self.index.nodes(cst.Assign):
            for target in node.targets:
                optimizer = dotted_name(target.target)
                if optimizer in steps:
                    step = steps[optimizer]
                    found = self._optimized_model(node.value, node)
                    if found is None and self.index.enclosing_function(
                        step
                    ) is self.index.enclosing_function(node):
                        # Cast in place after the optimizer was built, before it steps.
                        found = self.model_in(node.value, step)
                    if found is not None:
                        through = (
                            (node, f"`{optimizer}` trains its parameters"),
                            (step, f"`{self.context.module.code_for_node(step)}` unscales them"),
                        )
                        return (*found, through)
        return None

    def _accelerator_calls(
        self, accelerator: cst.Call, bound: str | None, methods: tuple[str, ...]
    ) -> Iterator[cst.Call]:
        """Calls of ``methods`` on the Accelerator that ``accelerator`` creates."""
        for call in self.calls:
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in methods
                and _is_receiver(self.index, func.value, accelerator, bound)
            ):
                yield call

    def _cast_after_prepare(
        self, accelerator: cst.Call, bound: str | None, prepares: list[cst.Call]
    ) -> tuple[tuple[str, Bf16Origin] | None, tuple[tuple[cst.CSTNode, str], ...]]:
        """A model cast after ``accelerator.prepare(model, ...)`` and trained after the cast
        (diffusers' ``train_autoencoderkl.py`` casts the VAE it trains to ``weight_dtype``
        after ``prepare``): the model as the training step finds it, at the first
        ``accelerator.backward``/``clip_grad_*`` that the prepare may precede."""
        trained = ("backward", "clip_grad_norm_", "clip_grad_value_")
        for step in self._accelerator_calls(accelerator, bound, trained):
            for prepare in prepares:
                if self.index.enclosing_function(prepare) is not self.index.enclosing_function(
                    step
                ) or not self.paths.may_precede(prepare, step):
                    continue
                for arg in prepare.args:
                    found = self.model_in(arg.value, step)
                    if found is not None and not self.paths.exclusive(found[1].node, prepare):
                        return found, (
                            (prepare, "prepared for fp16 loss scaling here"),
                            (step, "trained here, after the cast"),
                        )
        return None, ()

    def _handed_to_scalers(self) -> Iterator[Fp16Site]:
        """(fp16 models only: AMP008 reports at the cast, in this module.) A function of another
        module that this module hands an optimizer over a model, and that steps it through a
        GradScaler it builds: ``train(model, loader, optimizer)`` with ``scaler =
        GradScaler()`` and ``scaler.step(optimizer)`` in ``train_utils.py``. A model handed on
        alone, its optimizer built there, is found from that module's side (its parameter's
        callers), as is a bf16 model for AMP002."""
        project = self.context.project
        if project is None or self.origins.target != FP16:
            return
        for call in self.calls:
            if call in self.context.foreign or not call.args:
                continue
            grafted = project.graft(self.context, call, ("GradScaler",))
            if grafted is not None:
                yield from self._scalers_of(call, grafted)

    def _scalers_of(self, call: cst.Call, function: cst.FunctionDef) -> Iterator[Fp16Site]:
        """The sites of the GradScalers ``function`` (grafted under ``call``) builds, each paired
        with the model whose parameters its step reaches through what ``call`` passes."""
        nodes = descendants(function)
        receivers = scaler_receivers(self.index)
        for scaler_call in nodes:
            if not isinstance(scaler_call, cst.Call) or not receivers.is_constructor_call(
                scaler_call
            ):
                continue
            if _unscales_fp16(scaler_call):
                continue
            scaler = _assigned_name(self.index, scaler_call)
            enabled = self._enabled(scaler_call)
            if scaler is None or enabled is None or enabled.facts:
                continue
            for step in nodes:
                stepped = self._stepped_by(step, scaler)
                found = self._handed_model(call, function, stepped) if stepped else None
                if found is None:
                    continue
                model, origin, held = found
                where = self.context.foreign_position(scaler_call)
                place = f" in {where[0]} line {where[1]}" if where else ""
                callee = self.context.module.code_for_node(call.func)
                yield Fp16Site(
                    scaler_call,
                    f"`{callee}()`{place}",
                    "train with bf16 autocast and no GradScaler",
                    model,
                    origin,
                    loss_scaling=True,
                    through=(
                        *held,
                        (call, f"`{callee}(...)` steps it through its GradScaler{place}"),
                    ),
                )
                return

    @staticmethod
    def _stepped_by(node: cst.CSTNode, scaler: str) -> str | None:
        """The optimizer name ``<scaler>.step(opt)`` / ``<scaler>.unscale_(opt)`` steps."""
        if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
            return None
        if (
            node.func.attr.value not in ("step", "unscale_")
            or dotted_name(node.func.value) != scaler
        ):
            return None
        arg = positional(node, 0)
        return arg.value.value if arg is not None and isinstance(arg.value, cst.Name) else None

    def _handed_model(
        self, call: cst.Call, function: cst.FunctionDef, optimizer: str
    ) -> tuple[str, Bf16Origin, tuple[tuple[cst.CSTNode, str], ...]] | None:
        """The model of this module whose parameters the optimizer ``call`` passes as
        ``function``'s parameter ``optimizer`` holds (built here over the model). An optimizer
        ``function`` builds over a model it is passed is found from that module's side, as its
        parameter's origin."""
        handed = argument_for(call, function, optimizer)
        if handed is None:
            return None
        if isinstance(handed, cst.Name):
            for node in self._fillers(handed.value, self.index.enclosing_function(call), call):
                if isinstance(node, cst.Assign):
                    found = self._optimized_model(node.value, node)
                    if found is not None:
                        return (*found, ((node, f"`{handed.value}` trains its parameters"),))
        found = self._optimized_model(handed, call)
        return (*found, ()) if found is not None else None

    def _optimized_model(
        self, value: cst.BaseExpression, at: cst.CSTNode
    ) -> tuple[str, Bf16Origin] | None:
        """The model whose parameters an optimizer expression holds: ``Adam(model.parameters())``
        or through the names its parameter argument reads, as the same function last filled
        them before (``params = filter(..., model.parameters())``, ``named =
        list(model.named_parameters())`` read by parameter-group comprehensions,
        ``decay.append(p)`` in a loop over ``model.named_parameters()``)."""
        found = self.model_in(value, at)
        params = (
            (keyword(value, "params") or positional(value, 0))
            if isinstance(value, cst.Call)
            else None
        )
        if found is not None or params is None:
            return found
        function = self.index.enclosing_function(at)
        pending = _holder_names(params.value)
        seen: set[str] = set()
        while pending and found is None and len(seen) < 8:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            for node in self._fillers(name, function, at):
                source = node.iter if isinstance(node, cst.For) else node.value  # type: ignore[attr-defined]  # a filler that is no loop is an assignment
                found = found or self.model_in(source, node)
                pending |= _holder_names(source)
        return found

    def _fillers(
        self, name: str, function: cst.CSTNode | None, at: cst.CSTNode
    ) -> list[cst.CSTNode]:
        """What last filled ``name`` before ``at`` in ``function``: its last assignment, and the
        loops that ``append`` to it (``(rest if p.ndim < 2 else decay).append(p)`` too)."""
        order = self.index.order[at]
        assigns: list[cst.CSTNode] = [
            node
            for node in self.index.nodes(cst.Assign)
            if self.index.order[node] < order
            and self.index.enclosing_function(node) is function
            and any(dotted_name(t.target) == name for t in node.targets)
        ]
        fillers: list[cst.CSTNode] = assigns[-1:]
        for append in self.index.calls_named(".append"):
            receiver = append.func.value  # type: ignore[attr-defined]  # calls_named(".m") holds attribute calls only
            if (
                name in _holder_names(receiver)
                and self.index.order[append] < order
                and self.index.enclosing_function(append) is function
            ):
                loop = next(
                    (a for a in self.index.ancestors(append) if isinstance(a, cst.For)), None
                )
                if loop is not None:
                    fillers.append(loop)
        return fillers

    def _casts(self) -> Iterator[Fp16Site]:
        for call in self.calls:
            func = call.func
            if not isinstance(func, cst.Attribute):
                continue
            method = func.attr.value
            if method == "half" or (method == "to" and self.origins.cast_dtype(call) == FP16):
                origin = self.origins.of_expression(func.value, call)
                if origin is not None:
                    model = dotted_name(func.value) or "the model"
                    what = "`.half()`" if method == "half" else "`.to(torch.float16)`"
                    yield Fp16Site(call, what, "keep the model in bf16", model, origin)
            elif method == "from_pretrained":
                dtype = self.origins.loading_dtype_arg(call)
                if dtype is None or self.origins.dtype(dtype.value) != FP16:
                    continue
                origin = self.origins.family_origin(self.origins.checkpoint_arg(call))
                if origin is not None:
                    yield Fp16Site(
                        dtype.node,
                        f"`{dtype.name}={self.context.module.code_for_node(dtype.value)}`",
                        "load with `torch_dtype=torch.bfloat16`",
                        "the model",
                        origin,
                    )

    def _trainer_model(self, trainer: cst.Call) -> tuple[str, Bf16Origin, str | None] | None:
        """The model a Trainer trains, its origin, and the checkpoint name when it is handed
        one (``SFTTrainer(model="google/...")``, or a constant holding the name)."""
        model = keyword(trainer, "model") or positional(trainer, 0)
        if model is None:
            return None
        origin = self.origins.family_origin(model.value)
        checkpoint = self.origins.checkpoint_name(model.value)
        if origin is not None and checkpoint is not None:
            return f"the checkpoint `{checkpoint}`", origin, checkpoint
        found = self.model_in(model.value, trainer)
        return (*found, None) if found is not None else None

    def _training_arguments(self) -> Iterator[Fp16Site]:
        for call in self.calls:
            name = dotted_name(call.func)
            if name is None or last_part(name) not in TRAINING_ARGUMENTS:
                continue
            fp16 = keyword(call, "fp16")
            switch = self.switches.truthy(fp16.value) if fp16 is not None else None
            if fp16 is None or switch is None:
                continue
            bound = _assigned_name(self.index, call)
            for trainer in self.calls:
                trainer_name = dotted_name(trainer.func)
                if trainer_name is None or not last_part(trainer_name).endswith("Trainer"):
                    continue
                args = keyword(trainer, "args") or positional(trainer, 1)
                if args is None or not (_is_receiver(self.index, args.value, call, bound)):
                    continue
                found = self._trainer_model(trainer)
                if found is not None:
                    model, origin, checkpoint = found
                    what = f"`fp16={self.context.module.code_for_node(fp16.value)}`"
                    yield Fp16Site(
                        fp16,
                        what,
                        "use `bf16=True`",
                        model,
                        origin,
                        switch.when,
                        switch.facts,
                        loss_scaling=True,
                        through=((trainer, "its optimizer steps through a GradScaler"),),
                        checkpoint=checkpoint,
                    )
                    break

    def _accelerators(self) -> Iterator[Fp16Site]:
        for call in self.calls:
            name = dotted_name(call.func)
            if name is None or last_part(name) != "Accelerator":
                continue
            precision = keyword(call, "mixed_precision")
            shipped = self._shipped_fp16(call) if precision is None else None
            switch = (
                self.switches.equals(precision.value, lambda value: value == "fp16")
                if precision is not None
                else (SwitchOn(frozenset()) if shipped is not None else None)
            )
            if switch is None:
                continue
            bound = _assigned_name(self.index, call)
            found: tuple[str, Bf16Origin] | None = None
            through: tuple[tuple[cst.CSTNode, str], ...] = ()
            prepares = list(self._accelerator_calls(call, bound, ("prepare",)))
            for prepare in prepares:
                for arg in prepare.args:
                    if found is None:
                        found = self.model_in(arg.value, prepare)
                        through = ((prepare, "prepared for fp16 loss scaling here"),)
            if found is None:
                found, through = self._cast_after_prepare(call, bound, prepares)
            if found is not None:
                what = (
                    f"`mixed_precision={self.context.module.code_for_node(precision.value)}`"
                    if precision is not None
                    else f"{shipped} (every accelerate config shipped here says fp16)"
                )
                yield Fp16Site(
                    precision or call,
                    what,
                    'use `mixed_precision="bf16"`'
                    if shipped is None
                    else "set `mixed_precision: bf16` in the accelerate config",
                    *found,
                    switch.when,
                    switch.facts,
                    loss_scaling=True,
                    through=through,
                )

    def _shipped_fp16(self, call: cst.Call) -> str | None:
        """Where ``Accelerator()`` takes fp16 from when every accelerate config shipped with
        the project says fp16 (`linter.model.values._precision_engines`); None otherwise."""
        for engine in precision_engines(self.context):
            if engine.node is call and engine.precision == FP16:
                return engine.source
        return None

    def _lightning(self) -> Iterator[Fp16Site]:
        classes = {c.name.value: c for c in self.index.nodes(cst.ClassDef)}
        for call in self.calls:
            name = self.qualified(call.func)
            if name is None or not name.startswith(LIGHTNING_PACKAGES):
                continue
            if last_part(name) not in ("Trainer", "Fabric"):
                continue
            precision = keyword(call, "precision")
            if precision is None:
                continue
            value = precision.value
            switch = self.switches.equals(value, lambda text: str(text) in LIGHTNING_FP16)
            if switch is None:
                continue
            bound = _assigned_name(self.index, call)
            found: tuple[str, Bf16Origin] | None = None
            for fit in self.calls:
                func = fit.func
                if not (
                    isinstance(func, cst.Attribute)
                    and func.attr.value in ("fit", "setup")
                    and _is_receiver(self.index, func.value, call, bound)
                ):
                    continue
                for arg in fit.args:
                    found = found or self._lightning_model(arg.value, fit, classes)
            if found is not None:
                scales = self.switches.equals(
                    value, lambda text: str(text) in LIGHTNING_LOSS_SCALING
                )
                yield Fp16Site(
                    precision,
                    f"`precision={self.context.module.code_for_node(value)}`",
                    'use `precision="bf16-mixed"`',
                    *found,
                    switch.when,
                    switch.facts,
                    loss_scaling=scales is not None and scales.when == switch.when,
                )

    def _lightning_model(
        self, value: cst.BaseExpression, at: cst.CSTNode, classes: dict[str, cst.ClassDef]
    ) -> tuple[str, Bf16Origin] | None:
        """A bf16 model held by the LightningModule passed to ``fit``, or passed to it."""
        found = self.model_in(value, at)
        if found is not None:
            return found
        if isinstance(value, cst.Name):
            name = value.value
            for node in self.index.nodes(cst.Assign):
                if any(dotted_name(t.target) == name for t in node.targets):
                    value = node.value
        if isinstance(value, cst.Call):
            cls = classes.get(dotted_name(value.func) or "")
            if cls is not None:
                for node in self.index.nodes(cst.Assign):
                    if self.index.enclosing_class(node) is not cls:
                        continue
                    for target in node.targets:
                        attribute = dotted_name(target.target)
                        if attribute and attribute.startswith("self."):
                            origin = self.origins.of_expression(node.value, node)
                            if origin is not None:
                                return attribute, origin
            return self.model_in(value, at)  # LitModule(hf_model): the model passed in
        return None
