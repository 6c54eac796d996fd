"""The events of one training iteration, as data: what each call does to the AMP recipe, and the
iteration that orders them.

`linter.model.iterations._iteration` finds them in a module (`TrainingIterations`); the recipe rules
and the step analyses read them through `Iteration.may_precede`, `Iteration.exclusive` and
`Iteration.between`, which answer from the module's path facts.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import libcst as cst

from linter.model.syntax import ModuleIndex, PathFacts


class Kind(enum.Enum):
    """What an event does to the gradients or the scaler."""

    #: ``scaler.scale(loss).backward()`` (or ``scaled = scaler.scale(loss); scaled.backward()``).
    SCALED_BACKWARD = "scaled backward"
    #: ``loss.backward()``, ``torch.autograd.backward(loss)``: no scaler in between.
    BACKWARD = "backward"
    #: ``scaler.unscale_(optimizer)``.
    UNSCALE = "unscale_"
    #: ``torch.nn.utils.clip_grad_norm_`` / ``clip_grad_value_`` / ``clip_grads_with_norm_``
    #: (any alias), or an FSDP module's ``clip_grad_norm_`` method.
    CLIP = "clip"
    #: ``scaler.step(optimizer)``.
    SCALER_STEP = "scaler step"
    #: ``optimizer.step()``: the optimizer stepped directly.
    OPTIMIZER_STEP = "optimizer step"
    #: ``scaler.update()``.
    UPDATE = "update"
    #: ``optimizer.zero_grad()`` / ``model.zero_grad()``.
    ZERO_GRAD = "zero_grad"
    #: A look at gradient values whose result is used: ``p.grad.norm()``, ``get_total_norm``,
    #: a histogram of ``p.grad`` (see `linter.model.iterations._gradient_reads`).
    GRAD_READ = "gradient read"


#: Events that mark where an optimizer step happens: they anchor iterations.
STEP_KINDS = frozenset({Kind.SCALER_STEP, Kind.OPTIMIZER_STEP, Kind.UPDATE})


#: Gradient-clipping functions, by qualified name.
CLIP_FUNCTIONS = frozenset(
    {
        f"torch.nn.utils{module}.{name}"
        for module in ("", ".clip_grad")
        for name in ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")
    }
    # torch >= 2.6 splits clip_grad_norm_ into get_total_norm + clip_grads_with_norm_.
    | {"torch.nn.utils.clip_grads_with_norm_", "torch.nn.utils.clip_grad.clip_grads_with_norm_"}
)


@dataclass(frozen=True, slots=True)
class Event:
    """One call of the AMP recipe, where it happens and what it touches."""

    kind: Kind
    #: The call (for a scaled backward, the ``.backward()`` call).
    call: cst.Call
    #: Dotted text of the scaler it goes through (``scaler``, ``self.grad_scaler``), if any.
    scaler: str | None = None
    #: Dotted text of the optimizer it steps, unscales or zeroes, if known.
    optimizer: str | None = None
    #: The call of this module's function that brought this event into the iteration (the
    #: outermost one, in the iteration's own body), or None when the event is written there.
    via: cst.Call | None = None

    @property
    def site(self) -> cst.Call:
        """Where the event happens as seen from its iteration: the call itself or ``via``."""
        return self.via if self.via is not None else self.call


@dataclass(frozen=True)
class Iteration:
    """The events of one optimizer step, in source order (see the module docstring)."""

    #: The loop (``For``/``While``) or function whose body runs once per step.
    scope: cst.CSTNode
    events: tuple[Event, ...]
    _facts: PathFacts = field(repr=False, compare=False)
    _index: ModuleIndex = field(repr=False, compare=False)
    #: `may_precede`'s and `between`'s answers, by the events' identities (each entry holds
    #: its events, so that no identity is reused while it is kept): the rules ask them for
    #: every pair of some events' kinds.
    _may_precede: dict[tuple[int, int], tuple[Event, Event, bool]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _between: dict[tuple[int, int, tuple[Kind, ...]], tuple[Event, Event, list[Event]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def of(self, *kinds: Kind) -> list[Event]:
        """The events of the given kinds, in source order."""
        return [event for event in self.events if event.kind in kinds]

    def may_precede(self, a: Event, b: Event) -> bool:
        """Some execution of this one iteration runs ``a`` and later ``b``: in source order, or
        round a loop nested in the iteration (a micro-batch loop) — not round the iteration's
        own loop, which starts the next iteration."""
        key = id(a), id(b)
        found = self._may_precede.get(key)
        if found is None:
            found = self._may_precede[key] = a, b, self._may_precede_now(a, b)
        return found[2]

    def _may_precede_now(self, a: Event, b: Event) -> bool:
        if a.site is b.site:
            return a.call is not b.call and self._facts.may_precede(a.call, b.call)
        if not self._facts.may_precede(a.site, b.site):
            return False
        if self._facts.precedes_in_source(a.site, b.site):
            return True
        around_b = set(self._index.ancestors(b.site))
        for loop in self._index.ancestors(a.site):
            if loop is self.scope:
                return False
            if isinstance(loop, cst.For | cst.While) and loop in around_b:
                return True
        return False

    def exclusive(self, a: Event, b: Event) -> bool:
        """No execution runs both ``a`` and ``b``."""
        if a.site is b.site:
            return a.via is not None and self._facts.exclusive(a.call, b.call)
        return self._facts.exclusive(a.site, b.site)

    def between(self, first: Event, last: Event, *kinds: Kind) -> list[Event]:
        """Events of ``kinds`` that may run after ``first`` and before ``last``."""
        key = id(first), id(last), kinds
        found = self._between.get(key)
        if found is None:
            found = self._between[key] = first, last, self._between_now(first, last, kinds)
        return list(found[2])

    def _between_now(self, first: Event, last: Event, kinds: tuple[Kind, ...]) -> list[Event]:
        return [
            event
            for event in self.of(*kinds)
            if event is not first
            and event is not last
            and self.may_precede(first, event)
            and self.may_precede(event, last)
        ]
