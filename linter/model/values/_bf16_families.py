"""Checkpoint families documented as pretrained in bf16 and unsafe in fp16, with the evidence.

A row is here only when a public page says the family was trained in bfloat16 and/or that fp16
overflows or gives NaN for it. Families left out for want of such evidence (or with evidence
that fp16 is fine): the original T5 (t5-small/base are commonly fine-tuned in fp16 since
transformers clamps its activations), BLOOM (Hugging Face's inference write-up found bf16 -> fp16
conversion fine), Llama 2 (its checkpoints were released in fp16), Llama 3, Gemma 1/2 and Qwen2.5.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bf16Family:
    """A family of checkpoints that must not be run or trained in fp16."""

    #: Name used in messages, e.g. ``FLAN-T5``.
    name: str
    #: Searched, case-insensitively, in a checkpoint name or local path.
    pattern: re.Pattern[str]
    #: Public pages that document the bf16 pretraining or the fp16 failure.
    evidence: tuple[str, ...]


def _family(name: str, pattern: str, *evidence: str) -> Bf16Family:
    return Bf16Family(name, re.compile(pattern, re.IGNORECASE), evidence)


#: The table, most specific patterns first.
BF16_FAMILIES: tuple[Bf16Family, ...] = (
    _family(
        "FLAN-T5",
        r"flan[-_]?t5",
        # Model card: "The original model has been trained in `bfloat16`".
        "https://huggingface.co/google/flan-t5-xxl/discussions/5/files",
        # fp16 training gives NaN on flan-t5-xl.
        "https://github.com/huggingface/transformers/issues/23918",
    ),
    _family(
        "T5 v1.1",
        r"t5[-_]v1[._]1",
        # T5 authors: "All of our experiments use bfloat16 activations."
        "https://github.com/google-research/text-to-text-transfer-transformer/issues/539",
        # NaNs of t5/mt5 under amp traced to bf16-trained activations beyond fp16's range.
        "https://discuss.huggingface.co/t/mixed-precision-for-bfloat16-pretrained-models/5315/3",
    ),
    _family(
        "mT5",
        r"(^|[/_-])mt5",
        "https://discuss.huggingface.co/t/mixed-precision-for-bfloat16-pretrained-models/5315/3",
    ),
    _family(
        "T0",
        r"bigscience/t0",
        # Model card: trained with bf16 activations, fp16 "highly" discouraged.
        "https://huggingface.co/bigscience/T0pp/commit/8fb127160d550fa942ebcd4ebfaded5b7e5172f1",
    ),
    _family(
        "Gemma 3",
        r"gemma[-_]?3|functiongemma",
        "https://github.com/huggingface/transformers/issues/36822",
        # vLLM refuses float16 for Gemma 3 for numerical instability.
        "https://github.com/intel/llm-scaler/issues/270",
        "https://github.com/cactus-compute/cactus/issues/503",
    ),
    _family(
        "Gemma 4",
        r"gemma[-_]?4",
        # fp16 training gives NaN; only bf16 is reliable.
        "https://github.com/unslothai/unsloth/pull/5074",
    ),
    _family(
        "Qwen2",
        r"qwen2[-_]",
        # Maintainers: trained in bfloat16, float16 "may cause numerical instabilities".
        "https://github.com/QwenLM/Qwen3/issues/868",
    ),
)


def user_families(patterns: list[str] | tuple[str, ...]) -> tuple[Bf16Family, ...]:
    """Families a user declares (``extend-bf16-families = ["my-org/llm-*"]``): shell-style
    patterns matched against the whole checkpoint name or path, case-insensitively."""
    return tuple(
        Bf16Family(
            pattern,
            re.compile(fnmatch.translate(pattern), re.IGNORECASE),
            ("your configuration: extend-bf16-families",),
        )
        for pattern in patterns
    )


def bf16_family(checkpoint: str, extra: tuple[Bf16Family, ...] = ()) -> Bf16Family | None:
    """The family a checkpoint name or path belongs to, if it is in the table (or ``extra``)."""
    for family in extra:
        if family.pattern.match(checkpoint):
            return family
    for family in BF16_FAMILIES:
        if family.pattern.search(checkpoint):
            return family
    return None
