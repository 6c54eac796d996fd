"""Does a model fit fp16? Find the modules whose weights, activations or gradients leave its range.

fp16 represents magnitudes from ``2**-24`` (the smallest subnormal) to ``65504``. The check runs the
example twice from the same RNG state: once as the model is (normally fp32, or bf16 for a bf16
checkpoint) to measure what *would* leave the range, and once under fp16 autocast to see which
tensors *actually* become inf/NaN. Forward hooks, and tensor hooks for gradients, observe every
module; the model is left as it was found.

Thresholds. A magnitude above ``FP16_MAX`` cannot be stored: from 65520 up it becomes inf, and the
sliver between 65504 and 65520 rounds down to 65504. A nonzero magnitude below ``2**-24`` cannot be
stored either: at or below ``2**-25`` it becomes 0, and between the two it rounds up to ``2**-24``,
keeping no significant bit. The underflow threshold is the smallest *subnormal*, not the smallest
normal ``2**-14``: subnormals are real fp16 values (PyTorch does not flush them to zero), and
ordinary weights around ``1e-5`` would otherwise all be reported although they survive with a few
bits of precision.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

#: Largest finite fp16 value.
FP16_MAX = 65504.0
#: Smallest positive fp16 value (a subnormal); nonzero magnitudes below it are lost.
FP16_SMALLEST_SUBNORMAL = 2.0**-24

TensorKind = Literal["input", "weight", "bias", "buffer", "activation", "gradient"]

# Kinds that are the model's own state or the user's example: the same in both runs, so measured
# once, in the reference run.
_STATE_KINDS = frozenset({"input", "weight", "bias", "buffer"})
# Outputs are nested at most this deep before the search gives up (guards self-referencing objects).
_MAX_NESTING = 16


@dataclass(frozen=True, slots=True)
class Fp16Offender:
    """One tensor of one module that leaves fp16's range (summed over all calls of the module)."""

    #: Qualified name from ``model.named_modules()``; ``""`` is the model itself.
    module: str
    #: ``"input"`` (of the model), ``"weight"``, ``"bias"``, ``"buffer"``, ``"activation"`` (a
    #: forward output) or ``"gradient"`` (of an output, or of a parameter).
    kind: TensorKind
    #: Which tensor: a parameter or buffer name (``"weight"``), an output position (``"output"``,
    #: ``"output[0]"``, ``"output['logits']"``), either followed by ``.grad``, or for the model's
    #: inputs ``"args[0]"`` or the keyword's name.
    tensor: str
    #: Elements observed (all calls together).
    numel: int
    #: Largest magnitude in the reference run.
    max_abs: float
    #: Smallest nonzero magnitude in the reference run; ``None`` when every element is zero.
    min_nonzero_abs: float | None
    #: Elements above ``FP16_MAX`` in the reference run (they would overflow to inf or be clipped).
    overflow_count: int
    #: Nonzero elements below ``2**-24`` in the reference run (they would flush to zero).
    underflow_count: int
    #: Elements that were inf or NaN in the run under fp16 autocast.
    nonfinite_under_autocast: int

    @property
    def label(self) -> str:
        """``module.tensor`` as a user would spell it, ``(model)`` for the model itself."""
        return f"{self.module or '(model)'}: {self.tensor}"


@dataclass(frozen=True, slots=True)
class Fp16CompatReport:
    """What :func:`check_fp16_compat` found; ``str()`` gives a table, first offender first.

    Example::

        report = check_fp16_compat(model, batch)
        if not report.ok:
            print(report)
            first = report.offenders[0]  # e.g. Fp16Offender(module="encoder.3.ffn", ...)
    """

    #: Tensors that leave fp16's range, ordered by where the first offending value appeared
    #: (forward execution order, then backward).
    offenders: tuple[Fp16Offender, ...]
    #: Device type autocast ran on (``"cpu"``, ``"cuda"``...).
    device_type: str
    #: Whether a backward pass ran, so gradients were checked.
    checked_gradients: bool
    #: What could not be checked, and why.
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every observed weight, activation and gradient fits fp16."""
        return not self.offenders

    @property
    def overflows(self) -> tuple[Fp16Offender, ...]:
        """Offenders with values above fp16's max or that became inf/NaN under autocast."""
        return tuple(o for o in self.offenders if o.overflow_count or o.nonfinite_under_autocast)

    @property
    def underflows(self) -> tuple[Fp16Offender, ...]:
        """Offenders with nonzero values that fp16 would flush to zero."""
        return tuple(o for o in self.offenders if o.underflow_count)

    def __str__(self) -> str:
        passes = "forward and backward" if self.checked_gradients else "forward only"
        head = f"fp16 compatibility, {self.device_type} autocast, {passes}: "
        if self.ok:
            lines = [head + "ok, every weight, activation and gradient fits fp16"]
        else:
            lines = [head + f"{len(self.offenders)} offending tensor(s), first offender first"]
            lines.extend(_table(self.offenders))
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)


