"""AMP010 grad-scaler-with-bf16-autocast."""

from __future__ import annotations

import os.path
from collections.abc import Iterable

import libcst as cst

from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.settings import (
    ConfigDtype,
    ConfigDtypes,
    asks_for_fp16,
    config_references,
    runs_choosing,
)
from linter.model.syntax import (
    BF16,
    ImportAliases,
    ModuleIndex,
    dotted_name,
    import_aliases,
    keyword,
    module_index,
    path_facts,
    positional,
    walk,
)
from linter.model.values import (
    Autocast,
    ModuleAutocasts,
    for_another_precision,
    scaler_receivers,
    used_for_another_precision,
)


class GradScalerWithBf16Autocast(Rule):
    """A GradScaler in a file whose every autocast runs in bf16.

    ## What it does
    Flags a `GradScaler(...)` constructor (torch's, `ShardedGradScaler` or ampscale's, under any
    import alias) in a file where every autocast runs in bf16 and there is at least one:
    `torch.autocast(..., dtype=torch.bfloat16)`, `torch.amp.autocast`, `torch.cuda.amp.autocast`
    with a bf16 dtype, `torch.cpu.amp.autocast()` and `torch.autocast("cpu")` (bf16 is the CPU
    default). The dtype may be spelled out or held in a name that every binding in the file binds
    to `torch.bfloat16` (`AMP_DTYPE = torch.bfloat16`). The autocasts are related locations.

    A dtype picked by a command-line flag counts too: `dtype=ptdtype` where
    `ptdtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]` (nanoGPT's
    table), a conditional on the flag, `getattr(torch, args.dtype)` or the flag itself. A flag
    whose `default` is bf16 is the plain case (a run with no flags scales needlessly); a flag
    with bf16 among its `choices` only is reported with the condition first ("when run with
    --dtype bfloat16, ..."). The flag's other choices are not fp16 requests of their own, and
    a table's entry for the run without the flag (`None: torch.float32`, glue-factory's) is no
    choice. The two arms of `torch.amp.GradScaler(...) if hasattr(torch.amp, "GradScaler")
    else torch.cuda.amp.GradScaler(...)` are one scaler, reported once.

    Not reported:

    - a scaler that is off, or on only for another precision: `enabled=False`,
      `enabled=args.fp16`, `enabled=not args.bf16`, `enabled=(dtype == "float16")` — nanoGPT's
      shape — or switched by a setting of its own (`enabled=cfg.use_grad_scaler`). A plain AMP
      switch (`enabled=args.amp`, `enabled=torch.cuda.is_available()`) or a bf16 one
      (`enabled=use_bf16`) is on exactly when the bf16 autocasts run, and is reported;
    - a scaler created or used under a branch that picks a precision
      (`if amp_dtype == torch.float16:`, `if args.fp16:`, `scaler = GradScaler() if fp16 else
      None`);
    - a file with any autocast whose dtype it does not show: a dtype chosen at run time that
      no declared flag decides (`dtype=amp_dtype` from a `store_true` switch or a function's
      parameter), an fp16 or default-fp16 autocast
      (`torch.autocast("cuda")`, `torch.cuda.amp.autocast()`), a device type held in a variable,
      `accelerator.autocast()` or another library's helper, `torch.autocast` passed around
      uncalled; autocasts switched off with `enabled=False` do not count;
    - a file that asks for fp16 another way (`torch.float16`, `.half()`, `fp16=...`,
      `"16-mixed"`): the scaler may be for that path. A model cast to fp16 that the scaler
      steps is AMP008's finding, not a silence: its fp16 gradients make `unscale_` raise
      whatever the autocast computes in, so AMP008 owns a `.half()` model under a GradScaler
      next to bf16 autocast.

    ## Why is this bad?
    Loss scaling exists for fp16, whose narrow exponent range (down to about 6e-8) flushes small
    gradients to zero. bf16 has fp32's exponent range, so its gradients do not underflow and
    need no scaling — PyTorch's AMP recipe and Lightning's and Accelerate's bf16 modes use no
    GradScaler. The scaler then only adds work every step: multiplying the loss, unscaling and
    checking every gradient for inf/NaN and, with a non-fused optimizer, a host-device sync in
    every `scaler.step()` (it reads the found-inf flag to decide whether to step), which stalls
    the GPU pipeline. It also hides intent: a reader assumes fp16 somewhere.

    ## Example
    ```python
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Use instead
    With bf16, backpropagate and step directly:
    ```python
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    or keep one scaler for an fp16 fallback, on only when fp16 is chosen:
    `torch.amp.GradScaler("cuda", enabled=(amp_dtype == torch.float16))`.

    ## Suppression
    Add `# noqa: AMP010` to the reported line when the scaler is kept on purpose (e.g. the same
    code switches to fp16 through an autocast in another module).

    ## References
    - torch's `GradScaler.step()` reads the found-inf flag with `.item()` before a non-fused
      optimizer steps ([torch/amp/grad_scaler.py](https://github.com/pytorch/pytorch/blob/main/torch/amp/grad_scaler.py),
      `_maybe_opt_step`)
    - Lightning refuses a scaler with bf16: "`precision='bf16-mixed'` does not use a scaler"
      ([lightning/fabric/plugins/precision/amp.py](https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/fabric/plugins/precision/amp.py));
      Accelerate creates its GradScaler only for `mixed_precision="fp16"`
      ([accelerate/accelerator.py](https://github.com/huggingface/accelerate/blob/main/src/accelerate/accelerator.py))
    - `examples/bf16_autocast_with_grad_scaler.py` in this repository: the same bf16 run with and
      without the scaler ends at the same loss; the scaler's step syncs
    """

    code = "AMP010"
    name = "grad-scaler-with-bf16-autocast"
    summary = "a GradScaler where every autocast is bf16: needless scaling and a sync per step"
    # A finding needs a GradScaler constructor and an autocast.
    triggers = ("GradScaler",)
    valid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.float16):
    loss = loss_fn(model(x), y)
