"""AMP004 deprecated-amp-api."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import libcst as cst

from linter._fix import SAFE, UNSAFE, NodeFix
from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model._bindings import Bindings, bindings
from linter.model._callable_aliases import AliasCalls, alias_calls
from linter.model._dotted_names import ImportAliases, dotted_name, last_part
from linter.model._module_index import ModuleIndex, module_index
from linter.model._version_guards import old_torch_arm

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
_MODULES = frozenset(
    {"torch.cuda.amp", "torch.cpu.amp"}
    | {f"torch.{device}.amp.{sub}" for device in ("cuda", "cpu") for sub in _SUBMODULES.values()}
)
_PARENTS = frozenset({"torch.cuda", "torch.cpu"})

#: A call that changes the default autocast dtype: ``torch.amp.autocast("cuda")`` follows it,
#: while ``torch.cuda.amp.autocast()`` always passes fp16, so the fix is no longer exact.
_DTYPE_OVERRIDE = "set_autocast_dtype"

_NO_SPACE = cst.AssignEqual(
    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
)
_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


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


def _head(node: cst.BaseExpression) -> cst.Name:
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
    """Every maximal dotted Name/Attribute chain outside import statements, with its parent."""
    found: list[tuple[cst.BaseExpression, cst.CSTNode | None]] = []
    stack: list[cst.CSTNode] = []

    class Walk(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            parent = stack[-1] if stack else None
            stack.append(node)
            if isinstance(node, (cst.Import, cst.ImportFrom)):
                return False
            if isinstance(node, (cst.Name, cst.Attribute)) and dotted_name(node) is not None:
                if not any(
                    isinstance(parent, kind) and getattr(parent, field) is node
                    for kind, field in _NOT_A_USE
                ):
                    found.append((node, parent))
                return False
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            stack.pop()

    module.visit(Walk())
    return found


def _uses(module: cst.Module, aliases: ImportAliases, index: ModuleIndex) -> list[Use]:
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


def _keyword(name: str, value: cst.BaseExpression, comma: object) -> cst.Arg:
    return cst.Arg(value=value, keyword=cst.Name(name), equal=_NO_SPACE, comma=comma)  # type: ignore[arg-type]  # comma is the call's own Comma or MaybeSentinel


def _new_args(call: cst.Call | None, spec: Replacement) -> tuple[cst.Arg, ...] | None:
    """The arguments of the ``torch.amp`` call; None when they cannot be mapped for sure."""
    args = call.args if call is not None else ()
    if any(arg.star == "*" for arg in args):
        return None
    positional = [arg for arg in args if arg.keyword is None and not arg.star]
    if len(positional) > len(spec.parameters) or args[: len(positional)] != tuple(positional):
        return None
    device = cst.SimpleString(f'"{spec.device}"')
    if spec.style == DEVICE_FIRST:
        converted = [
            _keyword(name, arg.value, arg.comma)
            for name, arg in zip(spec.parameters, positional, strict=False)
        ]
        rest = list(args[len(positional) :])
        if not converted and not rest:
            return (cst.Arg(device),)
        comma = _COMMA
        if call is not None and isinstance(
            call.whitespace_before_args, cst.ParenthesizedWhitespace
        ):
            comma = cst.Comma(whitespace_after=call.whitespace_before_args)
        return (cst.Arg(device, comma=comma), *converted, *rest)
    keyword = _keyword("device_type", device, cst.MaybeSentinel.DEFAULT)
    head = list(positional)
    rest = list(args[len(positional) :])
    if rest:
        keyword = keyword.with_changes(comma=_COMMA)
    elif head and head[-1].comma == cst.MaybeSentinel.DEFAULT:
        head[-1] = head[-1].with_changes(comma=_COMMA)
    return (*head, keyword, *rest)


def _without_device(expression: cst.BaseExpression) -> cst.BaseExpression:
    """``torch.cuda.amp.X`` (or ``torch.cuda.amp.grad_scaler.X``) -> ``torch.amp.X``: the
    ``.cuda``/``.cpu`` step and any submodule removed, the root spelling kept (``th.amp.X``)."""
    assert isinstance(expression, cst.Attribute)
    node = expression.value
    while isinstance(node, cst.Attribute) and node.attr.value not in ("cuda", "cpu"):
        node = node.value
    assert isinstance(node, cst.Attribute)
    amp = cst.Attribute(value=node.value, attr=cst.Name("amp"))
    return expression.with_changes(value=amp)


def _replacement(use: Use, func: cst.BaseExpression) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """(old node, new node) for one use, calling ``func``; None for a plain reference."""
    spec = DEPRECATED[use.qualified]
    if use.call is not None:
        args = _new_args(use.call, spec)
        if args is None:
            return None
        return use.call, use.call.with_changes(func=func, args=args)
    if use.decorator is not None and spec.style == DEVICE_KEYWORD:
        args = _new_args(None, spec)
        assert args is not None
        return use.expression, cst.Call(func=func, args=args)
    return None


def _local_name(alias: cst.ImportAlias) -> str:
    return dotted_name(alias.asname.name if alias.asname else alias.name) or ""


#: One import edit and the local names whose uses it changes the meaning of.
_ImportEdit = tuple[tuple[cst.CSTNode, cst.CSTNode], tuple[str, ...]]


def _import_edits(statement: cst.Import | cst.ImportFrom) -> list[_ImportEdit] | None:
    """Point an import of deprecated names at ``torch.amp`` (its bound names unchanged)."""
    if isinstance(statement, cst.ImportFrom):
        if statement.module is None or isinstance(statement.names, cst.ImportStar):
            return None
        module = dotted_name(statement.module)
        imported = [dotted_name(alias.name) for alias in statement.names]
        bound = tuple(_local_name(alias) for alias in statement.names)
        if module in _MODULES and all(f"{module}.{name}" in DEPRECATED for name in imported):
            return [((statement.module, cst.parse_expression("torch.amp")), bound)]
        if module in _PARENTS and imported == ["amp"]:
            return [((statement.module, cst.Name("torch")), bound)]
        return None
    edits: list[_ImportEdit] = [
        ((alias.name, cst.parse_expression("torch.amp")), (_local_name(alias),))
        for alias in statement.names
        if alias.asname is not None and dotted_name(alias.name) in _MODULES
    ]
    return edits or None


#: Text that shows a branch already uses the current API: ``torch.amp``, ``torch.autocast``,
#: ``torch.GradScaler``, ``from torch import GradScaler``.
_CURRENT_API = re.compile(
    r"\btorch\.(amp|autocast|GradScaler)\b|\bfrom\s+torch\s+import\b[^\n]*\b(autocast|GradScaler)\b"
)


class CompatFallbacks:
    """Deprecated uses kept on purpose for old torch: the other branch of their ``if``,
    conditional expression or ``try`` already uses ``torch.amp``, e.g. accelerate's
    ``if is_torch_version(">=", "2.3"): torch.amp.GradScaler("cuda") else:
    torch.cuda.amp.GradScaler()`` or timm's ``try: torch.amp.GradScaler(device=device) except
    (AttributeError, TypeError): torch.cuda.amp.GradScaler()``. Rewriting them would drop the
    support for torch < 2.3 (no ``torch.amp.GradScaler``) that they exist for."""

    def __init__(self, context: ModuleContext, index: ModuleIndex) -> None:
        self._context = context
        self._index = index

    def covers(self, node: cst.CSTNode) -> bool:
        child = node
        for parent in self._index.ancestors(node):
            for other in _alternatives(parent, child):
                if _CURRENT_API.search(self._context.module.code_for_node(other)):
                    return True
            if (
                isinstance(parent, cst.If | cst.IfExp)
                and child is not parent.test
                and old_torch_arm(parent.test) == ("body" if child is parent.body else "orelse")
            ):
                return True  # `if torch_version < (1, 10): <deprecated>`
            child = parent
        return False


def _alternatives(parent: cst.CSTNode, child: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The branches that run instead of ``child``, a branch of ``parent``."""
    if isinstance(parent, (cst.If, cst.IfExp)):
        branches = (parent.body, parent.orelse)
        if child in branches:
            return tuple(b for b in branches if b is not child and b is not None)
    elif isinstance(parent, cst.Try):
        if child is parent.body:
            return tuple(parent.handlers)
        if child in parent.handlers:
            return (parent.body,)
    return ()


