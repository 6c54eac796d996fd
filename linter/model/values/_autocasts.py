"""The autocasts of one module and the dtype each runs in, when the file says it statically.

An autocast's dtype is its ``dtype`` argument (keyword or second positional), or else its default:
fp16 for ``torch.cuda.amp.autocast``, bf16 for ``torch.cpu.amp.autocast``, and for
``torch.autocast``/``torch.amp.autocast`` the default of its device type (``"cpu"`` and
``"hpu"``: bf16; ``"cuda"``, ``"xpu"``, ``"mps"``: fp16 — ``torch.get_autocast_dtype`` on
torch 2.13). A dtype argument is static when it spells a dtype (``torch.bfloat16``) or is a name
that every binding in the file binds to the same static dtype (``AMP_DTYPE = torch.bfloat16``);
a parameter, a loop target, a dict lookup (nanoGPT's ``ptdtype = {...}[dtype]``) or a choice
(``torch.bfloat16 if bf16 else torch.float16``) is not.

Everything else that enters an autocast — ``accelerator.autocast()``, a helper such as
``maybe_autocast(...)``, ``torch.autocast`` passed around uncalled (``partial(torch.autocast,
...)``) — is *unknown*: its dtype is not in this file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

import libcst as cst

from linter.model.project import context_of
from linter.model.syntax import (
    BF16,
    FP16,
    ImportAliases,
    ModuleIndex,
    dotted_name,
    keyword,
    last_part,
    literal_dtype,
    positional,
    string_value,
    walk,
)
from linter.model.values._imported_values import imported_autocast


@dataclass(frozen=True, slots=True)
class AutocastSignature:
    """Where an autocast constructor takes its arguments, and its default dtype."""

    #: ``bf16``/``fp16``, or None when the default follows the device argument.
    default: str | None
    #: Positions of ``dtype``, ``enabled`` and ``device_type`` (None: not taken).
    dtype_at: int
    enabled_at: int
    device_at: int | None


_DEVICE_FIRST = AutocastSignature(None, 1, 2, 0)
_CUDA = AutocastSignature(FP16, 1, 0, None)
_CPU = AutocastSignature(BF16, 1, 0, None)

#: torch's autocast context managers, by qualified name.
AUTOCAST_SIGNATURES = {
    "torch.autocast": _DEVICE_FIRST,
    "torch.amp.autocast": _DEVICE_FIRST,
    "torch.amp.autocast_mode.autocast": _DEVICE_FIRST,
    "torch.cuda.amp.autocast": _CUDA,
    "torch.cuda.amp.autocast_mode.autocast": _CUDA,
    "torch.cpu.amp.autocast": _CPU,
    "torch.cpu.amp.autocast_mode.autocast": _CPU,
}

#: The default autocast dtype of each device type (``torch.get_autocast_dtype``, torch 2.13).
DEVICE_DEFAULT_DTYPES = {"cpu": BF16, "hpu": BF16, "cuda": FP16, "xpu": FP16, "mps": FP16}

#: Prefixes of torch's autocast *queries* (``torch.is_autocast_enabled()``), which enter nothing.
_QUERY_PREFIXES = ("is_", "get_", "set_", "clear_")

#: Bindings besides ``=``: a name bound by one of these holds a value the file does not show.
_OTHER_BINDINGS = (cst.AugAssign, cst.For, cst.AsName, cst.NamedExpr, cst.CompFor)
_OtherBinding = cst.AugAssign | cst.For | cst.AsName | cst.NamedExpr | cst.CompFor

#: How many names deep a dtype is followed (``A = B``, ``B = torch.bfloat16``).
_DEPTH = 3


@dataclass(frozen=True, slots=True)
class Autocast:
    """One place that enters an autocast."""

    #: The call (or the uncalled reference) that enters it.
    node: cst.CSTNode
    #: ``bf16``/``fp16``/``fp32`` when static; None when the file does not say.
    dtype: str | None
    #: True when it is switched off with a literal ``enabled=False`` (it runs in fp32).
    disabled: bool = False


class ModuleAutocasts:
    """Every autocast of one module, with its static dtype where the file gives one."""

    def __init__(self, index: ModuleIndex, aliases: ImportAliases) -> None:
        self._index = index
        self._aliases = aliases
        self._values: dict[str, list[cst.BaseExpression | None]] | None = None
        self._defaults_changed = False
        self._called: set[cst.CSTNode] = set()
        #: Autocasts in source order.
        self.sites: list[Autocast] = list(self._collect())

    def _collect(self) -> Iterator[Autocast]:
        # `torch.set_autocast_dtype("cpu", torch.float16)` changes the defaults: only explicit
        # dtypes count then.
        self._defaults_changed = any(
            last_part(name).startswith("set_autocast") and last_part(name).endswith("dtype")
            for call in self._index.nodes(cst.Call)
            if (name := dotted_name(call.func)) is not None
        )
        for call in self._index.nodes(cst.Call):
            name = dotted_name(call.func)
            qualified = self._aliases.qualify(name) if name is not None else None
            if qualified is None or "autocast" not in last_part(qualified).lower():
                continue  # (`ac(...)` after `from torch import autocast as ac` qualifies)
            if last_part(qualified).startswith(_QUERY_PREFIXES):
                continue
            self._called.add(call.func)
            signature = AUTOCAST_SIGNATURES.get(qualified)
            if signature is None:
                yield Autocast(call, self._imported_dtype(call))
            else:
                yield self._evaluate(call, signature)
        yield from self._imported()

    def _imported(self) -> Iterator[Autocast]:
        """Autocasts another module of the project builds, entered here by a name that does
        not say so (``with ctx:``, ``with amp():``), with the dtype that module gives them."""
        if (context := context_of(self._index)) is None or context.project is None:
            return

        for with_node in self._index.nodes(cst.With):
            for item in with_node.items:
                if isinstance(item.item, cst.Call) and item.item.func in self._called:
                    continue
                found = imported_autocast(self._index, item.item, item)
                if found is not None:
                    yield Autocast(item.item, found[0].dtype or None)

    def _imported_dtype(self, call: cst.Call) -> str | None:
        """The dtype of an autocast factory of another module called here, if it has one."""
        if (context := context_of(self._index)) is None or context.project is None:
            return None

        found = imported_autocast(self._index, call, call)
        return (found[0].dtype or None) if found is not None else None

    def evaluate(self, call: cst.Call) -> Autocast | None:
        """The autocast ``call`` enters, when it is one of torch's (any import alias)."""
        name = dotted_name(call.func)
        signature = AUTOCAST_SIGNATURES.get(self._aliases.qualify(name) if name else "")
        return self._evaluate(call, signature) if signature is not None else None

    def uncalled(self) -> list[Autocast]:
        """torch's autocasts named but not called here (``partial(torch.autocast, ...)``,
        ``ctx_cls = torch.cuda.amp.autocast``): entered elsewhere, with a dtype the file does
        not show. A walk of the whole module, so asked only when the calls leave it open."""
        found = []
        for node in walk(self._index.module):
            if node in self._called or not isinstance(node, cst.Name | cst.Attribute):
                continue
            name = dotted_name(node)
            if name is None or self._aliases.qualify(name) not in AUTOCAST_SIGNATURES:
                continue
            parent = self._index.parent.get(node)
            if isinstance(parent, cst.Attribute | cst.ImportAlias | cst.AsName | cst.Decorator):
                continue  # part of a longer name, an import, or a decorator's own call
            found.append(Autocast(node, None))
        return found

    def _evaluate(self, call: cst.Call, signature: AutocastSignature) -> Autocast:
        if any(arg.star for arg in call.args):
            return Autocast(call, None)
        enabled = keyword(call, "enabled") or positional(call, signature.enabled_at)
        disabled = (
            enabled is not None
            and isinstance(enabled.value, cst.Name)
            and enabled.value.value == "False"
        )
        dtype = keyword(call, "dtype") or positional(call, signature.dtype_at)
        if dtype is not None:
            return Autocast(call, self.static_dtype(dtype.value), disabled)
        if self._defaults_changed:
            return Autocast(call, None, disabled)
        if signature.default is not None:
            return Autocast(call, signature.default, disabled)
        device = keyword(call, "device_type") or (
            positional(call, signature.device_at) if signature.device_at is not None else None
        )
        device_name = self._static_string(device.value) if device is not None else None
        return Autocast(call, DEVICE_DEFAULT_DTYPES.get(device_name or ""), disabled)

    # -- static values -----------------------------------------------------------------------

    def static_dtype(self, node: cst.BaseExpression, depth: int = 0) -> str | None:
        """The dtype ``node`` always holds in this file, or None."""
        found = literal_dtype(node, self._aliases)
        if found is not None or depth >= _DEPTH:
            return found
        if isinstance(node, cst.IfExp):
            body = self.static_dtype(node.body, depth + 1)
            return body if body == self.static_dtype(node.orelse, depth + 1) else None
        return self._only_value(node, lambda value: self.static_dtype(value, depth + 1))

    def _static_string(self, node: cst.BaseExpression, depth: int = 0) -> str | None:
        found = string_value(node)
        if found is not None or depth >= _DEPTH:
            return found
        return self._only_value(node, lambda value: self._static_string(value, depth + 1))

    def _only_value(
        self, node: cst.BaseExpression, evaluate: Callable[[cst.BaseExpression], str | None]
    ) -> str | None:
        """What every binding of the name ``node`` in this file evaluates to, when they all
        agree; None for a name bound where the file cannot see the value (a parameter, a loop
        target) or never bound here (``args.dtype``)."""
        name = dotted_name(node)
        values = self._bound_values().get(name) if name is not None else None
        if values is None and name is not None:
            # Not bound here: a constant of another module of the project (`config.AMP_DTYPE`).
            context = context_of(self._index)
            if context is None or context.project is None:
                return None
            value = context.project.constant(context, name)
            return evaluate(value) if value is not None else None
        if not values or any(value is None for value in values):
            return None
        # No value is None (checked above); the `if` says so to mypy.
        results = {evaluate(value) for value in values if value is not None}
        return results.pop() if len(results) == 1 else None

    def _bound_values(self) -> dict[str, list[cst.BaseExpression | None]]:
        """Dotted name -> every value bound to it anywhere in the file (None: not visible)."""
        if self._values is None:
            values: dict[str, list[cst.BaseExpression | None]] = {}
            for assign in self._index.nodes(cst.Assign):
                for target in assign.targets:
                    for name, value in _targets(target.target, assign.value):
                        values.setdefault(name, []).append(value)
            for ann in self._index.nodes(cst.AnnAssign):
                annotated = dotted_name(ann.target)
                if annotated is not None:
                    values.setdefault(annotated, []).append(ann.value)
            # A loop over a tuple of kinds widens each to CSTNode; the nodes are those kinds.
            others = cast(
                "list[_OtherBinding]",
                [node for kind in _OTHER_BINDINGS for node in self._index.nodes(kind)],
            )
            for node in others:
                bound = node.name if isinstance(node, cst.AsName) else node.target
                for name, _value in _targets(bound, None):
                    values.setdefault(name, []).append(None)
            for function in self._index.nodes(cst.FunctionDef):
                params = function.params
                for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                    values.setdefault(param.name.value, []).append(None)
            self._values = values
        return self._values


def _targets(
    target: cst.BaseExpression, value: cst.BaseExpression | None
) -> list[tuple[str, cst.BaseExpression | None]]:
    """(name, value) for each name a binding target binds; tuple unpacking loses the value."""
    if isinstance(target, cst.Tuple | cst.List):
        return [pair for element in target.elements for pair in _targets(element.value, None)]
    name = dotted_name(target)
    return [(name, value)] if name is not None else []
