"""fp16 sites that a GradScaler makes: the model whose optimizer a scaler steps, in this function,
in a helper handed the scaler, or behind ``accelerator.prepare``.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from linter.model.syntax import (
    BF16,
    FP16,
    Fact,
    argument_for,
    descendants,
    dotted_name,
    keyword,
    positional,
)
from linter.model.values._fp16_site_search import (
    Fp16Site,
    Fp16SiteSearch,
    assigned_name,
    holder_names,
    is_receiver,
    unscales_fp16,
)
from linter.model.values._model_origins import Bf16Origin
from linter.model.values._scaler_receivers import scaler_receivers


class ScalerSites(Fp16SiteSearch):
    """`Fp16SiteSearch` with the sites of the module's GradScalers."""

    def _grad_scalers(self) -> Iterator[Fp16Site]:
        receivers = scaler_receivers(self.index)
        bf16_autocast = None
        for call in self.calls:
            if not receivers.is_constructor_call(call):
                continue
            if self.origins.target == FP16 and unscales_fp16(call):
                continue  # AMP008's error is `unscale_` refusing fp16 gradients
            scaler = assigned_name(self.index, call)
            enabled = self._enabled(call)
            requires: frozenset[Fact] = frozenset()
            flag = keyword(call, "enabled")
            if enabled is None and flag is not None:
                enabled = self._runtime_switch(flag.value)
                requires = enabled.facts if enabled is not None else requires
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
                and is_receiver(self.index, func.value, accelerator, bound)
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
            if unscales_fp16(scaler_call):
                continue
            scaler = assigned_name(self.index, scaler_call)
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
        pending = holder_names(params.value)
        seen: set[str] = set()
        while pending and found is None and len(seen) < 8:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            for node in self._fillers(name, function, at):
                source = node.iter if isinstance(node, cst.For) else node.value  # type: ignore[attr-defined]  # a filler that is no loop is an assignment
                found = found or self.model_in(source, node)
                pending |= holder_names(source)
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
                name in holder_names(receiver)
                and self.index.order[append] < order
                and self.index.enclosing_function(append) is function
            ):
                loop = next(
                    (a for a in self.index.ancestors(append) if isinstance(a, cst.For)), None
                )
                if loop is not None:
                    fillers.append(loop)
        return fillers
