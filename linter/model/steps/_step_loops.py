"""Which loops are training-step loops: a loop over epochs runs its body once per epoch, and a
loop over a collection (``.items()``, ``.parameters()``, ``param_groups``) walks elements, not
steps; the loop around either decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from linter.model.steps._step_guards import names_in
from linter.model.syntax import children, dotted_name, last_part

#: Loop variables and bounds that mean the loop counts epochs.
EPOCH_WORD = re.compile(r"epoch", re.IGNORECASE)


#: ...unless they count steps within an epoch (``steps_per_epoch``, ``iters_per_epoch``).
NOT_EPOCH_WORD = re.compile(r"step|iter|batch|per_epoch", re.IGNORECASE)


#: Methods whose result a loop traverses element by element: a collection, not the steps.
TRAVERSED_COLLECTIONS = frozenset(
    {
        "items",
        "keys",
        "values",
        "parameters",
        "named_parameters",
        "buffers",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "param_groups",
    }
)


#: Functions that count a loop's iterations, whose bounds may say "epochs".
_RANGE_FUNCTIONS = frozenset({"range", "trange"})


#: Wrappers a loop's iterable may sit in: ``enumerate(x.items())``.
_ITERABLE_WRAPPERS = frozenset({"enumerate", "sorted", "list", "tuple", "reversed", "zip"})


def is_traversal(loop: cst.For | cst.While) -> bool:
    """``for name, p in model.named_parameters()``: once per element, not once per step."""
    if not isinstance(loop, cst.For):
        return False
    iterable = loop.iter
    while (
        isinstance(iterable, cst.Call)
        and isinstance(iterable.func, cst.Name)
        and iterable.func.value in _ITERABLE_WRAPPERS
        and iterable.args
    ):
        iterable = iterable.args[0].value
    if isinstance(iterable, cst.Call):
        iterable = iterable.func
    name = dotted_name(iterable)
    if name is None:
        return False
    return last_part(name) in TRAVERSED_COLLECTIONS or "scaler" in name.lower()


def _counted_ranges(iterable: cst.BaseExpression) -> Iterator[cst.Call]:
    """The ``range(...)``/``trange(...)`` calls in a loop's iterable (``tqdm(range(epochs))``)."""
    stack: list[cst.CSTNode] = [iterable]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            name = dotted_name(current.func)
            if name is not None and last_part(name) in _RANGE_FUNCTIONS:
                yield current
                continue
        stack.extend(children(current))


def is_epoch_loop(loop: cst.For | cst.While) -> bool:
    """``for epoch in range(epochs)``: its body runs once per epoch, not once per step.

    A ``for`` loop says so in its target (``epoch``) or in the bounds of a ``range`` it counts
    over (``range(num_epochs)``); the name of a collection it walks does not count, because
    ``with tqdm(loader) as tepoch: for batch in tepoch:`` walks the batches of one epoch.
    """
    if isinstance(loop, cst.For):
        header: tuple[cst.CSTNode, ...] = (loop.target, *_counted_ranges(loop.iter))
    else:
        header = (loop.test,)
    return any(
        EPOCH_WORD.search(name) and not NOT_EPOCH_WORD.search(name)
        for part in header
        for name in names_in(part)
    )
