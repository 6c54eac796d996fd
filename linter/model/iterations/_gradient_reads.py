"""Where a module looks at gradient values: norms, statistics and histograms of ``.grad``.

Between ``scaler.scale(loss).backward()`` and ``scaler.unscale_(optimizer)`` every gradient is
multiplied by the loss scale, so a value read from them then is off by that factor. The
iteration model (`linter.model.iterations._iteration`) turns the reads found here into "gradient
read"
events; AMP012 asks where they fall. Two questions are answered here, once per call:

- **Is it a read of gradient values?** A statistic of a gradient tensor (``p.grad.norm()``,
  ``p.grad.data.abs().max()``, ``torch.linalg.vector_norm(p.grad)``), torch's
  ``get_total_norm`` (the first half of ``clip_grad_norm_`` since torch 2.6), or a histogram of
  one (``writer.add_histogram(name, p.grad, step)``, ``wandb.Histogram(p.grad.cpu())``).
- **Is the value looked at?** Not when it only feeds an overflow check (``isfinite`` of a
  scaled value is right: inf times the scale is inf), only feeds a clip (AMP003's business), or
  is assigned to a name nothing uses.

`gradient_loggers` finds the other way to look: ``wandb.watch(model)``, which logs every
gradient from a hook on the backward pass, before any ``unscale_`` can run.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from linter.model.syntax import ImportAliases, ModuleIndex, descendants, dotted_name, last_part

#: Functions that compute a norm of many gradients at once.
GRADIENT_NORM_FUNCTIONS = frozenset(
    {"torch.nn.utils.get_total_norm", "torch.nn.utils.clip_grad.get_total_norm"}
)

#: Functions that reduce the tensor they are given (first argument) to a statistic or histogram.
STATISTIC_FUNCTIONS = frozenset(
    {
        *(f"torch.{name}" for name in ("norm", "max", "min", "mean", "std", "var", "sum")),
        *(f"torch.{name}" for name in ("amax", "amin", "histc", "histogram", "median")),
        *(f"torch.linalg.{name}" for name in ("norm", "vector_norm", "matrix_norm")),
        "numpy.histogram",
        "numpy.linalg.norm",
        "wandb.Histogram",
    }
)

#: Tensor methods that reduce a gradient to a statistic.
STATISTIC_METHODS = frozenset(
    {"norm", "max", "min", "mean", "std", "var", "sum", "amax", "amin", "median", "item", "tolist"}
)

#: Attributes and methods that keep a tensor's values (up to sign or power), so a statistic of
#: ``p.grad.detach().abs()`` is a statistic of ``p.grad``.
VALUE_KEEPING = frozenset(
    {"data", "detach", "float", "double", "half", "clone", "abs", "pow", "square", "flatten"}
    | {"view", "reshape", "contiguous", "cpu", "cuda", "to", "numpy"}
)

#: Methods that record a histogram of a tensor argument (TensorBoard's ``SummaryWriter``).
HISTOGRAM_METHODS = frozenset({"add_histogram"})

#: Overflow checks: they answer the same on scaled gradients (inf and nan survive the scale).
OVERFLOW_CHECKS = frozenset(
    {f"{module}.{name}" for module in ("torch", "math", "numpy") for name in ("isfinite", "isinf")}
    | {f"{module}.isnan" for module in ("torch", "math", "numpy")}
)
#: ...and their tensor-method spellings (``norm.isfinite()``).
OVERFLOW_METHODS = frozenset({"isfinite", "isinf", "isnan"})

#: Receivers of ``.watch(model)`` that hook the backward pass: a run from ``wandb.init()``.
_WANDB_RUN_CONSTRUCTORS = frozenset({"wandb.init"})
#: ``wandb.watch``'s ``log`` values that log gradients (its default is ``"gradients"``).
_LOGS_GRADIENTS = frozenset({"gradients", "all"})


def is_gradient_expression(node: cst.BaseExpression) -> bool:
    """``p.grad``, ``p.grad.data``, ``p.grad.detach().abs()``: an expression whose values are
    a parameter's gradient (not ``torch.autograd.grad``, the function)."""
    while True:
        if isinstance(node, cst.Attribute) and node.attr.value in VALUE_KEEPING:
            node = node.value
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in VALUE_KEEPING
        ):
            node = node.func.value
        else:
            break
    if not (isinstance(node, cst.Attribute) and node.attr.value == "grad"):
        return False
    return last_part(dotted_name(node.value) or "") != "autograd"