class DeprecatedAmpApi(Rule):
    """Using the deprecated `torch.cuda.amp` / `torch.cpu.amp` API.

    ## What it does
    Flags `torch.cuda.amp.GradScaler`, `torch.cuda.amp.autocast`, `torch.cpu.amp.GradScaler`,
    `torch.cpu.amp.autocast` and `torch.cuda.amp.custom_fwd` / `custom_bwd`, however they are
    imported: `import torch`, `from torch.cuda.amp import autocast`, `import torch.cuda.amp as
    amp`, `from torch.cuda import amp`, with any alias. Names are resolved through the file's own
    imports, so a look-alike (`my.cuda.amp.autocast`, a local function named `autocast`) is not
    reported. A spelled-out `torch.cuda.amp.autocast(...)` is reported where it is called; a name
    imported from the deprecated module (`from torch.cuda.amp import autocast`, `import
    torch.cuda.amp as amp`) is reported once, at the import, with its uses as related lines,
    because the import and every use must change together. The defining submodules
    (`torch.cuda.amp.grad_scaler.GradScaler`, `torch.cuda.amp.autocast_mode.autocast`) are the
    same shims. A name bound to a deprecated class (`ac = torch.cuda.amp.autocast`,
    `ctx = torch.cuda.amp.autocast if amp else nullcontext`, `functools.partial(
    torch.cuda.amp.autocast, dtype=...)`) is reported where that name is called, which is
    where the warning comes from; no fix is offered for it.

    Not reported: a plain reference that calls nothing (`func is torch.cuda.amp.autocast`, as
    torch's own dynamo does; an annotation), an import that is never called, and a compatibility
    fallback for old torch whose other branch already uses the current API — the `else` of
    `if torch_version >= 2.3: torch.amp.GradScaler("cuda")`, the conditional expression
    `torch.amp.GradScaler(device=d) if NEW else torch.cuda.amp.GradScaler()`, the `except` of a
    `try` that calls `torch.amp.GradScaler` or imports `from torch import GradScaler`
    (accelerate, Lightning and timm ship exactly these), and the old-torch arm of a version test
    (`if TORCH_VERSION < (1, 10):`, `if version.parse(torch.__version__) >= version.parse("2.4"):
    ... else: <old>`, `if is_torch_version("<", "2.4"):`); neither is ever rewritten by the fix.

    ## Why is this bad?
    Since torch 2.4 these names are thin deprecated shims over `torch.amp` and every call emits a
    `FutureWarning` ("`torch.cuda.amp.autocast(args...)` is deprecated. Please use
    `torch.amp.autocast('cuda', args...)` instead."); a deprecated shim is removed in a later
    release. The warning fills training logs, and projects spend a pull request per repository
    on the mechanical rename: nanoGPT (issue #635, PR #709), pytorch/tutorials (PR #3257),
    nnUNet (PR #2684), ignite (#3435), Time-Series-Library (#740).

    The rename is not only a change of module: `torch.amp.autocast(device_type, dtype, enabled,
    cache_enabled)` takes the device first, while `torch.cuda.amp.autocast(enabled, dtype,
    cache_enabled)` took `enabled` first, so `autocast(False)` must become
    `autocast("cuda", enabled=False)`, not `autocast("cuda", False)`.

    ## Example
    ```python
    from torch.cuda.amp import GradScaler, autocast

    scaler = GradScaler(2.0**14)
    with autocast():
        loss = model(x).sum()
    ```

    ## Use instead
    ```python
    from torch.amp import GradScaler, autocast

    scaler = GradScaler("cuda", init_scale=2.0**14)
    with autocast("cuda"):
        loss = model(x).sum()
    ```

    `amp-lint --fix` makes this rewrite (a safe fix): `torch.amp.GradScaler("cuda", ...)`,
    `torch.amp.autocast("cuda", ...)` (`"cpu"` for `torch.cpu.amp`),
    `torch.amp.custom_fwd(device_type="cuda", ...)` and `torch.amp.custom_bwd(device_type="cuda")`;
    the bare decorator `@custom_fwd` becomes `@custom_fwd(device_type="cuda")`. Positional
    arguments become keywords, other arguments are kept. An import is pointed at `torch.amp` and
    keeps the names it binds, so `from torch.cuda.amp import autocast` becomes
    `from torch.amp import autocast`, and every use of those names is rewritten in the same fix.
    No fix is offered where the rewrite could change the meaning: a `*args` splat, a name also
    bound elsewhere in the file (a fallback `autocast = None`), a deprecated name used other than
    by calling it (`isinstance(s, GradScaler)`), an import that also brings other names from
    `torch.cuda.amp`, a name other modules may import from this one (a package `__init__.py`, a
    name listed in `__all__`). The autocast fix is unsafe in a file that calls
    `torch.set_autocast_dtype`: the deprecated class always passes fp16 (bf16 on CPU), while
    `torch.amp.autocast` follows that setting.

    ## Options
    None: the replacement is what torch's own deprecation message asks for.

    ## Suppression
    Add `# noqa: AMP004` to the reported line (e.g. code that must still run on torch < 2.3,
    whose `torch.amp` has no `GradScaler`).

    ## References
    - the rename, one pull request per project:
      [karpathy/nanoGPT#635](https://github.com/karpathy/nanoGPT/issues/635),
      [karpathy/nanoGPT#709](https://github.com/karpathy/nanoGPT/pull/709),
      [pytorch/tutorials#3257](https://github.com/pytorch/tutorials/pull/3257),
      [MIC-DKFZ/nnUNet#2684](https://github.com/MIC-DKFZ/nnUNet/pull/2684),
      [pytorch/ignite#3435](https://github.com/pytorch/ignite/issues/3435),
      [thuml/Time-Series-Library#740](https://github.com/thuml/Time-Series-Library/issues/740)
    - the deprecation itself: `torch/cuda/amp/grad_scaler.py` and `autocast_mode.py` in torch 2.4
      and later ([torch/cuda/amp](https://github.com/pytorch/pytorch/tree/main/torch/cuda/amp))
    """

    code = "AMP004"
    name = "deprecated-amp-api"
    summary = "deprecated `torch.cuda.amp` / `torch.cpu.amp` API (FutureWarning since torch 2.4)"
    # Unsafe only for autocast in a file that calls torch.set_autocast_dtype (see the docstring).
    fix_availability = SAFE
    triggers = ("cuda.amp", "cpu.amp", "torch.cuda import", "torch.cpu import")
    valid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.float16):
    loss = model(x).sum()
