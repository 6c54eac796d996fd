"""Which expressions in a module are GradScalers ("receivers" of ``get_scale()`` and friends).

Evidence, strongest first: a name or attribute assigned a GradScaler constructor (under any import
alias) or an expression already known to be one; a parameter annotated as a GradScaler; a
wrapper-owned scaler (``accelerator.scaler``, ``trainer.precision_plugin.scaler``). Weaker: a
variable merely *named* like a scaler — good enough for a zero-argument ``get_scale()`` (torch's
getter takes none, so that spelling is already specific), not for the generic ``_scale`` /
``state_dict()`` spellings.

DeepSpeed, Megatron and fairseq keep their own loss scalers (``cur_scale``, ``loss_scale``
attributes, no ``get_scale()``), so there is no wrapper-owned GradScaler of theirs to list.
"""

from __future__ import annotations

import re
from typing import cast

import libcst as cst

from linter.model.project import SCALER, ValueRecord, context_of
from linter.model.syntax import ImportAliases, ModuleIndex, dotted_name, import_aliases, last_part
from linter.model.values._imported_values import imported_values

#: Qualified names of the GradScaler constructors (ampscale's own included).
GRAD_SCALER_CONSTRUCTORS = frozenset(
    {
        "torch.GradScaler",  # re-exported at the top level since torch 2.3
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.cpu.amp.GradScaler",
        "torch.cpu.amp.grad_scaler.GradScaler",
        "torch.distributed.fsdp.ShardedGradScaler",
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
        "fairscale.optim.grad_scaler.ShardedGradScaler",
        "scaler.GradScaler",
        "ampscale.GradScaler",
    }
)

#: Position of ``enabled`` among each GradScaler constructor's positional parameters.
ENABLED_POSITION = {
    "torch.GradScaler": 5,
    "torch.amp.GradScaler": 5,
    "torch.amp.grad_scaler.GradScaler": 5,
    "torch.distributed.fsdp.ShardedGradScaler": 5,
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler": 5,
    "scaler.GradScaler": 5,
    "ampscale.GradScaler": 5,
    "torch.cuda.amp.GradScaler": 4,
    "torch.cuda.amp.grad_scaler.GradScaler": 4,
    "torch.cpu.amp.GradScaler": 4,
    "torch.cpu.amp.grad_scaler.GradScaler": 4,
    "fairscale.optim.grad_scaler.ShardedGradScaler": 4,
}

#: ampscale's own GradScaler: only it has ``peek_scale()`` and ``step_skipped()``.
AMPSCALE_CONSTRUCTORS = frozenset({"scaler.GradScaler", "ampscale.GradScaler"})

#: Class names that are GradScalers when the module defines or star-imports them.
GRAD_SCALER_CLASS_NAMES = frozenset({"GradScaler", "ShardedGradScaler"})

#: Dotted-name endings of scalers owned by training wrappers (Accelerate, Lightning, Fabric).
WRAPPER_OWNED_SUFFIXES = (
    "accelerator.scaler",
    "precision_plugin.scaler",
    "_precision.scaler",
)

#: Variable/attribute names that hold a scaler by convention (``scaler``, ``self.grad_scaler``,
#: ``gradient_scaler``...).
SCALER_LIKE_NAME = re.compile(r"^_*(grad_?|gradient_|loss_|amp_|fp16_)?scaler$", re.IGNORECASE)

_SCALER_WORD = re.compile("scaler", re.IGNORECASE)


def may_name_a_scaler(text: str) -> bool:
    """Whether ``text`` can show a GradScaler at all: every way this module recognises one — a
    constructor, a class name, a wrapper's attribute, a conventional name — spells "scaler" in
    some case. A rule about what a scaler does in an iteration needs one in sight (in the file,
    or in the project functions it calls, whose source the pre-filter reads with it)."""
    return _SCALER_WORD.search(text) is not None


def _constructs_a_class(value: cst.BaseExpression) -> bool:
    """``Something(...)`` with a capitalised callee: an object of some other class."""
    if not isinstance(value, cst.Call):
        return False
    name = dotted_name(value.func)
    return name is not None and last_part(name)[:1].isupper()


#: The ways besides ``=``, annotations and parameters that a module binds a name.
_OTHER_BINDINGS = (cst.AugAssign, cst.For, cst.AsName, cst.NamedExpr, cst.CompFor)
_OtherBinding = cst.AugAssign | cst.For | cst.AsName | cst.NamedExpr | cst.CompFor