def _table(offenders: tuple[Fp16Offender, ...]) -> list[str]:
    header = (
        "#",
        "module",
        "kind",
        "tensor",
        "max |x|",
        "min |x|>0",
        ">65504",
        "<2**-24",
        "inf/nan fp16",
        "elements",
    )
    rows = [
        (
            str(index),
            o.module or "(model)",
            o.kind,
            o.tensor,
            f"{o.max_abs:.4g}",
            "-" if o.min_nonzero_abs is None else f"{o.min_nonzero_abs:.4g}",
            str(o.overflow_count),
            str(o.underflow_count),
            str(o.nonfinite_under_autocast),
            str(o.numel),
        )
        for index, o in enumerate(offenders, start=1)
    ]
    widths = [max(len(row[col]) for row in (header, *rows)) for col in range(len(header))]
    # Text columns left-aligned, numbers right-aligned.
    left = {1, 2, 3}
    return [
        "  ".join(
            cell.ljust(width) if col in left else cell.rjust(width)
            for col, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in (header, *rows)
    ]


class _RangeStats(NamedTuple):
    """Per-tensor figures as 0-dim tensors on the tensor's device, so hooks do not sync."""

    max_abs: torch.Tensor
    min_nonzero_abs: torch.Tensor
    overflow: torch.Tensor
    underflow: torch.Tensor
    nonfinite: torch.Tensor


def _range_stats(values: torch.Tensor) -> _RangeStats:
    """Measure how ``values`` would fare in fp16 (NaNs are only counted as non-finite)."""
    mags = values.detach().abs()
    if mags.dtype not in (torch.float32, torch.float64):
        mags = mags.float()
    nonzero = mags > 0
    return _RangeStats(
        max_abs=mags.nan_to_num(nan=0.0, posinf=math.inf).amax(),
        min_nonzero_abs=torch.where(nonzero, mags, math.inf).amin(),
        overflow=(mags > FP16_MAX).sum(),
        underflow=(nonzero & (mags < FP16_SMALLEST_SUBNORMAL)).sum(),
        nonfinite=(~torch.isfinite(mags)).sum(),
    )


def _measurable(value: object) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and value.is_floating_point()
        and value.layout in (torch.strided, torch.jagged)
        and value.device.type != "meta"
    )


def _plain(value: torch.Tensor) -> torch.Tensor:
    """The elements of ``value`` as an ordinary tensor."""
    if value.is_nested:  # e.g. TransformerEncoder's eval fast path, given a padding mask
        return torch.cat([part.reshape(-1) for part in value.unbind()])
    return value


