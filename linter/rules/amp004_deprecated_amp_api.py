"""AMP004 deprecated-amp-api."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from linter._amp_api_rewrite import direct_fix, import_fix
from linter._fix import SAFE, UNSAFE
from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.syntax import CompatFallbacks, ImportAliases, bindings, dotted_name, module_index
from linter.model.values import (
    CURRENT_API,
    DEPRECATED,
    DTYPE_OVERRIDE,
    Use,
    deprecated_imports,
    deprecated_uses,
    head_name,
    local_name,
    new_spelling,
)


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

    @classmethod
    def wants_with(cls, own: str, imported: str) -> bool:
        # Every use reported is the module's own import or name: what it imports brings none.
        return cls.wants(own)

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        index = module_index(context)
        statements = index.nodes(cst.Import) + index.nodes(cst.ImportFrom)
        aliases = ImportAliases(statements)
        imports = {s: names for s in statements if (names := deprecated_imports(s))}
        if not imports and not any(
            name == "torch" or name.startswith("torch.") for name in aliases.aliases.values()
        ):
            return
        uses = deprecated_uses(context.module, aliases, index)
        if not imports and not uses:
            return
        scopes = bindings(index)
        fallbacks = CompatFallbacks(context, index, CURRENT_API)
        applicability = UNSAFE if DTYPE_OVERRIDE in context.source else SAFE
        # Uses through a deprecated import are reported once, at the import, with one fix for
        # the import and all its uses (half of them rewritten would break the other half).
        through_import: dict[cst.CSTNode, list[Use]] = {s: [] for s in imports}
        for use in uses:
            head = head_name(use.expression)
            if aliases.aliases.get(head.value) == "torch":
                if not use.invoked or fallbacks.covers(use.call or use.expression):
                    continue
                yield Finding(
                    use.site,
                    _message(use.qualified) + _through(use, context),
                    related=_bound_here(use),
                    fix=direct_fix(use, applicability),
                )
                continue
            if fallbacks.covers(use.call or use.expression):
                continue
            visible = scopes.visible(head)
            deprecated = [node for node in visible if node in through_import]
            for statement in deprecated:
                # Several bindings (a try/except fallback): reported, and `import_fix` offers none.
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
                else import_fix(statement, group, scopes, applicability)
            )
            related = tuple((use.site, "used here") for use in group)
            yield Finding(statement, _import_message(names), related=related, fix=fix)


def _reexported(context: ModuleContext, statement: cst.Import | cst.ImportFrom) -> bool:
    """Whether other modules may import the names it binds from this one (a package
    ``__init__``, or a bound name quoted, as in ``__all__``): they would get the new signature
    unawares."""
    if context.path.endswith("__init__.py"):
        return True
    names = statement.names
    assert not isinstance(names, cst.ImportStar)
    return any(
        f"{quote}{local_name(alias)}{quote}" in context.source for alias in names for quote in "\"'"
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


def _message(qualified: str) -> str:
    return (
        f"`{qualified}` is deprecated since torch 2.4 (a FutureWarning on every use); "
        f"use `{new_spelling(qualified)}`"
    )


def _import_message(names: tuple[str, ...]) -> str:
    listed = ", ".join(f"`{name}`" for name in names)
    return (
        f"imports the deprecated {listed} (a FutureWarning on every use since torch 2.4); "
        "import from `torch.amp` and pass the device, e.g. "
        + ", ".join(f"`{new_spelling(name)}`" for name in names if name in DEPRECATED)
    ).removesuffix(", e.g. ")