scaler.scale(loss).backward()
"""
        ),
        Example(
            """\
import torch

dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = torch.amp.autocast(device_type="cuda", dtype=ptdtype)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda", enabled=args.fp16)
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = model(batch).loss
scaler.scale(loss).backward()
"""
        ),
        Example(
            """\
import torch

amp_dtype = torch.bfloat16 if args.bf16 else torch.float16
scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=amp_dtype):
    loss = model(batch).loss
scaler.scale(loss).backward()
"""
        ),
        Example(
            """\
import torch

if args.precision == "fp16":
    scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = model(batch).loss
"""
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
with accelerator.autocast():
    loss = model(batch).loss
with torch.autocast("cuda", dtype=torch.bfloat16):
    val_loss = model(val_batch).loss
"""
        ),
    )
    invalid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
            (3,),
        ),
        Example(
            """\
from torch.cuda.amp import GradScaler, autocast

AMP_DTYPE = torch.bfloat16
scaler = GradScaler()
with autocast(dtype=AMP_DTYPE):
    loss = model(batch).loss
scaler.scale(loss).backward()
""",
            (4,),
        ),
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cpu")
with torch.autocast("cpu"):  # CPU autocast defaults to bf16
    loss = model(batch).loss
scaler.scale(loss).backward()
""",
            (3,),
        ),
        Example(
            """\
import torch


class Trainer:
    def __init__(self, model):
        self.model = model
        self.scaler = torch.amp.GradScaler("cuda", enabled=True)

    def train_step(self, batch):
        with torch.amp.autocast("cuda", torch.bfloat16):
            loss = self.model(batch).loss
        self.scaler.scale(loss).backward()
""",
            (7,),
        ),
        Example(
            """\
import torch

scaler = torch.cpu.amp.GradScaler()
with torch.cpu.amp.autocast():
    loss = model(batch).loss
with torch.autocast("cuda", enabled=False):  # off: fp32, not an fp16 autocast
    extra = head(loss)
scaler.scale(loss + extra).backward()
""",
            (3,),
        ),
        Example(
            """\
import lightning as L
import torch


