"""Why a model cast to fp16 may still train fp32 parameters (AMP008's exclusions).

A GradScaler raises only when a parameter the optimizer steps has an fp16 gradient. A model cast
or loaded in fp16 is safe to train through one when what the optimizer actually steps is fp32:

- adapters: peft/LoRA applied to the model (``get_peft_model(model, ...)``,
  ``PeftModel.from_pretrained(model, ...)``, ``unet.add_adapter(...)``,
  ``prepare_model_for_kbit_training(model)``, any ``*lora*``/``*peft*``/``*adapter*`` call that
  takes the model or is its method) trains adapter weights that peft upcasts to fp32
  (``autocast_adapter_dtype``) over a frozen fp16 base; a 4/8-bit load is trainable only
  through such adapters. An import of peft or a ``LoraConfig`` alone applies nothing: a
  full-model ``.half()`` beside it still trains fp16 parameters;
- upcasts: ``cast_training_params(model, dtype=torch.float32)`` (diffusers), ``p.data =
  p.data.float()`` over the trainable parameters, ``model.head.float()``,
  ``model.to(torch.float32)`` as a statement;
- a frozen model: ``model.requires_grad_(False)``, ``for p in model.parameters():
  p.requires_grad = False`` (a teacher, a VAE);
- fp32 master weights: an optimizer over ``[p.detach().clone().float() for p in ...]``
  (apex-style "FP16 optimizer" loops copy fp16 gradients into them by hand).

The module-wide markers are deliberately broad: when a file may train fp32 parameters the rule
stays silent (a missed report costs less than a false alarm).
"""

from __future__ import annotations

import functools
import re

import libcst as cst

from linter.model.syntax import (
    FP32,
    Fact,
    ModuleIndex,
    PathFacts,
    children,
    dotted_name,
    keyword,
    last_part,
)
from linter.model.values._bf16_origins import Bf16Origins

#: The name of a call that applies adapters (peft, LoRA, diffusers' adapter API) to the model
#: it takes or is a method of, or upcasts its trainable parameters.
ADAPTER_CALL = re.compile(
    r"lora|peft|adapter|cast_training_params|kbit_training",
    re.IGNORECASE,
)
#: A plain switch: a dotted name (``args.quantization``, ``use_8bit``), not a call.
_FLAG = re.compile(r"(?:\w+\.)*\w+")
#: A plain adapter switch: a dotted name whose last part names adapters (``use_peft``, ``lora``).
_ADAPTER_SWITCH = re.compile(r"(?:\w+\.)*\w*(?:lora|peft|adapter)\w*", re.IGNORECASE)

#: ``PeftModel.from_pretrained(model, adapter_path)``: trained adapters loaded onto the model.
_PEFT_LOAD = re.compile(r"(?:\w+\.)*Peft\w*\.from_pretrained")

#: Methods whose calls are a training step (an fp32 cast after all of them restores nothing).
_TRAINING_METHODS = frozenset({"backward", "step", "clip_grad_norm_", "clip_grad_value_"})

#: Adapter configurations name no model: ``LoraConfig(r=8)`` applies nothing by itself.
_CONFIG_SUFFIX = "config"

#: ``from_pretrained`` keywords that load quantized weights, trainable only through adapters.
QUANTIZED_LOAD_KEYWORDS = ("load_in_8bit", "load_in_4bit", "quantization_config")

#: Calls in an optimizer's parameter expression that make fp32 copies (master weights).
_COPY_METHODS = frozenset({"float", "clone", "detach", "double", "deepcopy"})


def _root(name: str) -> str:
    """``model`` of ``self.model.head``: what two scopes may call one model."""
    return name.removeprefix("self.").partition(".")[0]


def _receiver_root(node: cst.BaseExpression) -> str | None:
    """`_root` of a module expression, through subscripts (``model[0]``, ``net.blocks[3].mlp``)."""
    while isinstance(node, cst.Attribute | cst.Subscript) and dotted_name(node) is None:
        node = node.value
    name = dotted_name(node)
    return _root(name) if name is not None else None