def _named_tensors(obj: object, label: str, depth: int = 0) -> Iterator[tuple[str, torch.Tensor]]:
    """Tensors inside a tensor, tuple/list, dict, ModelOutput or dataclass, with their positions."""
    if isinstance(obj, torch.Tensor):
        yield label, obj
    elif depth >= _MAX_NESTING:
        return
    elif isinstance(obj, Mapping):  # also Hugging Face ModelOutput, an OrderedDict subclass
        for key, value in obj.items():
            yield from _named_tensors(value, f"{label}[{key!r}]", depth + 1)
    elif isinstance(obj, (list, tuple)):
        for index, value in enumerate(obj):
            yield from _named_tensors(value, f"{label}[{index}]", depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            yield from _named_tensors(getattr(obj, field.name), f"{label}.{field.name}", depth + 1)


_Key = tuple[str, TensorKind, str]  # (module, kind, tensor)


@dataclass(slots=True)
class _Tally:
    """Running totals for one (module, kind, tensor) across calls and both runs."""

    numel: int = 0
    max_abs: float = 0.0
    min_nonzero_abs: float = math.inf
    overflow: int = 0
    underflow: int = 0
    nonfinite_under_autocast: int = 0
    first_offence: int | None = None


class _Recorder:
    """Collects observations of one run; every observation gets the next sequence number."""

    def __init__(self, *, under_autocast: bool) -> None:
        self.under_autocast = under_autocast
        self.sequence = 0
        self.pending: list[tuple[_Key, int, int, _RangeStats]] = []

    def observe(self, module: str, kind: TensorKind, tensor: str, value: torch.Tensor) -> None:
        # Both runs number the same hook calls alike, so a sequence number means the same point
        # of execution in either run; state is measured only in the reference run.
        sequence = self.sequence
        self.sequence += 1
        if self.under_autocast and kind in _STATE_KINDS:
            return
        if _measurable(value):
            values = _plain(value)
            if values.numel():
                self.pending.append(
                    ((module, kind, tensor), sequence, values.numel(), _range_stats(values))
                )

    def add_to(self, tallies: dict[_Key, _Tally]) -> None:
        """Bring the figures to the host (the only syncs) and add them to ``tallies``."""
        for key, sequence, numel, stats in self.pending:
            max_abs, min_nonzero, overflow, underflow, nonfinite = (s.item() for s in stats)
            tally = tallies.setdefault(key, _Tally())
            if self.under_autocast:
                tally.nonfinite_under_autocast += int(nonfinite)
                offended = nonfinite > 0
            else:
                tally.numel += numel
                tally.max_abs = max(tally.max_abs, max_abs)
                tally.min_nonzero_abs = min(tally.min_nonzero_abs, min_nonzero)
                tally.overflow += int(overflow)
                tally.underflow += int(underflow)
                offended = overflow > 0 or underflow > 0
            if offended and (tally.first_offence is None or sequence < tally.first_offence):
                tally.first_offence = sequence
        self.pending.clear()


def _version(tensor: torch.Tensor) -> int | None:
    """The in-place write counter; ``None`` for inference-mode tensors, which keep none."""
    try:
        return tensor._version
    except RuntimeError:
        return None


def _param_kind(name: str) -> TensorKind:
    return "bias" if name.endswith("bias") else "weight"


class _ModelSnapshot:
    """What a forward/backward may change, saved so that it can be put back exactly.

    Buffers are cloned (batch norm updates its running statistics in the forward). Parameters are
    not cloned, which would double the model's memory: their version counters prove that nothing
    wrote to them, and a forward that does is reported as an error.
    """

    def __init__(self, model: nn.Module) -> None:
        self.training = [(m, m.training) for m in model.modules()]
        self.buffers = [
            (module, name, buf, buf.detach().clone())
            for module in model.modules()
            for name, buf in module.named_buffers(recurse=False)
        ]
        self.params = [
            (module, name, param, param.requires_grad, param.grad, _version(param))
            for module in model.modules()
            for name, param in module.named_parameters(recurse=False)
        ]

    def restore(self, module_names: Mapping[nn.Module, str]) -> None:
        for module, training in self.training:
            module.training = training
        with torch.no_grad():
            for module, name, buf, saved in self.buffers:
                if getattr(module, name, None) is not buf:
                    setattr(module, name, buf)
                if not torch.equal(buf, saved):
                    buf.copy_(saved)
        for module, name, param, requires_grad, grad, version in self.params:
            if getattr(module, name, None) is not param:
                setattr(module, name, param)
            param.requires_grad_(requires_grad)
            if param.grad is not grad:
                param.grad = grad
            if _version(param) != version:
                where = ".".join(filter(None, (module_names.get(module, "?"), name)))
                raise RuntimeError(
                    f"check_fp16_compat: the model's forward wrote to parameter {where!r} in "
                    "place; its old value cannot be restored"
                )


def _owners(model: nn.Module) -> dict[torch.Tensor, tuple[str, str]]:
    """Each parameter's owning module and local name; a shared parameter belongs to its first."""
    owners: dict[torch.Tensor, tuple[str, str]] = {}
    for module_name, module in model.named_modules():
        for name, param in module.named_parameters(recurse=False):
            owners.setdefault(param, (module_name, name))
    return owners


def _device_type(model: nn.Module, example: list[torch.Tensor]) -> str:
    for tensor in itertools.chain(model.parameters(), model.buffers(), example):
        if tensor.device.type != "meta":
            return tensor.device.type
    return "cpu"


def _rng_devices(device_type: str, tensors: list[torch.Tensor]) -> list[int]:
    """Accelerator indices whose RNG the runs may draw from (a tensor's device always has one)."""
    if device_type == "cpu":
        return []
    return sorted({t.device.index or 0 for t in tensors if t.device.type == device_type})


def _random_signs(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    signs = torch.randint(0, 2, like.shape, generator=generator, dtype=torch.float32) * 2 - 1
    return signs.to(like.device)


def _default_loss(output: object) -> torch.Tensor | None:
    if isinstance(output, Mapping):
        loss = output.get("loss")
    else:
        loss = getattr(output, "loss", None) if dataclasses.is_dataclass(output) else None
    if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad:
        return loss.reshape(())
    # Each output element weighted by a random sign, so its gradient is +1 or -1. A plain sum would
    # give a final LayerNorm/softmax a gradient of (almost) zero and report rounding noise as
    # underflow. A private generator with a fixed seed gives both runs the same signs.
    generator = torch.Generator().manual_seed(0)
    terms = [
        (t.float() * _random_signs(t, generator)).sum()
        for _, t in _named_tensors(output, "output")
        if t.requires_grad and t.is_floating_point()
    ]
    if not terms:
        return None
    return torch.stack(terms).sum()


def _checked_loss(
    output: object, loss_fn: Callable[[Any], torch.Tensor] | None
) -> torch.Tensor | None:
    if loss_fn is None:
        return _default_loss(output)
    loss = loss_fn(output)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.is_floating_point():
        raise ValueError(
            "check_fp16_compat: loss_fn must return a floating-point tensor with one element, "
            f"got {type(loss).__name__}"
            + (f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else "")
        )
    return loss.reshape(()) if loss.requires_grad else None


def _run(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    recorder: _Recorder,
    device_type: str,
    backward: bool,
    loss_fn: Callable[[Any], torch.Tensor] | None,
    names: Mapping[nn.Module, str],
    owners: Mapping[torch.Tensor, tuple[str, str]],
) -> tuple[bool, str | None]:
    """One forward (and backward); returns whether gradients ran, or why not."""
    handles: list[RemovableHandle] = []
    weights_seen: set[nn.Module] = set()
    # A container returns its last child's output tensor itself: report it once, at the child,
    # unless it was written in place since (an in-place activation holds new values).
    outputs_seen: dict[int, tuple[weakref.ref[torch.Tensor], int | None]] = {}

    def observe_state(module: nn.Module) -> None:
        weights_seen.add(module)
        name = names[module]
        for local, param in module.named_parameters(recurse=False):
            if owners.get(param) == (name, local):
                recorder.observe(name, _param_kind(local), local, param)
        for local, buf in module.named_buffers(recurse=False):
            recorder.observe(name, "buffer", local, buf)

    def pre_hook(module: nn.Module, _args: object) -> None:
        if module not in weights_seen:
            observe_state(module)

    def post_hook(module: nn.Module, _args: object, output: object) -> None:
        name = names[module]
        for label, tensor in _named_tensors(output, "output"):
            seen = outputs_seen.get(id(tensor))
            if seen is not None and seen[0]() is tensor and seen[1] == _version(tensor):
                continue
            outputs_seen[id(tensor)] = (weakref.ref(tensor), _version(tensor))
            recorder.observe(name, "activation", label, tensor)
            if backward and tensor.requires_grad and _measurable(tensor):
                handles.append(tensor.register_hook(grad_hook(name, f"{label}.grad")))

    def grad_hook(name: str, label: str) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            recorder.observe(name, "gradient", label, grad)

        return hook

    try:
        for module in names:
            handles.append(module.register_forward_pre_hook(pre_hook))
            handles.append(module.register_forward_hook(post_hook))
        with ExitStack() as stack:
            stack.enter_context(torch.enable_grad() if backward else torch.no_grad())
            if recorder.under_autocast:
                stack.enter_context(torch.autocast(device_type=device_type, dtype=torch.float16))
            for index, value in enumerate(args):
                for label, tensor in _named_tensors(value, f"args[{index}]"):
                    recorder.observe("", "input", label, tensor)
            for key, value in kwargs.items():
                for label, tensor in _named_tensors(value, key):
                    recorder.observe("", "input", label, tensor)
            output = model(*args, **kwargs)
            loss = _checked_loss(output, loss_fn) if backward else None
        for module in names:  # modules the forward never called still have weights to check
            if module not in weights_seen:
                observe_state(module)
        if not backward:
            return False, None
        if loss is None:
            return False, "gradients not checked: no output (or loss) requires grad"
        targets = [p for p in owners if p.requires_grad]
        if not targets:
            example = [*args, *kwargs.values()]
            targets = [t for _, t in _named_tensors(example, "") if t.requires_grad and t.is_leaf]
        if not targets:
            return False, "gradients not checked: no parameter or input requires grad"
        for param in targets:
            if param in owners:
                module_name, local = owners[param]
                handles.append(param.register_hook(grad_hook(module_name, f"{local}.grad")))
        # autograd.grad, not backward(): it leaves every .grad untouched.
        with torch.enable_grad():
            torch.autograd.grad(loss, targets, allow_unused=True)
        return True, None
    finally:
        for handle in handles:
            handle.remove()


def check_fp16_compat(
    model: nn.Module,
    *example_args: Any,
    backward: bool = True,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    **example_kwargs: Any,
) -> Fp16CompatReport:
    """Report which of ``model``'s weights, activations and gradients leave fp16's range.

    Calls ``model(*example_args, **example_kwargs)`` twice from the same RNG state (dropout draws
    the same masks): as the model is, measuring magnitudes against ``65504`` and ``2**-24``, and
    under ``torch.autocast(<device>, dtype=torch.float16)`` on the device of the model's
    parameters (or of the example), counting tensors that become inf/NaN. Needs memory for a copy
    of the buffers and, with ``backward``, the autograd graph of one example.

    With ``backward=True`` the gradient of a scalar loss is taken with ``torch.autograd.grad``
    (``.grad`` attributes are not touched) and the gradients of every module output and every
    parameter are checked. The loss is ``loss_fn(output)`` when given; otherwise the output's
    ``loss`` entry (a Hugging Face ModelOutput computed with ``labels``) when it has one, else the
    sum of all floating-point outputs each weighted by a fixed random sign, so that every output
    element gets a gradient of +1 or -1 (a plain sum would give a final normalisation layer a
    zero gradient). Real losses usually average over the batch and give far smaller gradients,
    so pass ``loss_fn`` when judging gradient underflow, the problem a loss scaler exists to
    solve.

    ``report.ok`` is strict: one element out of range makes a row. Overflow rows
    (``report.overflows``) are what breaks fp16 training. A gradient row where a handful of a
    tensor's elements underflow is usually a value that is zero in exact arithmetic, seen through
    rounding noise (the gradient of an attention key bias, which softmax cancels, measures about
    1e-8): compare ``underflow_count`` with ``numel`` before acting on it.

    The model is restored: parameters, buffers, ``.grad``, ``requires_grad`` and training flags
    are as before, every hook is removed even when the forward raises, and the global RNG state
    is unchanged. Parameters are not copied (that would double the model's memory), so a forward
    that writes to one in place raises RuntimeError naming it. ``backward`` and ``loss_fn`` are
    reserved keyword names; all other keywords go to the model.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"check_fp16_compat: model must be a torch.nn.Module, got {type(model).__name__}"
        )
    if not example_args and not example_kwargs:
        raise ValueError(
            "check_fp16_compat: needs an example input, passed as the model's own positional "
            "or keyword arguments, e.g. check_fp16_compat(model, batch)"
        )
    if not isinstance(backward, bool):
        raise TypeError(
            f"check_fp16_compat: backward must be True or False, got {type(backward).__name__}"
        )
    if loss_fn is not None and not callable(loss_fn):
        raise TypeError(
            f"check_fp16_compat: loss_fn must be callable, got {type(loss_fn).__name__}"
        )

    example = [t for _, t in _named_tensors([*example_args, *example_kwargs.values()], "")]
    device_type = _device_type(model, example)
    names = {module: name for name, module in model.named_modules()}
    owners = _owners(model)
    snapshot = _ModelSnapshot(model)
    rng_devices = _rng_devices(device_type, [*model.parameters(), *example])
    tallies: dict[_Key, _Tally] = {}
    notes: list[str] = []
    checked = False
    try:
        for under_autocast in (False, True):
            recorder = _Recorder(under_autocast=under_autocast)
            with torch.random.fork_rng(devices=rng_devices, device_type=device_type):
                checked, why_not = _run(
                    model,
                    example_args,
                    example_kwargs,
                    recorder=recorder,
                    device_type=device_type,
                    backward=backward,
                    loss_fn=loss_fn,
                    names=names,
                    owners=owners,
                )
            recorder.add_to(tallies)
            snapshot.restore(names)
            if why_not and why_not not in notes:
                notes.append(why_not)
    finally:
        snapshot.restore(names)

    order = {key: index for index, key in enumerate(tallies)}
    offending = sorted(
        (key for key, tally in tallies.items() if tally.first_offence is not None),
        key=lambda key: (tallies[key].first_offence, order[key]),
    )
    offenders = tuple(
        Fp16Offender(
            module=key[0],
            kind=key[1],
            tensor=key[2],
            numel=tallies[key].numel,
            max_abs=tallies[key].max_abs,
            min_nonzero_abs=(
                None if math.isinf(tallies[key].min_nonzero_abs) else tallies[key].min_nonzero_abs
            ),
            overflow_count=tallies[key].overflow,
            underflow_count=tallies[key].underflow,
            nonfinite_under_autocast=tallies[key].nonfinite_under_autocast,
        )
        for key in offending
    )
    return Fp16CompatReport(
        offenders=offenders, device_type=device_type, checked_gradients=checked, notes=tuple(notes)
    )