class GradientReads:
    """Answers "does this call read gradient values, and is the value looked at?" for one
    module (see the module docstring)."""

    def __init__(
        self, index: ModuleIndex, aliases: ImportAliases, ignored_consumers: Iterable[str] = ()
    ) -> None:
        self._index = index
        self._aliases = aliases
        #: Qualified functions whose use of a read does not look at it (overflow checks, and
        #: the clips the caller names).
        self._ignored = OVERFLOW_CHECKS | frozenset(ignored_consumers)

    def _qualified(self, func: cst.BaseExpression) -> str | None:
        name = dotted_name(func)
        return self._aliases.qualify(name) if name is not None else None

    def reads(self, call: cst.Call) -> bool:
        """``call`` computes a statistic or histogram of gradient values."""
        func = call.func
        qualified = self._qualified(func)
        if qualified in GRADIENT_NORM_FUNCTIONS:
            return True
        if qualified in STATISTIC_FUNCTIONS:
            return bool(call.args) and is_gradient_expression(call.args[0].value)
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value in STATISTIC_METHODS:
            return is_gradient_expression(func.value)
        if func.attr.value in HISTOGRAM_METHODS:
            return any(is_gradient_expression(arg.value) for arg in call.args)
        return False

    def observed(self, call: cst.Call) -> bool:
        """A read whose value is looked at: not only overflow-checked, only clipped with, or
        assigned to a name nothing reads."""
        consumer = self._consumer(call)
        if consumer is None:
            return False
        if not isinstance(consumer, cst.Assign):
            return True
        targets = consumer.targets
        if len(targets) != 1 or not isinstance(targets[0].target, cst.Name):
            return True  # ``self.norm = ...``, tuple targets: kept for later, looked at
        name = targets[0].target.value
        scope = self._index.enclosing_function(consumer) or self._index.module
        uses = [
            node
            for node in descendants(scope)
            if isinstance(node, cst.Name)
            and node.value == name
            and node is not targets[0].target
            and self._is_load(node)
        ]
        return any(self._consumer(use) is not None for use in uses)

    def _consumer(self, node: cst.BaseExpression) -> cst.CSTNode | None:
        """What takes the value of ``node``, past conversions that keep it (``.item()``,
        ``float(...)``): None for an overflow check or an ignored function, else the consumer
        (an ``Assign`` when it is stored)."""
        parent = self._index.parent.get(node)
        while parent is not None:
            if isinstance(parent, cst.Attribute) and parent.value is node:
                call = self._index.parent.get(parent)
                method = parent.attr.value
                if not (isinstance(call, cst.Call) and call.func is parent):
                    return parent
                if method in OVERFLOW_METHODS:
                    return None
                if method not in VALUE_KEEPING | {"item", "tolist"}:
                    return call
                node, parent = call, self._index.parent.get(call)
                continue
            if isinstance(parent, cst.Arg):
                call = self._index.parent.get(parent)
                if not isinstance(call, cst.Call):
                    return parent
                qualified = self._qualified(call.func)
                if qualified in self._ignored:
                    return None
                if qualified in ("float", "int") or (
                    isinstance(call.func, cst.Attribute) and call.func.attr.value in VALUE_KEEPING
                ):
                    node, parent = call, self._index.parent.get(call)
                    continue
                return call
            return parent
        return None

    def _is_load(self, name: cst.Name) -> bool:
        parent = self._index.parent.get(name)
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            return False
        if isinstance(parent, cst.Arg) and parent.keyword is name:
            return False
        return not (isinstance(parent, cst.AssignTarget) and parent.target is name)


def gradient_loggers(index: ModuleIndex, aliases: ImportAliases) -> list[cst.Call]:
    """``wandb.watch(model)`` / ``run.watch(model, log="all")`` calls that log gradients.

    wandb registers a hook on every parameter that records the gradient as the backward pass
    produces it, so under ``scaler.scale(loss).backward()`` it records scaled values whatever
    ``unscale_`` does later (wandb#9092, wandb#4369). ``log="parameters"``/``None`` logs no
    gradients; a ``log`` that is not a literal is unknown and left alone."""
    runs = {
        name
        for assign in index.nodes(cst.Assign)
        if isinstance(value := assign.value, cst.Call)
        and aliases.qualify(dotted_name(value.func) or "") in _WANDB_RUN_CONSTRUCTORS
        for target in assign.targets
        if (name := dotted_name(target.target)) is not None
    }
    found = []
    for call in index.calls_named(".watch") + index.calls_named("watch"):
        name = dotted_name(call.func)
        if name is None:
            continue
        receiver = name.rpartition(".")[0]
        if aliases.qualify(name) != "wandb.watch" and receiver not in runs:
            continue
        if _logs_gradients(call):
            found.append(call)
    return found


def _logs_gradients(call: cst.Call) -> bool:
    positional = [arg for arg in call.args if arg.keyword is None]
    log = next((a.value for a in call.args if a.keyword and a.keyword.value == "log"), None)
    if log is None and len(positional) >= 3:
        log = positional[2].value
    if log is None:
        return True
    return isinstance(log, cst.SimpleString) and log.evaluated_value in _LOGS_GRADIENTS


def gradient_reads(
    index: ModuleIndex, aliases: ImportAliases, ignored: Iterable[str] = ()
) -> GradientReads:
    """The module's `GradientReads`, built once and shared."""
    return index.shared(GradientReads, lambda: GradientReads(index, aliases, ignored))