class Fp32Trainables:
    """Answers, per model, whether what its optimizer steps may be fp32 after all."""

    def __init__(
        self, source: str, index: ModuleIndex, origins: Bf16Origins, paths: PathFacts
    ) -> None:
        self._index = index
        self._origins = origins
        self._paths = paths
        #: Model roots adapters are applied to (see `_root`) -> the calls that apply them.
        self._adapters: dict[str, list[cst.Call]] = {}
        #: Model roots (see `_root`) cast back to fp32, in whole or in part -> the casts.
        self._upcast: dict[str, list[cst.CSTNode]] = {}
        #: Model roots -> what is frozen of them (``vae``, ``vae.encoder``; ``self.`` left out):
        #: freezing a part leaves the rest trained, unless that part is all that was cast.
        self._frozen: dict[str, list[str]] = {}
        #: Model roots some part of which is switched back on (``requires_grad_(True)``) -> those
        #: calls: a model frozen in one place and trained in another (a GAN's discriminator,
        #: toggled every step; diffusers' Sana trainer) is trained, where a run can reach both.
        self._trained: dict[str, list[cst.Call]] = {}
        #: Some ``x.data = <fp32 copy>`` that cannot be pinned on one model.
        self.upcasts_parameter_data = False
        self._collect()

    def why_fp32(
        self, model: str, origin_node: cst.CSTNode, facts: frozenset[Fact] = frozenset()
    ) -> str | None:
        """A reason the parameters ``model``'s optimizer steps may be fp32, or None (``facts``:
        what holds where the origin makes the model fp16, besides its branch conditions).
        Adapters or a quantized load that a switch turns on for some runs only are no reason:
        `switched_off` names the runs left."""
        if self.upcasts_parameter_data:
            return "the file upcasts parameter data to fp32"
        root = _root(model)
        if root in self._adapters and self._adapter_switch(root, origin_node, facts) is None:
            return f"adapters are applied to `{root}`"
        if any(self._may_follow(origin_node, cast) for cast in self._upcast.get(root, ())):
            return f"`{root}` (or part of it) is cast back to fp32"
        if self._freezes(root, origin_node) and all(
            self._paths.exclusive(origin_node, call) for call in self._trained.get(root, ())
        ):
            return f"`{root}` is frozen"
        quantized = self._quantization(origin_node)
        if quantized is not None and self._quantization_switch(quantized, facts) is None:
            return "the load is quantized"
        return None

    def _freezes(self, root: str, origin_node: cst.CSTNode) -> bool:
        """Some freeze of ``root`` covers what the origin made fp16: the whole model, or the
        part cast (``model[0].half()`` then ``model[0].requires_grad_(False)``)."""
        part = root
        if isinstance(origin_node, cst.Call) and isinstance(origin_node.func, cst.Attribute):
            part = self._text(origin_node.func.value)
        return any(
            frozen == root or part == frozen or part.startswith((f"{frozen}.", f"{frozen}["))
            for frozen in self._frozen.get(root, ())
        )

    def _text(self, node: cst.BaseExpression) -> str:
        return _root_text(self._index.module.code_for_node(node))

    def switched_off(
        self, model: str, origin_node: cst.CSTNode, facts: frozenset[Fact] = frozenset()
    ) -> tuple[Fact, ...]:
        """The switches that must be off on the runs that train ``model`` in fp16, when
        `why_fp32` finds no reason: an adapter switch, a quantization switch.

        llama-recipes' ``finetuning.py`` loads the model in fp16 when ``use_fp16`` is set,
        quantized only when ``quantization`` is, and applies peft only ``if
        train_config.use_peft:`` (both off by default): the runs without them train the fp16
        weights through the GradScaler, whose first ``unscale_`` raises.
        """
        found = []
        root = _root(model)
        if root in self._adapters:
            found.append(self._adapter_switch(root, origin_node, facts))
        quantized = self._quantization(origin_node)
        if quantized is not None:
            found.append(self._quantization_switch(quantized, facts))
        return tuple(fact for fact in found if fact is not None)

    def _adapter_switch(
        self, root: str, origin_node: cst.CSTNode, facts: frozenset[Fact]
    ) -> Fact | None:
        """A plain adapter switch (``use_peft``, ``args.lora``) that guards every adapter call
        of ``root``, in the function that made it fp16, and not the cast itself; else None."""
        calls = self._adapters[root]
        function = self._index.enclosing_function(origin_node)
        if any(self._index.enclosing_function(call) is not function for call in calls):
            return None
        return self._switch(calls, origin_node, facts, _ADAPTER_SWITCH)

    def _quantization(self, origin_node: cst.CSTNode) -> tuple[cst.Call, cst.Arg] | None:
        """The load of ``origin_node`` and its quantization argument, unless that is a literal
        ``None``/``False`` (``quantization_config=None`` quantizes nothing)."""
        load = self._index.parent.get(origin_node)
        if not isinstance(load, cst.Call):
            return None
        for name in QUANTIZED_LOAD_KEYWORDS:
            found = keyword(load, name)
            if found is not None and not _is_none_or_false(found.value):
                return load, found
        return None

    def _quantization_switch(
        self, quantized: tuple[cst.Call, cst.Arg], facts: frozenset[Fact]
    ) -> Fact | None:
        """``quantization_config=bnb_config`` where ``bnb_config = None`` and is set only
        ``if train_config.quantization:``: that switch; else None (quantized on every run)."""
        load, argument = quantized
        value = argument.value
        if not isinstance(value, cst.Name):
            return None
        bindings = self._assignments(self._index.enclosing_function(load), value.value)
        unset = [b for b in bindings if _is_none_or_false(b.value)]
        setters = [b for b in bindings if not _is_none_or_false(b.value)]
        if not unset or not setters or any(self._paths.conditions(b) for b in unset):
            return None
        return self._switch(setters, load, facts, _FLAG)

    def _switch(
        self,
        nodes: list[cst.Call] | list[cst.Assign],
        origin_node: cst.CSTNode,
        facts: frozenset[Fact],
        names: re.Pattern[str],
    ) -> Fact | None:
        """A flag (``names``) that is true on every path to each of ``nodes`` and is not known
        to hold where the model becomes fp16."""
        common: frozenset[Fact] | None = None
        for node in nodes:
            guards = self._paths.conditions(node)
            common = guards if common is None else common & guards
        at_origin = self._paths.conditions(origin_node) | facts
        for fact in sorted(common or (), key=lambda fact: fact.subject):
            plain = fact.relation == "is" and fact.value is True
            if plain and fact not in at_origin and names.fullmatch(fact.subject) is not None:
                return fact
        return None

    @functools.cached_property
    def _training_steps(self) -> list[cst.Call]:
        """Calls that train (``backward``, ``step``, clips): asked only about an fp32 cast."""
        return [
            call
            for call in self._index.nodes(cst.Call)
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in _TRAINING_METHODS
        ]

    def _may_follow(self, origin: cst.CSTNode, cast: cst.CSTNode) -> bool:
        """The fp32 cast can run after the fp16 one (a `.float()` before it, as in a script
        that times fp32 first and then casts to half, restores nothing) and before training:
        a cast after every training step of its function (diffusers' Sana trainer upcasts
        `if args.upcast_before_saving:` once the loop is done) restores nothing either."""
        if not self._paths.may_precede(origin, cast):
            return False
        function = self._index.enclosing_function(cast)
        steps = [c for c in self._training_steps if self._index.enclosing_function(c) is function]
        return not steps or any(self._paths.may_precede(cast, step) for step in steps)

    def copies_parameters(self, expression: cst.BaseExpression) -> bool:
        """An optimizer's parameters are fp32 copies (``p.detach().clone().float()``), directly
        or through a name the same function binds to such an expression."""
        function = self._index.enclosing_function(expression)
        seen: set[str] = set()
        stack: list[cst.CSTNode] = [expression]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Call):
                func = node.func
                method = func.attr.value if isinstance(func, cst.Attribute) else None
                if isinstance(func, cst.Name):
                    method = func.value
                if method in _COPY_METHODS or (
                    method == "to" and self._origins.cast_dtype(node) == FP32
                ):
                    return True
            if isinstance(node, cst.Name) and node.value not in seen:
                seen.add(node.value)
                stack += self._bound_in(function, node.value)
            stack.extend(children(node))
        return False

    def _bound_in(self, function: cst.CSTNode | None, name: str) -> list[cst.CSTNode]:
        return [assign.value for assign in self._assignments(function, name)]

    def _assignments(self, function: cst.CSTNode | None, name: str) -> list[cst.Assign]:
        """The assignments to ``name`` in ``function`` (None: at module level)."""
        return [
            assign
            for assign in self._index.nodes(cst.Assign)
            if self._index.enclosing_function(assign) is function
            and any(dotted_name(t.target) == name for t in assign.targets)
        ]

    def _collect(self) -> None:
        for call in self._index.nodes(cst.Call):
            for root in self._adapted_roots(call):
                self._adapters.setdefault(root, []).append(call)
            func = call.func
            if not isinstance(func, cst.Attribute):
                continue
            receiver = _receiver_root(func.value)
            method = func.attr.value
            if receiver is not None and (
                method == "float" or (method == "to" and self._origins.cast_dtype(call) == FP32)
            ):
                self._upcast.setdefault(receiver, []).append(call)
            elif receiver is not None and method == "requires_grad_":
                if not call.args or _is_true(call.args[0].value):
                    self._trained.setdefault(receiver, []).append(call)
                elif _turns_off(call):
                    self._frozen.setdefault(receiver, []).append(self._text(func.value))
        for assign in self._index.nodes(cst.Assign):
            for target in assign.targets:
                name = dotted_name(target.target)
                if name is None:
                    continue
                if name.endswith(".data") and self.copies_parameters(assign.value):
                    self.upcasts_parameter_data = True
                elif name.endswith(".requires_grad") and _is_false(assign.value):
                    model = self._model_iterated_for(assign)
                    if model is not None:
                        self._frozen.setdefault(_root(model), []).append(_root_text(model))

    def _adapted_roots(self, call: cst.Call) -> set[str]:
        """The models an adapter call applies to: its receiver and its arguments
        (``get_peft_model(model, config)``, ``unet.add_adapter(config)``, a trainer given
        ``peft_config=``, the elements of
        ``models = [unet, text_encoder]`` in ``cast_training_params(models)``); none for a
        config (``LoraConfig(...)``)."""
        name = dotted_name(call.func)
        if name is None:
            return set()
        last = last_part(name).lower()
        applies = (
            ADAPTER_CALL.search(last) is not None and not last.endswith(_CONFIG_SUFFIX)
        ) or _PEFT_LOAD.fullmatch(name) is not None
        # A trainer handed the adapters: `SFTTrainer(model=model, peft_config=lora_config)`.
        handed = any(
            arg.keyword is not None
            and ADAPTER_CALL.search(arg.keyword.value)
            and not (isinstance(arg.value, cst.Name) and arg.value.value == "None")
            for arg in call.args
        )
        if not (applies or handed):
            return set()
        values = [arg.value for arg in call.args]
        if isinstance(call.func, cst.Attribute):
            values.append(call.func.value)
        for value in list(values):
            if isinstance(value, cst.Name):
                for bound in self._bound_in(self._index.enclosing_function(call), value.value):
                    if isinstance(bound, cst.List | cst.Tuple):
                        values += [element.value for element in bound.elements]
            elif isinstance(value, cst.List | cst.Tuple):
                values += [element.value for element in value.elements]
        return {root for value in values if (root := _receiver_root(value)) is not None}

    def _model_iterated_for(self, statement: cst.CSTNode) -> str | None:
        """``model`` of ``for p in model.parameters(): p.requires_grad = False``."""
        for ancestor in self._index.ancestors(statement):
            if isinstance(ancestor, cst.For):
                iterable = ancestor.iter
                if (
                    isinstance(iterable, cst.Call)
                    and isinstance(iterable.func, cst.Attribute)
                    and iterable.func.attr.value in ("parameters", "named_parameters")
                ):
                    return dotted_name(iterable.func.value)
                return None
        return None


def _root_text(text: str) -> str:
    """A receiver's text without ``self.`` (what `_root` compares)."""
    return text.strip().removeprefix("self.")


def _is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _is_none_or_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value in ("None", "False")


def _is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def _turns_off(call: cst.Call) -> bool:
    """``requires_grad_(False)`` / ``requires_grad_(requires_grad=False)``."""
    return bool(call.args) and _is_false(call.args[0].value)
