"""AMP001 get-scale-every-step."""

from __future__ import annotations

import re
from collections.abc import Iterable

import libcst as cst

from linter._fix import UNSAFE, NodeFix
from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.steps import (
    DeviceSyncs,
    PerStepAnalysis,
    ScaleRead,
    passed_scaler_wrapper,
    scale_reads,
    skip_detections,
)
from linter.model.syntax import dotted_name, import_aliases, module_index
from linter.model.values import ScalerReceivers, scaler_receivers

#: Text every spelling of a read matches; files without it are not walked at all.
_MAYBE_A_READ = re.compile(
    r"get_scale\s*\(\s*\)|_scale\s*\.\s*(?:item|tolist)\s*\(|"
    r"float\s*\([\w.\s]*_scale\s*\)|state_dict\s*\(\s*\)\s*\[\s*[\"']scale[\"']"
)


class GetScaleEveryStep(Rule):
    """Reading the loss scale on every training step.

    ## What it does
    Flags code that copies a GradScaler's loss scale to the host — `scaler.get_scale()`, and the
    same sync spelled `scaler._scale.item()`, `float(scaler._scale)` or
    `scaler.state_dict()["scale"]` — where it runs on every training step: in a loop body, in a
    function or method that this file calls from a loop (followed through the file's own calls),
    in a framework hook that runs every step (Lightning `training_step`,
    `on_before_optimizer_step`, `on_train_batch_end`...; Hugging Face `TrainerCallback.on_step_end`;
    detectron2 `after_step`; MosaicML Composer `batch_end`, `after_backward`... in a class deriving
    from a `...Callback` or `...Algorithm`), in an optimizer wrapper's `step()` (a class deriving
    from an `...Optimizer`, or one that calls `<scaler>.step(...)`), or in a function that steps
    the GradScaler itself, once per call (a `scaler.step(...)` in no loop of its own): such a
    function is one training step whoever calls it — a model's `optimize_parameters(current_iter)`
    that the loop reaches through a registry (`model = build_model(opt)`), a wrapper's
    `backward_clip_step()` — and what runs in it, or in what it calls, runs every step.

    The scaler is recognised from the file itself: a name or attribute assigned
    `torch.GradScaler`, `torch.amp.GradScaler`, `torch.cuda.amp.GradScaler`, `ShardedGradScaler` or
    ampscale's
    `GradScaler` under any import alias, a parameter annotated as one, or a wrapper-owned scaler
    (`accelerator.scaler`, `trainer.precision_plugin.scaler`). A zero-argument `get_scale()` is
    also reported on a variable named like a scaler (`scaler`, `grad_scaler`, `self.loss_scaler`)
    because torch's getter takes no arguments, which already rules out look-alikes; the other
    spellings need the stronger evidence. Across the project, a parameter is such evidence when
    every caller hands it an object of one project class that builds a GradScaler and defines
    `state_dict` (`loss_scaler.state_dict()["scale"]` in an engine's `train_one_epoch`, the
    wrapper built in the training script).

    Not reported: a read under a periodic guard (`if step % log_every == 0:`,
    `if self.control.should_log:`, a wall-clock check, an early `return`/`continue` on the off
    steps, an early return on a predicate method — `if not self.should_update_logs(state):
    return` — that this file defines as a periodic test or that is inherited), a read on the
    error path of a non-finite check (`if torch.isnan(grad_norm):` — it
    runs on the rare overflow steps only), a read that runs once (`if step == 0:`, before or
    after the loop, in a loop over epochs, in `train()` beside the loop that steps the scaler,
    `on_train_epoch_end`), a read cached on the first call — under a test that the value is
    still unset whose body stores it (`if self._scale is None: self._scale = ...`,
    `if not hasattr(self, "base"):`, a first-pass flag set in the body), after an early
    `return` while it is cached, or in a `functools.cache`/`lru_cache` function — unless
    something unsets it again every step (`self._scale = None` in a per-step hook), a loop
    over a collection (`.items()`, `.parameters()`,
    `param_groups`), HF's `on_log` (it runs every `logging_steps`), and a read after an
    unconditional `torch.cuda.synchronize()` in the same iteration (the host already waited for
    the device; a `loss.item()` does not count). A gradient-accumulation
    guard (`(i + 1) % accum_steps == 0`) and configuration flags (`if args.amp:`,
    `if scaler is not None:`) still run every step. How a modulo guard is told apart: a name in
    the test that says accumulation (`accum`, `grad_acc`, `update_freq`, `micro_batch`,
    `sync_gradients`) makes it per-step; any other modulo (`log_every`, `cfg.log_interval`, a
    literal `100`, an unfamiliar name) is treated as periodic — a missed report costs less than
    a false alarm.

    ## Why is this bad?
    The scale lives on the GPU. Reading it is a device-to-host copy: the CPU waits until every
    queued kernel has finished, so the next step's kernels cannot be queued ahead and the GPU
    idles. Once per step, that stall is paid all run long. The most common case compares the
    scale before and after `update()` to learn whether the optimizer step was skipped — two
    syncs per step for one bit of information.

    ## Example
    ```python
    for step, (x, y) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scale_before = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        if scaler.get_scale() >= scale_before:
            scheduler.step()
    ```

    ## Use instead
    Read the scale only at a log interval, and ask whether the step was skipped without a sync:
    ```python
    for step, (x, y) in enumerate(loader):
        ...
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()  # ampscale: scaler.step_skipped(optimizer) is a device-side flag
        if step % log_every == 0:
            print(scaler.get_scale())
    ```

    ## Suppression
    Add `# noqa: AMP001` to the reported line when the sync is intended (e.g. a debugging run).

    ## References
    - torch's own `GradScaler.get_scale` docstring: "get_scale incurs a CPU-GPU sync"
      ([torch/amp/grad_scaler.py](https://github.com/pytorch/pytorch/blob/main/torch/amp/grad_scaler.py))
    - PyTorch's CUDA semantics notes on why a host read stalls the queue:
      [Asynchronous execution](https://docs.pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution)
    """

    code = "AMP001"
    name = "get-scale-every-step"
    summary = "the loss scale is copied to the host (a device sync) on every training step"
    # On ampscale's scaler, get_scale() becomes peek_scale(), which may lag a step.
    fix_availability = UNSAFE
    # Every spelling contains `get_scale`, `._scale` or the quoted key `"scale"`.
    triggers = ("get_scale", "._scale", '"scale"', "'scale'")
    valid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for step, (x, y) in enumerate(loader):
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()
    if step % log_every == 0:
        print(scaler.get_scale())
