"""Uses of the deprecated ``torch.cuda.amp`` / ``torch.cpu.amp`` API, with their replacements.

Since torch 2.4 ``torch.cuda.amp.GradScaler``, ``autocast``, ``custom_fwd`` / ``custom_bwd`` and
their ``torch.cpu.amp`` twins are shims over ``torch.amp`` that warn on every call. A use is a
dotted name that the module's imports resolve to one of them (``torch.cuda.amp.autocast``,
``autocast`` after ``from torch.cuda.amp import autocast``, ``amp.GradScaler`` after ``import
torch.cuda.amp as amp``), with what makes it warn: a call, a decorator, or a call of a name
bound to it (`linter.model.syntax._callable_aliases`). A plain reference (``func is
torch.cuda.amp.autocast``) does not warn. `DEPRECATED` says what each becomes in ``torch.amp``,
whose signatures differ: the device comes first, so positional arguments become keywords.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst

from linter.model.syntax import (
    AliasCalls,
    ImportAliases,
    ModuleIndex,
    alias_calls,
    code_children,
    dotted_name,
    last_part,
)

#: Constructors that take the device first in ``torch.amp``: the new call is
#: ``torch.amp.<name>("<device>", <old positional args as keywords>, ...)``.
DEVICE_FIRST = "device-first"
#: Decorators that take ``device_type=`` as a keyword in ``torch.amp``.
DEVICE_KEYWORD = "device-keyword"


@dataclass(frozen=True, slots=True)
class Replacement:
    """What a deprecated name becomes in ``torch.amp``."""

    #: The device the deprecated namespace implies (``cuda`` / ``cpu``).
    device: str
    #: `DEVICE_FIRST` or `DEVICE_KEYWORD`.
    style: str
    #: The deprecated callable's positional parameters, in order (torch 2.13's shims): a
    #: positional argument becomes a keyword, because ``torch.amp``'s signatures differ.
    parameters: tuple[str, ...]


_AUTOCAST = ("enabled", "dtype", "cache_enabled")
_SCALER = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")

#: The deprecated names (torch/cuda/amp/__init__.py, torch/cpu/amp/__init__.py in torch 2.13;
#: FutureWarning since torch 2.4) and their replacements.
DEPRECATED: Mapping[str, Replacement] = {
    "torch.cuda.amp.autocast": Replacement("cuda", DEVICE_FIRST, _AUTOCAST),
    "torch.cuda.amp.GradScaler": Replacement("cuda", DEVICE_FIRST, _SCALER),
    "torch.cpu.amp.autocast": Replacement("cpu", DEVICE_FIRST, _AUTOCAST),
    "torch.cpu.amp.GradScaler": Replacement("cpu", DEVICE_FIRST, _SCALER),
    "torch.cuda.amp.custom_fwd": Replacement("cuda", DEVICE_KEYWORD, ("fwd",)),
    "torch.cuda.amp.custom_bwd": Replacement("cuda", DEVICE_KEYWORD, ("bwd",)),
}
#: The submodules that define them (``from torch.cuda.amp.grad_scaler import GradScaler``,
#: ``torch.cuda.amp.autocast_mode.autocast``): the same shims under their defining module.
_SUBMODULES = {
    "GradScaler": "grad_scaler",
    "autocast": "autocast_mode",
    "custom_fwd": "autocast_mode",
    "custom_bwd": "autocast_mode",
}
DEPRECATED = {
    **DEPRECATED,
    **{
        f"{name.rpartition('.')[0]}.{_SUBMODULES[last]}.{last}": spec
        for name, spec in DEPRECATED.items()
        if (last := name.rpartition(".")[2]) in _SUBMODULES
    },
}

#: The deprecated modules, and the modules that hold them (``from torch.cuda import amp``).
MODULES = frozenset(
    {"torch.cuda.amp", "torch.cpu.amp"}
    | {f"torch.{device}.amp.{sub}" for device in ("cuda", "cpu") for sub in _SUBMODULES.values()}
)
#: The packages ``from ... import amp`` takes the deprecated module from.
PARENTS = frozenset({"torch.cuda", "torch.cpu"})

#: A call that changes the default autocast dtype: ``torch.amp.autocast("cuda")`` follows it,
#: while ``torch.cuda.amp.autocast()`` always passes fp16, so the fix is no longer exact.
DTYPE_OVERRIDE = "set_autocast_dtype"

#: Text that shows a branch already uses the current API: ``torch.amp``, ``torch.autocast``,
#: ``torch.GradScaler``, ``from torch import GradScaler``.
CURRENT_API = re.compile(
    r"\btorch\.(amp|autocast|GradScaler)\b|\bfrom\s+torch\s+import\b[^\n]*\b(autocast|GradScaler)\b"
)


@dataclass(frozen=True, slots=True)
class Use:
    """One use of a deprecated name in the module."""

    #: The dotted expression (``torch.cuda.amp.autocast``, ``autocast``, ``amp.GradScaler``).
    expression: cst.BaseExpression
    #: Its qualified name, a key of `DEPRECATED`.
    qualified: str
    #: The call it is the function of, if any.
    call: cst.Call | None
    #: The decorator it is (bare, ``@custom_fwd``), if any.
    decorator: cst.Decorator | None
    #: The name it is bound to and that name's calls (``ac = torch.cuda.amp.autocast`` then
    #: ``with ac():``), when it is not called where written.
    alias: AliasCalls | None = None

    @property
    def invoked(self) -> bool:
        """Called or applied as a decorator, here or through a name bound to it: what warns.
        A plain reference does not (dynamo's ``func is torch.cuda.amp.autocast``, an
        annotation, an ``isinstance`` check)."""
        return self.call is not None or self.decorator is not None or self.warns_at is not None

    @property
    def warns_at(self) -> cst.Call | None:
        """The first call of the name it is bound to (a partial of it counts once bound)."""
        return self.alias.calls[0] if self.alias is not None and self.alias.calls else None

    @property
    def site(self) -> cst.CSTNode:
        """Where it is reported: the call that warns, else the reference."""
        return self.call or self.warns_at or self.expression


def head_name(node: cst.BaseExpression) -> cst.Name:
    """The name a dotted expression starts from (``torch`` of ``torch.cuda.amp.autocast``)."""
    while isinstance(node, cst.Attribute):
        node = node.value
    assert isinstance(node, cst.Name)
    return node


#: (parent type, field) pairs where a Name is a name being defined or an attribute, not a use.
_NOT_A_USE = (
    (cst.Attribute, "attr"),
    (cst.Arg, "keyword"),
    (cst.FunctionDef, "name"),
    (cst.ClassDef, "name"),
    (cst.Param, "name"),
)


def _chains(module: cst.Module) -> list[tuple[cst.BaseExpression, cst.CSTNode | None]]:
    """Every maximal dotted Name/Attribute chain outside import statements, with its parent,
    in source order (a plain pre-order walk: a libcst visitor rebuilds every node it passes;
    layout nodes, two thirds of a tree, hold no name)."""
    found: list[tuple[cst.BaseExpression, cst.CSTNode | None]] = []
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(module, None)]
    while stack:
        node, parent = stack.pop()
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            continue
        if isinstance(node, (cst.Name, cst.Attribute)) and dotted_name(node) is not None:
            if not any(
                isinstance(parent, kind) and getattr(parent, field) is node
                for kind, field in _NOT_A_USE
            ):
                found.append((node, parent))
            continue
        below = code_children(node)
        below.reverse()
        stack.extend((child, node) for child in below)
    return found


def deprecated_uses(module: cst.Module, aliases: ImportAliases, index: ModuleIndex) -> list[Use]:
    """Every dotted name of ``module`` (outside imports) that ``aliases`` resolve to a
    deprecated name, in source order."""
    uses = []
    for expression, parent in _chains(module):
        qualified = aliases.qualify(dotted_name(expression) or "")
        if qualified not in DEPRECATED:
            continue
        call = parent if isinstance(parent, cst.Call) and parent.func is expression else None
        decorator = (
            parent if isinstance(parent, cst.Decorator) and parent.decorator is expression else None
        )
        alias = alias_calls(index, expression) if call is None and decorator is None else None
        uses.append(Use(expression, qualified, call, decorator, alias))
    return uses


def deprecated_imports(statement: cst.Import | cst.ImportFrom) -> tuple[str, ...]:
    """The deprecated names (or modules) an import statement binds, qualified; empty if none."""
    if isinstance(statement, cst.Import):
        return tuple(
            name
            for alias in statement.names
            if alias.asname is not None and (name := dotted_name(alias.name) or "") in MODULES
        )
    if (
        statement.relative
        or statement.module is None
        or isinstance(statement.names, cst.ImportStar)
    ):
        return ()
    module = dotted_name(statement.module)
    qualified = [f"{module}.{dotted_name(alias.name)}" for alias in statement.names]
    return tuple(name for name in qualified if name in DEPRECATED or name in MODULES)


def local_name(alias: cst.ImportAlias) -> str:
    """The name an import binds (``amp`` of ``import torch.cuda.amp as amp``)."""
    return dotted_name(alias.asname.name if alias.asname else alias.name) or ""


def new_spelling(qualified: str) -> str:
    """How the replacement of the deprecated ``qualified`` name is called."""
    spec = DEPRECATED[qualified]
    name = last_part(qualified)
    if spec.style == DEVICE_FIRST:
        return f'torch.amp.{name}("{spec.device}", ...)'
    return f'torch.amp.{name}(device_type="{spec.device}")'