"""
        ),
        Example(
            """\
from torch.amp import GradScaler, autocast

scaler = GradScaler("cuda", init_scale=2.0**14)
with autocast("cuda"):
    loss = model(x).sum()
"""
        ),
        Example(
            """\
from my.cuda.amp import autocast  # a look-alike package

with autocast():
    loss = model(x).sum()
"""
        ),
        Example(
            """\
from contextlib import contextmanager


@contextmanager
def autocast():  # a local helper that happens to share the name
    yield


with autocast():
    loss = model(x).sum()
"""
        ),
        Example(
            """\
import torch


class Net(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, x):
        return x * 2
"""
        ),
        Example(
            """\
import torch.amp as amp


class Trainer:
    def autocast(self):
        return amp.autocast("cpu", dtype=torch.bfloat16)

    def step(self, x):
        with self.autocast():
            return self.model(x)
"""
        ),
    )
    invalid = (
        Example(
            """\
import torch

scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast():
    loss = model(x).sum()
""",
            (3, 4),
        ),
        Example(
            """\
from torch.cuda.amp import GradScaler, autocast

scaler = GradScaler(2.0**14)
with autocast(enabled=use_amp):
    loss = model(x).sum()
""",
            (1,),
        ),
        Example(
            """\
import torch.cuda.amp as amp