print("final scale", scaler.get_scale())
"""
        ),
        Example(
            """\
import lightning as L


class Module(L.LightningModule):
    def on_train_epoch_end(self):
        scaler = self.trainer.precision_plugin.scaler
        self.log("loss_scale", scaler.get_scale())
"""
        ),
        Example(
            """\
from transformers import TrainerCallback


class ScaleLogger(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        logs["loss_scale"] = self.scaler.get_scale()
"""
        ),
        Example(
            """\
for epoch in range(epochs):
    layout.get_scale(epoch)  # a look-alike: torch's get_scale() takes no argument
"""
        ),
    )
    invalid = (
        Example(
            """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    before = scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()
    if scaler.get_scale() < before:
        print("step skipped")
""",
            (6, 9),
        ),
        Example(
            """\
from torch.cuda.amp import GradScaler as Scaler


class Trainer:
    def __init__(self):
        self.amp = Scaler()

    def train_step(self, batch):
        self.amp.scale(self.loss(batch)).backward()
        self.amp.step(self.optimizer)
        self.amp.update()
        return float(self.amp._scale)

    def fit(self, loader):
        for batch in loader:
            self.train_step(batch)
""",
            (12,),
        ),
        Example(
            """\
import lightning as L


class Module(L.LightningModule):
    def on_before_optimizer_step(self, optimizer):
        scaler = self.trainer.precision_plugin.scaler
        if scaler is not None:
            self.log("loss_scale", scaler.get_scale())
""",
            (8,),
        ),
        Example(
            """\
for i, batch in enumerate(loader):
    scaler.scale(model(batch).loss / accum_steps).backward()
    if (i + 1) % accum_steps == 0:
        scaler.step(optimizer)
        scaler.update()
        print(scaler.get_scale())
""",
            (6,),
        ),
        Example(
            """\
from scaler import GradScaler  # ampscale's: the unsafe fix reads peek_scale() instead

scaler = GradScaler("cuda")
for step, (x, y) in enumerate(loader):
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()
    print(f"step {step} scale {scaler.get_scale()}")
""",
            (8,),
        ),
    )

    @classmethod
    def wants(cls, text: str) -> bool:
        # A quoted "scale" is common in numeric code; the sync needs it next to `state_dict`.
        return (
            "get_scale" in text
            or "._scale" in text
            or ("state_dict" in text and ('"scale"' in text or "'scale'" in text))
        )

    @classmethod
    def wants_with(cls, own: str, imported: str) -> bool:
        # The reads reported are the module's own calls and subscripts (`scale_reads` walks
        # its index): a function it imports brings per-step callers, never a read.
        return cls.wants(own)

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        if _MAYBE_A_READ.search(context.filter_text) is None:
            return
        index = module_index(context)
        receivers = scaler_receivers(index)
        reads = scale_reads(
            index, receivers, lambda receiver: passed_scaler_wrapper(context, index, receiver)
        )
        if not reads:
            return
        is_scaler_call = receivers.is_scaler_method_call
        aliases = import_aliases(index)
        analysis = PerStepAnalysis(context, index, is_scaler_call)
        skip_checks = skip_detections(index, reads, is_scaler_call)
        device_syncs = DeviceSyncs(index, aliases)
        for read in reads:
            why = analysis.reason(read.node)
            if why is None or device_syncs.follows(read.node):
                continue  # no per-step sync, or the host already waited for the device
            text = context.module.code_for_node(read.node)
            message = _message(text, read, why, read.node in skip_checks, receivers)
            yield Finding(read.node, message, fix=_peek_scale_fix(read.node, receivers))


def _message(
    text: str, read: ScaleRead, why: str, detects_skip: bool, receivers: ScalerReceivers
) -> str:
    """The finding's words: what the read is for, and advice for the scaler in hand."""
    ampscale = receivers.is_ampscale(read.receiver)
    if detects_skip:
        advice = (
            f"use `{read.receiver}.step_skipped(optimizer)`, a device-side flag"
            if ampscale
            else "compare the scale tensors on the device, or switch to ampscale's GradScaler "
            "(`from scaler import GradScaler`), whose `step_skipped(optimizer)` needs no sync"
        )
        return (
            f"`{text}` reads the loss scale around `{read.receiver}.update()` to detect a "
            f"skipped step, a host-device sync every training step ({why}); {advice}"
        )
    advice = (
        f"guard it with a log interval (`if step % log_every == 0:`) or use the non-blocking "
        f"`{read.receiver}.peek_scale()`"
        if ampscale
        else "guard it with a log interval (`if step % log_every == 0:`), or switch to "
        "ampscale's GradScaler (`from scaler import GradScaler`), whose `peek_scale()` never waits"
    )
    return (
        f"`{text}` copies the loss scale to the host to log/check it, a device sync that stalls "
        f"every training step ({why}); {advice}"
    )


def _peek_scale_fix(node: cst.CSTNode, receivers: ScalerReceivers) -> NodeFix | None:
    """``scaler.get_scale()`` -> ``scaler.peek_scale()`` on ampscale's GradScaler. Unsafe: the
    peeked value may be a step old, and is None until the first copy has landed."""
    if not (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "get_scale"
        and receivers.is_ampscale(dotted_name(node.func.value) or "")
    ):
        return None
    rename = ((node.func.attr, cst.Name("peek_scale")),)
    return NodeFix("use the non-blocking `peek_scale()` (may lag a step)", rename, UNSAFE)