class LitModel(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.scaler = torch.amp.GradScaler("cuda")

    @torch.autocast("cuda", dtype=torch.bfloat16)
    def forward(self, x):
        return self.net(x)
""",
            (9,),
        ),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        return "GradScaler" in text and "autocast" in text

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        index = module_index(context)
        aliases = import_aliases(index)
        receivers = scaler_receivers(index)
        scalers = [c for c in index.nodes(cst.Call) if receivers.is_constructor_call(c)]
        # Scalers a function of another module returns (`opt, scaler = init_opt(...)`), when
        # that module does not create them only for another precision.
        imported = [found for found in receivers.imported.values() if found[1].precision != "other"]
        if not scalers and not imported:
            return
        module_autocasts = ModuleAutocasts(index, aliases)
        autocasts = [a for a in module_autocasts.sites if not a.disabled]
        from_configs = _config_bf16(context, index, aliases, autocasts)
        others = [a for a in autocasts if a.dtype != BF16 and a not in from_configs]
        if not autocasts or any(a.dtype is not None for a in others):
            return
        unknown = [a.node for a in others if isinstance(a.node, cst.Call)]
        flags = runs_choosing(index, unknown, BF16) if len(unknown) == len(others) else None
        if flags is None or module_autocasts.uncalled():
            return
        run, decided = flags
        when = f"{run.when}, " if run is not None else ""
        chosen = ("by a flag, bf16 by default" if run is None else "by a flag") if unknown else None
        evaluated = (*decided, *(e for found in from_configs.values() for e in found.evaluated))
        if asks_for_fp16(index, aliases, {n for e in evaluated for n in walk(e)}):
            return
        paths = path_facts(index)
        related = tuple((a.node, "bf16 autocast") for a in autocasts)
        related += tuple(_config_related(context, from_configs))
        for call in scalers:
            if for_another_precision(index, aliases, paths, call) or _fallback(
                index, call, scalers
            ):
                continue
            message = _message(context, call, autocasts, from_configs, chosen)
            yield Finding(call, when + message, related=related)
        for bound, record, path in imported:
            if used_for_another_precision(index, paths, dotted_name(bound) or ""):
                continue
            returner = record.holder.partition("[")[0]
            origin = f" (the GradScaler `{returner}` returns, {path}:{record.line})"
            message = _message(context, bound, autocasts, from_configs, chosen, origin)
            yield Finding(bound, when + message, related=related)


def _fallback(index: ModuleIndex, call: cst.Call, scalers: list[cst.Call]) -> bool:
    """``call`` is the other arm of ``GradScaler(...) if hasattr(torch.amp, "GradScaler") else
    torch.cuda.amp.GradScaler(...)``: the same scaler on an older torch, reported once."""
    parent = index.parent.get(call)
    return isinstance(parent, cst.IfExp) and parent.orelse is call and parent.body in scalers


def _config_bf16(
    context: ModuleContext, index: ModuleIndex, aliases: ImportAliases, autocasts: list[Autocast]
) -> dict[Autocast, ConfigDtype]:
    """The autocasts whose dtype comes from a config where every loadable config picks bf16."""
    unknown = [a for a in autocasts if a.dtype is None and isinstance(a.node, cst.Call)]
    references = config_references(context) if unknown else ()
    if not references:
        return {}
    dtypes = ConfigDtypes(index, aliases, references)
    found = {}
    for autocast in unknown:
        argument = keyword(autocast.node, "dtype") or positional(autocast.node, 1)  # type: ignore[arg-type]
        verdict = dtypes.of(argument.value) if argument is not None else None
        if verdict is not None and verdict.dtypes == {BF16}:
            found[autocast] = verdict
    return found


def _config_related(
    context: ModuleContext, from_configs: dict[Autocast, ConfigDtype]
) -> list[tuple[cst.CSTNode, str]]:
    related = {}
    for verdict in from_configs.values():
        for read in verdict.reads:
            files = sorted({_relative(context, config.path) for config, _v in read.values})
            related[read.reference.node] = f"loads {', '.join(files)}: `{read.key}` is bf16 in each"
    return list(related.items())


def _relative(context: ModuleContext, path: str) -> str:
    folder = os.path.dirname(os.path.abspath(context.path))
    relative = os.path.relpath(path, folder)
    return path if relative.startswith("..") else relative


def _message(
    context: ModuleContext,
    call: cst.CSTNode,
    autocasts: list[Autocast],
    from_configs: dict[Autocast, ConfigDtype],
    chosen: str | None,
    origin: str = "",
) -> str:
    code = context.module.code_for_node(call)
    if len(code) > 60:
        code = code[:57] + "..."
    lines = sorted({context.position(a.node).start.line for a in autocasts})
    where = "line " + ", ".join(map(str, lines[:3])) + (", ..." if len(lines) > 3 else "")
    if from_configs:
        keys = sorted({f"`{read.key}`" for v in from_configs.values() for read in v.reads})
        where += f"; the dtype comes from {', '.join(keys)} and every shipped config picks bf16"
    elif chosen is not None:
        where += f"; the dtype is chosen {chosen}"
    return (
        f"`{code}`{origin} scales the loss, but every autocast in this file runs in bf16 "
        f"({where}): bf16 has fp32's exponent range and needs no loss scaling, so the scaler "
        "only adds work — and, with a non-fused optimizer, a host-device sync in every "
        "`scaler.step()`; drop it (`loss.backward()`, `optimizer.step()`) or enable it only for "
        "fp16"
    )
