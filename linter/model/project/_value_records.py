"""AMP values as a summary carries them: a GradScaler, an autocast context or factory, or a
precision engine that one module holds where other modules reach it.

Plain data, made by `linter.model.values._exported_values` when a module is summarised and read
by the project (`Project.values_of`) and by the module being linted
(`linter.model.values._imported_values`); here, below both, so that neither the summaries nor the
project depend on the analyses that make them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: `ValueRecord.kind`: a GradScaler.
SCALER = "scaler"
#: ...an autocast context, entered as ``with x:``.
AUTOCAST = "autocast"
#: ...a callable that builds one, entered as ``with x():`` (a ``partial``).
AUTOCAST_FACTORY = "autocast-factory"
#: ...an engine that manages precision itself (DeepSpeed, accelerate, Lightning).
ENGINE = "engine"

#: Every kind, for a question that takes any.
VALUE_KINDS = frozenset({SCALER, AUTOCAST, AUTOCAST_FACTORY, ENGINE})

#: Text without which a module builds no engine whose setting it spells (the engine search
#: reads config references: not worth it for every summarised file).
ENGINE_TEXT = re.compile(r"deepspeed\.initialize|Accelerator\s*\(|precision\s*=")
#: Names of the training wrappers whose ``.scaler`` is a GradScaler (`WRAPPER_OWNED_SUFFIXES`:
#: ``accelerator.scaler``, ``precision_plugin.scaler``, ``x._precision.scaler``).
_WRAPPER_TEXT = ("accelerator", "precision_plugin", "_precision")


def possible_kinds(text: str) -> tuple[str, ...]:
    """The kinds of value a module with source ``text`` may export, in `VALUE_KINDS`' terms;
    ``()`` when it surely exports none. What `value_records` recognises is spelt out in the
    module's text: a GradScaler by its constructor or annotation, both ending in
    ``GradScaler`` (an import alias names it too), or by a wrapper's ``.scaler``; an
    autocast's qualified name holds ``autocast``; an engine needs `ENGINE_TEXT`. A project
    asking another module for a GradScaler need not make that module's values when its text
    holds none (62 of 110 modules whose values a cold run of a 55-repository tree made)."""
    kinds = []
    if "GradScaler" in text or ("scaler" in text and any(name in text for name in _WRAPPER_TEXT)):
        kinds.append(SCALER)
    if "autocast" in text:
        kinds += [AUTOCAST, AUTOCAST_FACTORY]
    if ENGINE_TEXT.search(text) is not None:
        kinds.append(ENGINE)
    return tuple(kinds)


@dataclass(frozen=True, slots=True)
class ValueRecord:
    """One AMP value of a module that other modules may reach."""

    #: Where it is held: ``scaler`` (a module global), ``Trainer.self.scaler`` (an attribute
    #: the methods of class ``Trainer`` bind), ``build_engine()`` (what a function returns).
    holder: str
    #: `SCALER`, `AUTOCAST`, `AUTOCAST_FACTORY` or `ENGINE`.
    kind: str
    #: Line of the binding in its module.
    line: int
    #: An autocast's dtype (``fp16``/``bf16``; ``""`` when its module does not say, or when an
    #: ``enabled=`` argument switches it); an engine's framework.
    dtype: str = ""
    #: An engine's precision and where its setting is (``"bf16.enabled": true in the config
    #: dict on line 9``); whether it scales the loss itself.
    precision: str = ""
    source: str = ""
    scales: bool = False
    #: A DeepSpeed engine whose config turns on its ``torch_autocast`` mode.
    torch_autocast: bool = False
