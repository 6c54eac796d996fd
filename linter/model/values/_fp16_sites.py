"""The fp16 switches of one module, and the bf16 model each applies to (AMP002's analysis).

A site counts only when it provably applies to a model with a bf16 origin: the model called
under the autocast, the model whose optimizer the GradScaler steps, ``Trainer(model=..., args=...)``
with those arguments, ``accelerator.prepare(model, ...)``, the LightningModule given to ``fit``.

Built with ``target=FP16`` the same search pairs the switches with models that are fp16
themselves (AMP008): then the switches that bring a GradScaler (``loss_scaling``) matter.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from linter.model.settings import (
    TRAINING_ARGUMENTS_FILE,
    TRAINING_ARGUMENTS_READER,
    SwitchOn,
    config_references,
    precision_facts,
)
from linter.model.syntax import (
    FP16,
    Fact,
    descendants,
    dotted_name,
    keyword,
    last_part,
    positional,
)
from linter.model.values._fp16_scaler_sites import ScalerSites
from linter.model.values._fp16_site_search import (
    Fp16Site,
    assigned_name,
    is_receiver,
)
from linter.model.values._imported_values import imported_autocast
from linter.model.values._model_origins import Bf16Origin
from linter.model.values._parsed_training_arguments import (
    TRAINING_ARGUMENTS,
    parsed_training_arguments,
)
from linter.model.values._precision_engines import (
    DEEPSPEED_ENGINE,
    describe_setting,
    precision_engines,
)

#: Lightning ``precision=`` values that mean fp16.
LIGHTNING_FP16 = frozenset({"16", "16-mixed", "16-true"})
#: ...and those that train through a GradScaler ("16-true" casts the model and scales nothing).
LIGHTNING_LOSS_SCALING = frozenset({"16", "16-mixed"})
#: Packages whose ``Trainer``/``Fabric`` take Lightning's ``precision=``.
LIGHTNING_PACKAGES = ("lightning", "pytorch_lightning")
#: Methods through which a model is called (``model.generate(...)`` runs ``model``).
_MODEL_METHODS = frozenset({"forward", "generate", "__call__"})


class Fp16Sites(ScalerSites):
    """Finds the fp16 sites of one module and the bf16 model each applies to."""

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
            *self._deepspeed_engines(),
            *self._accelerators(),
            *self._lightning(),
        )
        for site in found:
            if loss_scaling_only and not site.loss_scaling:
                continue
            if not self.paths.exclusive(site.origin.node, site.node, site.origin.facts, site.facts):
                yield site

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
            if fp16 is None:
                continue
            switch = self.switches.truthy(fp16.value)
            requires: frozenset[Fact] = frozenset()
            if switch is None:
                # `fp16=args.fp16`, as `GradScaler(enabled=args.fp16)`: on where that flag is.
                switch = self._runtime_switch(fp16.value)
                requires = switch.facts if switch is not None else requires
            if switch is None:
                continue
            what = f"`fp16={self.context.module.code_for_node(fp16.value)}`"
            bound = assigned_name(self.index, call)
            yield from self._trainers_of(fp16, what, (call, bound), switch, requires)
        for parsed in parsed_training_arguments(self.index):
            receiver = (parsed.binding.value, parsed.name)
            shipped = self._json_fp16(parsed.binding.value)
            if shipped is not None:
                # `parse_json_file("args.json")`: the file the project ships says.
                if shipped:
                    what = f"the Trainer given `{parsed.name}` from {shipped}"
                    always = SwitchOn(frozenset())
                    fix = 'set `"bf16": true` and `"fp16": false` in that file'
                    yield from self._trainers_of(
                        parsed.binding, what, receiver, always, frozenset(), fix
                    )
                continue
            # `training_args` an HfArgumentParser filled: on where `--fp16` was given.
            flag = cst.Attribute(value=cst.parse_expression(parsed.name), attr=cst.Name("fp16"))
            switch = self._runtime_switch(flag)
            if switch is None:
                continue
            what = f"the Trainer given `{parsed.name}` from HfArgumentParser"
            yield from self._trainers_of(parsed.binding, what, receiver, switch, switch.facts)

    def _json_fp16(self, parse: cst.BaseExpression) -> str | None:
        r"""For ``parser.parse_json_file(path)`` of files the project ships: where they say fp16
        (the setting, file and line, when every file it may read does), or ``""``
        when they pick another precision; None for any other parse, or files that cannot be read
        or do not say (unknown)."""
        call = parse.value if isinstance(parse, cst.Subscript) else parse
        for reference in config_references(self.context):
            if reference.node is not call or reference.reader != TRAINING_ARGUMENTS_READER:
                continue
            if not reference.known:
                return None
            every = [precision_facts(c, TRAINING_ARGUMENTS_FILE) for c in reference.configs]
            picked = {facts.precision for facts in every}
            if None in picked:
                return None
            if picked != {FP16}:
                return ""
            setting = next(s for s in every[0].evidence if s.value is True)
            return describe_setting(self.context, reference.configs[0], setting)
        return None

    def _deepspeed_engines(self) -> Iterator[Fp16Site]:
        """``deepspeed.initialize(model=model, config=...)`` whose config says fp16 (a JSON the
        project ships, a dict): the engine trains that model in fp16 with its own loss scaler."""
        if "initialize" not in self.context.source:
            return  # no engine to read: the configs are read only for a file that builds one
        for engine in precision_engines(self.context):
            if engine.framework != DEEPSPEED_ENGINE or engine.precision != FP16:
                continue
            model = keyword(engine.node, "model") or positional(engine.node, 1)
            found = self.model_in(model.value, engine.node) if model is not None else None
            if found is not None:
                yield Fp16Site(
                    engine.node,
                    engine.source,
                    "set `bf16.enabled: true` (and `fp16.enabled: false`) in the DeepSpeed config",
                    *found,
                )

    def _trainers_of(
        self,
        node: cst.CSTNode,
        what: str,
        receiver: tuple[cst.CSTNode, str | None],
        switch: SwitchOn,
        requires: frozenset[Fact],
        fix: str = "use `bf16=True`",
    ) -> Iterator[Fp16Site]:
        """The site of the first Trainer handed the training arguments ``receiver`` made (the
        expression that made them and the name it is bound to; see `is_receiver`), with the
        model that Trainer trains."""
        for trainer in self.calls:
            if not self._is_trainer(trainer):
                continue
            args = keyword(trainer, "args") or positional(trainer, 1)
            if args is None or not is_receiver(self.index, args.value, *receiver):
                continue
            found = self._trainer_model(trainer)
            if found is not None:
                model, origin, checkpoint = found
                yield Fp16Site(
                    node,
                    what,
                    fix,
                    model,
                    origin,
                    switch.when,
                    switch.facts,
                    loss_scaling=True,
                    through=((trainer, "its optimizer steps through a GradScaler"),),
                    requires=requires,
                    checkpoint=checkpoint,
                )
                return

    def _is_trainer(self, call: cst.Call) -> bool:
        """``call`` builds a Trainer: a class named so, or a name bound once to one or to a
        choice between two (tevatron's ``trainer_cls = GCTrainer if args.grad_cache else
        Trainer``)."""
        name = dotted_name(call.func)
        if name is None:
            return False
        if last_part(name).endswith("Trainer"):
            return True
        bound = self.origins.bound_value(call.func)
        if bound is None:
            return False
        arms = (bound.body, bound.orelse) if isinstance(bound, cst.IfExp) else (bound,)
        return all(
            (arm_name := dotted_name(arm)) is not None and last_part(arm_name).endswith("Trainer")
            for arm in arms
        )

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
            bound = assigned_name(self.index, call)
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
            bound = assigned_name(self.index, call)
            found: tuple[str, Bf16Origin] | None = None
            for fit in self.calls:
                func = fit.func
                if not (
                    isinstance(func, cst.Attribute)
                    and func.attr.value in ("fit", "setup")
                    and is_receiver(self.index, func.value, call, bound)
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