def _bound_names(target: cst.CSTNode | None) -> list[str]:
    if isinstance(target, cst.Tuple | cst.List):
        return [name for element in target.elements for name in _bound_names(element.value)]
    name = dotted_name(target) if isinstance(target, cst.BaseExpression) else None
    return [name] if name else []


def _is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


class ScalerReceivers:
    """Decides whether an expression denotes a GradScaler, from the module's own evidence."""

    def __init__(self, index: ModuleIndex, aliases: ImportAliases) -> None:
        self._aliases = aliases
        #: Dotted names proven to hold a GradScaler.
        self.proven: set[str] = set()
        #: Dotted names assigned an object of another class (e.g. ``StandardScaler()``).
        self._other: set[str] = set()
        #: Dotted names bound to ampscale's GradScaler somewhere in the module...
        self._ampscale: set[str] = set()
        #: ...and those bound to anything else somewhere (another scaler, a loop target, an
        #: unannotated parameter): names are not scoped here, so ampscale's is proven only for
        #: a name in the first set and not in this one.
        self._not_ampscale: set[str] = set()
        #: Names bound to a GradScaler a function of another module returns: the bound node,
        #: the function's record of it, and that module's display path.
        self.imported: dict[str, tuple[cst.BaseExpression, ValueRecord, str]] = {}
        assignments = [
            (target, node.value)
            for node in index.nodes(cst.Assign)
            for target in (t.target for t in node.targets)
        ] + [
            (node.target, node.value)
            for node in index.nodes(cst.AnnAssign)
            if node.value is not None
        ]
        for node in index.nodes(cst.AnnAssign):
            name = dotted_name(node.target)
            if name and self._is_scaler_type(node.annotation.annotation):
                self.proven.add(name)
            self._record_ampscale(name, node.annotation.annotation, annotation=True)
        for function in index.nodes(cst.FunctionDef):
            for param in (*function.params.params, *function.params.kwonly_params):
                annotation = param.annotation.annotation if param.annotation else None
                if annotation is not None and self._is_scaler_type(annotation):
                    self.proven.add(param.name.value)
                self._record_ampscale(param.name.value, annotation, annotation=True)
        # A loop over a tuple of kinds widens each to CSTNode; the nodes are those kinds.
        other_bindings = cast(
            "list[_OtherBinding]",
            [node for kind in _OTHER_BINDINGS for node in index.nodes(kind)],
        )
        for binding in other_bindings:
            target = binding.name if isinstance(binding, cst.AsName) else binding.target
            for name in _bound_names(target):
                self._not_ampscale.add(name)
        # Two rounds so that `scaler = self.scaler` after `self.scaler = GradScaler()` is found
        # whatever order the two statements come in.
        for _ in range(2):
            for target, value in assignments:
                name = dotted_name(target)
                if name is None:
                    continue
                self._record_ampscale(name, value)
                if self._value_is_scaler(value):
                    self.proven.add(name)
                elif _constructs_a_class(value):
                    self._other.add(name)
        if (context := context_of(index)) is not None and context.project is not None:
            self._add_imported(index)

    def _add_imported(self, index: ModuleIndex) -> None:
        """Receivers that hold a GradScaler of another module of the project: a global
        imported from it (``from utils import scaler``), an attribute a base class defined
        there binds (``self.scaler = GradScaler()`` in ``trainer_base.py``)."""

        values = imported_values(index)
        scalers = frozenset({SCALER})
        seen: set[str] = set()
        for call in index.nodes(cst.Call):
            func = call.func
            receiver = dotted_name(func.value) if isinstance(func, cst.Attribute) else None
            if receiver is None or receiver in self.proven or receiver in seen:
                continue
            seen.add(receiver)
            if receiver.startswith("self."):
                found = values.of_attribute(receiver, call, scalers)
            else:
                found = values.of_name(receiver, scalers)
            if found is not None:
                self.proven.add(receiver)
        # `optimizer, scaler, scheduler = init_opt(...)`: a function of another module that
        # returns a GradScaler (alone, or at that place of its tuple).
        wanted = seen - self.proven
        for assign in index.nodes(cst.Assign) if wanted else ():
            if not isinstance(assign.value, cst.Call) or len(assign.targets) != 1:
                continue
            target = assign.targets[0].target
            places: list[tuple[int | None, cst.BaseExpression]] = [(None, target)]
            if isinstance(target, cst.Tuple | cst.List):
                places = [(i, e.value) for i, e in enumerate(target.elements)]
            for place, bound in places:
                name = dotted_name(bound)
                if name not in wanted:
                    continue
                found = values.of_call(assign.value, place, scalers)
                if found is not None:
                    self.proven.add(name)
                    self.imported[name] = (bound, *found)

    def is_constructor_call(self, node: cst.CSTNode) -> bool:
        """``GradScaler(...)`` under any alias, not explicitly disabled with ``enabled=False``."""
        if not isinstance(node, cst.Call):
            return False
        name = dotted_name(node.func)
        if name is None:
            return False
        qualified = self._aliases.qualify(name)
        if qualified not in GRAD_SCALER_CONSTRUCTORS and not (
            qualified == name and name in GRAD_SCALER_CLASS_NAMES
        ):
            return False
        # torch's get_scale() on a disabled scaler returns 1.0 without touching the device.
        return not any(
            arg.keyword is not None and arg.keyword.value == "enabled" and _is_false(arg.value)
            for arg in node.args
        )

    def is_ampscale(self, name: str) -> bool:
        """True when the dotted name ``name`` holds ampscale's GradScaler (not torch's or a
        framework's): only it has ``peek_scale()`` and ``step_skipped()``. A name that the module
        also binds to something else is not."""
        return name in self._ampscale and name not in self._not_ampscale

    def _record_ampscale(
        self, name: str | None, value: cst.BaseExpression | None, *, annotation: bool = False
    ) -> None:
        """File ``name`` as bound to ampscale's GradScaler (a call, an alias of a name already
        known to hold one, or an annotation naming the class) or to something else."""
        if name is None:
            return
        if annotation and value is not None:
            value = cst.Call(func=value)  # `x: GradScaler` says what `x = GradScaler()` does
        if value is not None and self._is_ampscale_value(value):
            self._ampscale.add(name)
        else:
            self._not_ampscale.add(name)

    def _is_ampscale_value(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Call):
            name = dotted_name(value.func)
            return name is not None and self._aliases.qualify(name) in AMPSCALE_CONSTRUCTORS
        name = dotted_name(value)
        return name is not None and name in self._ampscale

    def proves(self, node: cst.BaseExpression) -> bool:
        """True when the module shows that ``node`` holds a GradScaler."""
        name = dotted_name(node)
        if name is None:
            return False
        if name in self.proven:
            return True
        return any(name == s or name.endswith("." + s) for s in WRAPPER_OWNED_SUFFIXES)

    def looks_like(self, node: cst.BaseExpression) -> bool:
        """Proven, or named like a scaler and never assigned anything else in this module."""
        if self.proves(node):
            return True
        name = dotted_name(node)
        return (
            name is not None
            and name not in self._other
            and SCALER_LIKE_NAME.match(last_part(name)) is not None
        )

    def is_scaler_method_call(self, node: cst.CSTNode, methods: frozenset[str]) -> bool:
        """``<scaler>.<one of methods>(...)`` on an expression that `looks_like` a scaler; the
        predicate `PerStepAnalysis` takes."""
        func = node.func if isinstance(node, cst.Call) else None
        return (
            isinstance(func, cst.Attribute)
            and func.attr.value in methods
            and self.looks_like(func.value)
        )

    def is_scaler_value(self, value: cst.BaseExpression) -> bool:
        """``value`` evaluates to a GradScaler (a constructor, an alias of one, either arm of a
        choice): what binding a name to it proves."""
        return self._value_is_scaler(value)

    def _value_is_scaler(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.IfExp):
            return self._value_is_scaler(value.body) or self._value_is_scaler(value.orelse)
        if isinstance(value, cst.BooleanOperation):
            return self._value_is_scaler(value.left) or self._value_is_scaler(value.right)
        return self.is_constructor_call(value) or self.proves(value)

    def _is_scaler_type(self, annotation: cst.BaseExpression) -> bool:
        if isinstance(annotation, cst.SimpleString):
            text = annotation.evaluated_value
            return isinstance(text, str) and last_part(text.strip()) in GRAD_SCALER_CLASS_NAMES
        if isinstance(annotation, cst.BinaryOperation):
            return self._is_scaler_type(annotation.left) or self._is_scaler_type(annotation.right)
        if isinstance(annotation, cst.Subscript):
            return any(
                isinstance(element.slice, cst.Index) and self._is_scaler_type(element.slice.value)
                for element in annotation.slice
            )
        name = dotted_name(annotation)
        if name is None:
            return False
        qualified = self._aliases.qualify(name)
        return qualified in GRAD_SCALER_CONSTRUCTORS or (
            qualified == name and name in GRAD_SCALER_CLASS_NAMES
        )


def scaler_receivers(index: ModuleIndex) -> ScalerReceivers:
    """The module's `ScalerReceivers`, built once and shared by every rule that asks."""
    return index.shared(
        ScalerReceivers,
        lambda: ScalerReceivers(index, import_aliases(index)),
    )
