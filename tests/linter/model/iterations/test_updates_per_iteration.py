"""Updates per training iteration (`linter.model.iterations._updates_per_iteration`): none, or
several."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.iterations._iteration import of_module
from linter.model.iterations._updates_per_iteration import repeated_updates, steps_without_update
from linter.model.syntax._module_index import module_index


def _context(source: str) -> ModuleContext:
    source = textwrap.dedent(source)
    return ModuleContext("t.py", source, cst.parse_module(source))


def missing(source: str) -> list[tuple[int, int | None]]:
    """(step line, line of the update outside the loop or None) per step without update."""
    context = _context(source)
    found = steps_without_update(of_module(context), module_index(context))
    return [
        (
            context.position(m.step.call).start.line,
            context.position(m.outside.call).start.line if m.outside else None,
        )
        for m in found
    ]


def repeated(source: str) -> list[tuple[int, int | None, bool]]:
    """(update line, earlier update line or None, in a loop over optimizers) per repeat."""
    context = _context(source)
    found = repeated_updates(of_module(context), module_index(context))
    return [
        (
            context.position(r.update.site).start.line,
            context.position(r.earlier.site).start.line if r.earlier else None,
            r.loop is not None,
        )
        for r in found
    ]


def test_an_update_after_the_epoch_loop_is_outside_the_step_loop() -> None:
    assert missing(
        """
        def train(loader, scaler):
            for epoch in range(3):
                for x in loader:
                    scaler.scale(model(x)).backward()
                    scaler.step(opt)
                scaler.update()
        """
    ) == [(6, 7)]


def test_a_built_scaler_never_updated_has_no_update_at_all() -> None:
    assert missing(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.step(opt)
        """
    ) == [(6, None)]


def test_a_scaler_passed_in_and_never_updated_is_unknown() -> None:
    # It may be a wrapper whose step() updates too.
    assert (
        missing(
            """
        def train(loader, scaler):
            for x in loader:
                scaler.scale(model(x)).backward()
                scaler.step(opt)
        """
        )
        == []
    )


def test_an_update_in_the_same_iteration_or_a_disabled_scaler_is_no_missing_update() -> None:
    assert (
        missing(
            """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        off = torch.amp.GradScaler("cuda", enabled=False)
        for i, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            if (i + 1) % accum == 0:
                scaler.step(opt)
                scaler.update()
            off.step(opt)
        """
        )
        == []
    )


def test_a_step_on_the_last_pass_of_a_micro_batch_loop_is_not_per_pass() -> None:
    assert (
        missing(
            """
        def train(loader, scaler):
            for batch in loader:
                for micro in range(accum):
                    scaler.scale(model(batch[micro])).backward()
                    if micro == accum - 1:
                        scaler.step(opt)
            scaler.update()
        """
        )
        == []
    )


def test_an_update_in_a_loop_over_optimizers_repeats_per_optimizer() -> None:
    assert repeated(
        """
        for x in loader:
            scaler.scale(loss_fn(x)).backward()
            for opt in optimizers:
                scaler.step(opt)
                scaler.update()
        """
    ) == [(6, None, True)]


def test_an_update_on_the_last_optimizer_only_or_per_scaler_is_once() -> None:
    assert (
        repeated(
            """
        for x in loader:
            scaler.scale(loss_fn(x)).backward()
            for i, opt in enumerate(optimizers):
                scaler.step(opt)
                if i == len(optimizers) - 1:
                    scaler.update()
        """
        )
        == []
    )
    assert (
        repeated(
            """
        for x in loader:
            for scaler, opt in zip(scalers, optimizers):
                scaler.scale(loss_fn(x)).backward()
                scaler.step(opt)
            for scaler in scalers:
                scaler.update()
        """
        )
        == []
    )


def test_a_second_update_after_a_second_step_repeats_with_the_first_named() -> None:
    assert repeated(
        """
        for real in loader:
            scaler.scale(d_loss(real)).backward()
            scaler.step(opt_d)
            scaler.update()
            scaler.scale(g_loss(real)).backward()
            scaler.step(opt_g)
            scaler.update()
        """
    ) == [(8, 5, False)]


def test_an_update_in_an_arm_that_ends_the_iteration_or_of_another_scaler_is_once() -> None:
    assert (
        repeated(
            """
        for x in loader:
            scaler.scale(loss_fn(x)).backward()
            scaler.unscale_(opt)
            if not finite(opt):
                scaler.update()
                continue
            scaler.step(opt)
            scaler.update()
            scaler_g.scale(g_loss(x)).backward()
            scaler_g.step(opt_g)
            scaler_g.update()
        """
        )
        == []
    )


def test_an_update_in_a_loop_whose_continue_skips_other_optimizers_is_once() -> None:
    assert (
        repeated(
            """
        for x in loader:
            scaler.scale(loss_fn(x)).backward()
            for iopt, opt in enumerate(optimizers):
                if iopt != optim_idx:
                    continue
                scaler.step(opt)
                scaler.update()
        """
        )
        == []
    )


ONE_STEP_HELPER = """
import torch


class CheckpointTest:
    def _fp16_step(self, optimizer):
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = self.model(self.batch).sum()
        self.scaler.scale(loss).backward()
        self.scaler.step(optimizer)
        self.scaler.update()

    def test_resume(self):
        self._fp16_step({first})
        self.save()
        self._fp16_step({second})
"""


def test_a_one_step_helper_called_twice_for_one_optimizer_is_two_iterations() -> None:
    # The second call steps the same optimizer again: a second iteration, updated once each.
    source = ONE_STEP_HELPER.format(first="self.optimizer", second="self.optimizer")
    assert repeated(source) == []


def test_a_one_step_helper_called_for_two_optimizers_updates_twice_in_one_iteration() -> None:
    source = ONE_STEP_HELPER.format(first="self.encoder_opt", second="self.decoder_opt")
    assert repeated(source) == [(17, 15, False)]


def test_the_same_optimizer_stepped_twice_inline_is_two_iterations() -> None:
    assert (
        repeated(
            """
        def warm_start(model, batches, optimizer, scaler):
            scaler.scale(model(batches[0])).backward()
            scaler.step(optimizer)
            scaler.update()
            scaler.scale(model(batches[1])).backward()
            scaler.step(optimizer)
            scaler.update()
        """
        )
        == []
    )


def test_an_optimizer_known_only_as_a_parameter_of_a_deeper_helper_is_not_the_same() -> None:
    # step(opt) two calls down: which optimizer each call steps is unknown, so it is reported.
    assert repeated(
        """
        class Trainer:
            def _apply(self, optimizer):
                self.scaler.step(optimizer)
                self.scaler.update()

            def _step(self, loss, optimizer):
                self.scaler.scale(loss).backward()
                self._apply(optimizer)

            def fit(self, loader):
                for batch in loader:
                    self._step(self.d_loss(batch), self.opt_d)
                    self._step(self.g_loss(batch), self.opt_d)
        """
    ) == [(14, 13, False)]
