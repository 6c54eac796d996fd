"""What an origin is: where a model became bf16 (or fp16), and the vocabulary of loads, casts and
wrappers the origin analyses and the rules share.

`linter.model.values._bf16_origins` finds the origins of one module's models; AMP002 and AMP008
name them in their messages, and the fp32-trainable analysis asks which wrappers train adapters
only.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from linter.model.syntax import BF16, FP16, Fact
from linter.model.values._bf16_families import Bf16Family

#: Calls whose first argument is the model and whose result is (a wrapper of) that model.
MODEL_WRAPPERS = frozenset(
    {
        "get_peft_model",
        "prepare_model_for_kbit_training",
        "compile",
        "DistributedDataParallel",
        "DDP",
        "DataParallel",
        "FullyShardedDataParallel",
        "FSDP",
        "fully_shard",
    }
)


#: Wrappers after which only fp32 adapters train (peft upcasts adapters of an fp16 base; kbit
#: preparation freezes the base): the model's *trainable* parameters are no longer fp16.
TRAINS_ADAPTERS_ONLY = frozenset({"get_peft_model", "prepare_model_for_kbit_training"})


#: `Bf16Origin.kind` of a load whose dtype a function of another module takes from its
#: ``**kwargs``: never reported as such, the caller's analysis completes it with what it passes.
FORWARDED = "forwarded"

#: How messages name each dtype.
DTYPE_WORDS = {BF16: "bfloat16", FP16: "float16"}


@dataclass(frozen=True, slots=True)
class DtypeArgument:
    """Where a load's dtype is given: ``torch_dtype=...`` or a ``**kwargs`` dict entry."""

    #: The argument or dict entry, reported as the site.
    node: cst.CSTNode
    #: ``torch_dtype`` or ``dtype``.
    name: str
    #: The dtype expression.
    value: cst.BaseExpression


#: Keywords that name the checkpoint in ``from_pretrained`` calls.
CHECKPOINT_KEYWORDS = ("pretrained_model_name_or_path", "model_name", "model_id")


@dataclass(frozen=True, slots=True)
class Bf16Origin:
    """Where a model became bf16."""

    #: Node of the bf16 site (the dtype argument, the cast call or the checkpoint name).
    node: cst.CSTNode
    #: What happened there, e.g. ``loaded as bfloat16``.
    description: str
    #: The family, when the checkpoint name made it bf16; None for an explicit dtype.
    family: Bf16Family | None = None
    #: ``loaded`` (a bf16 dtype at load), ``cast`` (``.to(torch.bfloat16)``), ``family``, or
    #: `FORWARDED` (inside an analysis of another module's function only).
    kind: str = "loaded"
    #: For a dtype a flag picks (``.to(ptdtype)``): which runs, e.g. ``when run with --dtype
    #: float16``; None for every run.
    when: str | None = None
    #: What holds on those runs (``args.dtype == "float16"``).
    facts: frozenset[Fact] = frozenset()