scaler = amp.GradScaler(enabled=args.fp16)
""",
            (1,),
        ),
        Example(
            """\
from torch.cpu.amp import autocast as cpu_autocast

with cpu_autocast(dtype=torch.bfloat16):
    out = model(x)
""",
            (1,),
        ),
        Example(
            """\
import torch
from torch.cuda.amp import custom_bwd, custom_fwd


class ScaledMatmul(torch.autograd.Function):
    @staticmethod
    @custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, a, b):
        return a @ b

    @staticmethod
    @custom_bwd
    def backward(ctx, grad):
        return grad, grad
""",
            (2,),
        ),
        Example(
            """\
import torch as th

def make_scaler(config):
    return th.cuda.amp.GradScaler(*config.scaler_args)
""",
            (4,),
        ),
    )

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        index = module_index(context)
        statements = index.nodes(cst.Import) + index.nodes(cst.ImportFrom)
        aliases = ImportAliases(statements)
        imports = {s: names for s in statements if (names := _deprecated_imports(s))}
        if not imports and not any(
            name == "torch" or name.startswith("torch.") for name in aliases.aliases.values()
        ):
            return
        uses = _uses(context.module, aliases, index)
        if not imports and not uses:
            return
        scopes = bindings(index)
        fallbacks = CompatFallbacks(context, index)
        applicability = UNSAFE if _DTYPE_OVERRIDE in context.source else SAFE
        # Uses through a deprecated import are reported once, at the import, with one fix for
        # the import and all its uses (half of them rewritten would break the other half).
        through_import: dict[cst.CSTNode, list[Use]] = {s: [] for s in imports}
        for use in uses:
            head = _head(use.expression)
            if aliases.aliases.get(head.value) == "torch":
                if not use.invoked or fallbacks.covers(use.call or use.expression):
                    continue
                yield Finding(
                    use.site,
                    _message(use.qualified) + _through(use, context),
                    related=_bound_here(use),
                    fix=self._direct_fix(use, applicability),
                )
                continue
            if fallbacks.covers(use.call or use.expression):
                continue
            visible = scopes.visible(head)
            deprecated = [node for node in visible if node in through_import]
            for statement in deprecated:
                # Several bindings (a try/except fallback): reported, and `_group_fix` offers none.
                through_import[statement].append(use)
            if deprecated:
                continue
            if (
                use.invoked
                and visible
                and all(
                    isinstance(node, cst.Import | cst.ImportFrom)
                    and node not in through_import
                    and ImportAliases([node]).qualify(dotted_name(use.expression) or "")
                    in DEPRECATED
                    for node in visible
                )
            ):
                # e.g. ``from torch import cuda`` ... ``cuda.amp.autocast()``
                yield Finding(
                    use.site, _message(use.qualified) + _through(use, context), _bound_here(use)
                )
        for statement, names in imports.items():
            assert isinstance(statement, (cst.Import, cst.ImportFrom))
            group = through_import[statement]
            if fallbacks.covers(statement) or not any(use.invoked for use in group):
                continue
            fix = (
                None
                if _reexported(context, statement)
                else self._group_fix(statement, group, scopes, applicability)
            )
            related = tuple((use.site, "used here") for use in group)
            yield Finding(statement, _import_message(names), related=related, fix=fix)

    @staticmethod
    def _direct_fix(use: Use, applicability: str) -> NodeFix | None:
        pair = _replacement(use, _without_device(use.expression))
        if pair is None:
            return None
        return NodeFix(
            f"use `{_new_spelling(use.qualified)}`", (pair,), _applicability(use, applicability)
        )

    @staticmethod
    def _group_fix(
        statement: cst.CSTNode,
        group: list[Use],
        scopes: Bindings,
        applicability: str,
    ) -> NodeFix | None:
        """One fix for an import and every use of the names it binds (never half of them)."""
        assert isinstance(statement, (cst.Import, cst.ImportFrom))
        edits = _import_edits(statement)
        if edits is None:
            return None
        by_head = {id(_head(use.expression)): use for use in group}
        replacements = [pair for pair, _names in edits]
        names = {name for _pair, bound in edits for name in bound}
        for name in sorted(names):
            if scopes.binding_count(statement, name) != 1:
                return None
            for read in scopes.references(statement, name):
                use = by_head.get(id(read))
                if use is None or len(scopes.visible(read)) != 1:
                    return None
                pair = _replacement(use, use.expression)
                if pair is None:
                    return None
                replacements.append(pair)
        strictest = (
            UNSAFE if any(_applicability(u, applicability) == UNSAFE for u in group) else SAFE
        )
        return NodeFix(
            "import from `torch.amp` and pass the device", tuple(replacements), strictest
        )


def _deprecated_imports(statement: cst.Import | cst.ImportFrom) -> tuple[str, ...]:
    """The deprecated names (or modules) an import statement binds, qualified; empty if none."""
    if isinstance(statement, cst.Import):
        return tuple(
            name
            for alias in statement.names
            if alias.asname is not None and (name := dotted_name(alias.name) or "") in _MODULES
        )
    if (
        statement.relative
        or statement.module is None
        or isinstance(statement.names, cst.ImportStar)
    ):
        return ()
    module = dotted_name(statement.module)
    qualified = [f"{module}.{dotted_name(alias.name)}" for alias in statement.names]
    return tuple(name for name in qualified if name in DEPRECATED or name in _MODULES)


def _reexported(context: ModuleContext, statement: cst.Import | cst.ImportFrom) -> bool:
    """Whether other modules may import the names it binds from this one (a package
    ``__init__``, or a bound name quoted, as in ``__all__``): they would get the new signature
    unawares."""
    if context.path.endswith("__init__.py"):
        return True
    names = statement.names
    assert not isinstance(names, cst.ImportStar)
    return any(
        f"{quote}{_local_name(alias)}{quote}" in context.source
        for alias in names
        for quote in "\"'"
    )


def _through(use: Use, context: ModuleContext) -> str:
    """`` (called as `ac()`, bound at line 3)`` for a use reached through a name."""
    if use.warns_at is None or use.alias is None:
        return ""
    line = context.position(use.alias.binding).start.line
    how = "a partial of it bound" if use.alias.partial else "bound"
    return f" (called as `{use.alias.name}()`, {how} at line {line})"


def _bound_here(use: Use) -> tuple[tuple[cst.CSTNode, str], ...]:
    if use.warns_at is None or use.alias is None:
        return ()
    return ((use.alias.binding, f"`{use.alias.name}` bound here"),)


def _applicability(use: Use, applicability: str) -> str:
    return applicability if last_part(use.qualified) == "autocast" else SAFE


def _new_spelling(qualified: str) -> str:
    spec = DEPRECATED[qualified]
    name = last_part(qualified)
    if spec.style == DEVICE_FIRST:
        return f'torch.amp.{name}("{spec.device}", ...)'
    return f'torch.amp.{name}(device_type="{spec.device}")'


def _message(qualified: str) -> str:
    return (
        f"`{qualified}` is deprecated since torch 2.4 (a FutureWarning on every use); "
        f"use `{_new_spelling(qualified)}`"
    )


def _import_message(names: tuple[str, ...]) -> str:
    listed = ", ".join(f"`{name}`" for name in names)
    return (
        f"imports the deprecated {listed} (a FutureWarning on every use since torch 2.4); "
        "import from `torch.amp` and pass the device, e.g. "
        + ", ".join(f"`{_new_spelling(name)}`" for name in names if name in DEPRECATED)
    ).removesuffix(", e.g. ")
