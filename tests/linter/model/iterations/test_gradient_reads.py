"""Gradient reads (`linter.model.iterations._gradient_reads`) and their events in the iteration
model."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.iterations._gradient_reads import gradient_loggers, is_gradient_expression
from linter.model.iterations._iteration import of_module
from linter.model.iterations._iteration_events import Kind
from linter.model.syntax._dotted_names import ImportAliases
from linter.model.syntax._module_index import module_index


def _context(source: str) -> ModuleContext:
    source = textwrap.dedent(source)
    return ModuleContext("t.py", source, cst.parse_module(source))


def read_lines(source: str) -> list[int]:
    """Lines of the gradient-read events the iteration model finds."""
    context = _context(source)
    model = of_module(context)
    return [
        context.position(event.call).start.line
        for event in model.events
        if event.kind is Kind.GRAD_READ
    ]


@pytest.mark.parametrize(
    "expression",
    ["p.grad", "p.grad.data", "p.grad.detach().abs()", "self.layer.weight.grad.float().cpu()"],
)
def test_gradient_expressions(expression: str) -> None:
    assert is_gradient_expression(cst.parse_expression(expression))


@pytest.mark.parametrize(
    "expression", ["torch.autograd.grad", "p.requires_grad", "p.grad_fn", "p.data", "grad"]
)
def test_not_gradient_expressions(expression: str) -> None:
    assert not is_gradient_expression(cst.parse_expression(expression))


def test_statistics_norms_and_histograms_of_gradients_are_reads() -> None:
    assert read_lines(
        """
        import torch
        from torch.nn.utils import get_total_norm
        print(p.grad.norm())
        log(p.grad.data.abs().max().item())
        log(torch.linalg.vector_norm(p.grad.detach(), 2))
        writer.add_histogram(name, p.grad, step)
        log(get_total_norm([p.grad for p in model.parameters()]))
        """
    ) == [4, 5, 6, 7, 8]


def test_one_chain_is_one_read() -> None:
    # ``p.grad.abs().max().item()``: the max is the read; abs keeps values, item converts.
    assert read_lines("log(p.grad.abs().max().item())\n") == [1]


def test_reads_used_only_for_an_overflow_check_are_not_events() -> None:
    # inf and nan survive the loss scale: an isfinite of scaled gradients answers right.
    assert (
        read_lines(
            """
            import math
            import torch
            ok = torch.isfinite(p.grad.norm())
            bad = p.grad.sum().isnan()
            norm = torch.nn.utils.get_total_norm(grads)
            if not math.isfinite(norm):
                skip = True
            """
        )
        == []
    )


def test_a_norm_handed_only_to_a_clip_is_the_clips_business() -> None:
    # torch >= 2.6's two halves of clip_grad_norm_: AMP003 reports the clip.
    assert (
        read_lines(
            """
            import torch
            total = torch.nn.utils.get_total_norm(grads)
            torch.nn.utils.clip_grads_with_norm_(params, 1.0, total)
            """
        )
        == []
    )


def test_a_stored_norm_that_is_logged_is_a_read() -> None:
    assert read_lines(
        """
        import torch
        total = torch.nn.utils.get_total_norm(grads)
        if not torch.isfinite(total):
            skip = True
        wandb.log({"grad_norm": total})
        """
    ) == [3]


def test_a_stored_norm_nothing_uses_is_not_a_read() -> None:
    assert read_lines("unused = p.grad.norm()\n") == []


def test_reads_join_the_iteration_between_backward_and_step() -> None:
    context = _context(
        """
        for batch in loader:
            scaler.scale(loss).backward()
            print(p.grad.norm())
            scaler.step(optimizer)
            scaler.update()
        """
    )
    (iteration,) = of_module(context).iterations
    assert [event.kind for event in iteration.events] == [
        Kind.SCALED_BACKWARD,
        Kind.GRAD_READ,
        Kind.SCALER_STEP,
        Kind.UPDATE,
    ]


def test_a_read_in_a_helper_is_brought_by_its_call() -> None:
    context = _context(
        """
        def grad_norm(model):
            return sum(p.grad.norm() ** 2 for p in model.parameters()) ** 0.5

        for batch in loader:
            scaler.scale(loss).backward()
            logger.log(grad_norm(model))
            scaler.step(optimizer)
            scaler.update()
        """
    )
    (iteration,) = of_module(context).iterations
    (read,) = iteration.of(Kind.GRAD_READ)
    assert read.via is not None
    assert context.position(read.site).start.line == 7


def _loggers(source: str) -> list[int]:
    context = _context(source)
    index = module_index(context)
    aliases = ImportAliases(index.nodes(cst.Import) + index.nodes(cst.ImportFrom))
    return [context.position(call).start.line for call in gradient_loggers(index, aliases)]


def test_wandb_watch_logs_gradients_by_default_and_with_all() -> None:
    assert _loggers(
        """
        import wandb
        run = wandb.init(project="p")
        wandb.watch(model)
        wandb.watch(model, log="all", log_freq=100)
        run.watch(model, None, "gradients")
        """
    ) == [4, 5, 6]


def test_wandb_watch_of_parameters_or_an_unknown_log_is_not_a_gradient_logger() -> None:
    assert (
        _loggers(
            """
            import wandb
            wandb.watch(model, log="parameters")
            wandb.watch(model, log=None)
            wandb.watch(model, log=args.watch)
            observer.watch(model)
            """
        )
        == []
    )
