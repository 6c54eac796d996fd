"""Should this checkpoint be trained in fp16? One verdict from everything known about it.

Three kinds of evidence, each enough on its own to say no: the checkpoint is bf16 (declared in
``config.json`` or stored so), its family is documented as pretrained in bf16 and unsafe in fp16
(the table amp-lint's AMP002 uses, with its citations), or stored weights exceed fp16's range.
"""

from __future__ import annotations

from dataclasses import dataclass

from linter.model.values import Bf16Family, bf16_family
from scaler._checkpoint_inspect import _DTYPE_NAMES, _FLOATING, CheckpointReport

#: Floating-point dtypes as the report spells them.
_FLOATING_DTYPES = frozenset(_DTYPE_NAMES[code] for code in _FLOATING)


@dataclass(frozen=True, slots=True)
class Fp16Verdict:
    """Whether fp16 training is advisable for a checkpoint, and why."""

    #: What :func:`~scaler.inspect_checkpoint` found.
    report: CheckpointReport
    #: The bf16-pretrained family the checkpoint belongs to, if any.
    family: Bf16Family | None
    #: The name or path the family was recognised in.
    family_source: str | None
    #: False when any evidence says fp16 will overflow or collapse the loss scale.
    fp16_advisable: bool
    #: One line per piece of evidence against fp16 (empty when advisable).
    reasons: tuple[str, ...]


def _names(report: CheckpointReport) -> list[str]:
    """Where a family name can show: the path as given and absolute, and the config's names."""
    return [str(report.path), str(report.path.resolve()), *report.config_names]


def fp16_verdict(report: CheckpointReport) -> Fp16Verdict:
    """Weigh a :class:`~scaler.CheckpointReport` (and the family table) into one verdict."""
    family, source = None, None
    for name in _names(report):
        family = bf16_family(name)
        if family is not None:
            source = name
            break
    reasons: list[str] = []
    if report.config_dtype == "bfloat16":
        reasons.append("config.json declares dtype bfloat16: the model was saved in bf16")
    floating = [c for c in report.stored_dtypes if c.dtype in _FLOATING_DTYPES]
    if floating and floating[0].dtype == "bfloat16":
        reasons.append(
            f"most floating-point weights are stored in bfloat16 ({floating[0].elements} of "
            f"{sum(c.elements for c in floating)})"
        )
    if family is not None:
        reasons.append(
            f"{family.name} checkpoints are documented as pretrained in bf16 and unsafe in fp16 "
            f"(recognised in {source!r}; evidence: {', '.join(family.evidence)})"
        )
    if report.above_fp16_max:
        reasons.append(
            f"{report.above_fp16_max} weight(s) exceed fp16's max 65504 (first in "
            f"{report.tensors_above_fp16_max[0]})"
        )
    return Fp16Verdict(report, family, source, not reasons, tuple(reasons))


def inspected_nothing(report: CheckpointReport) -> bool:
    """True when no weights were read and nothing else tells the precision (only pickles)."""
    return not report.files and report.config_dtype is None


def verdict_text(verdict: Fp16Verdict) -> str:
    """The report and the verdict, for a terminal."""
    lines = [str(verdict.report)]
    if verdict.family is not None:
        lines.append(f"  family: {verdict.family.name} (bf16-pretrained)")
    if verdict.fp16_advisable:
        lines.append(
            "fp16 training: no evidence against it. Stored weights say nothing about "
            "activations: run scaler.check_fp16_compat(model, batch) on a real batch."
        )
    else:
        lines.append("fp16 training: not advisable; train in bf16 (or fp32). Why:")
        lines.extend(f"  - {reason}" for reason in verdict.reasons)
    return "\n".join(lines)


def verdict_json(verdict: Fp16Verdict) -> dict[str, object]:
    """The report and the verdict as JSON-ready data (paths as strings)."""
    report = verdict.report
    family = verdict.family
    return {
        "path": str(report.path),
        "config_dtype": report.config_dtype,
        "stored_dtypes": [
            {"dtype": c.dtype, "tensors": c.tensors, "elements": c.elements}
            for c in report.stored_dtypes
        ],
        "files": [str(f) for f in report.files],
        "skipped": [{"path": str(s.path), "reason": s.reason} for s in report.skipped],
        "bf16_checkpoint": report.bf16_checkpoint,
        "family": None
        if family is None
        else {"name": family.name, "source": verdict.family_source, "evidence": family.evidence},
        "above_fp16_max": report.above_fp16_max,
        "below_fp16_subnormal": report.below_fp16_subnormal,
        "max_abs": report.max_abs,
        "tensors_above_fp16_max": list(report.tensors_above_fp16_max),
        "fp16_advisable": verdict.fp16_advisable,
        "reasons": list(verdict.reasons),
    }
