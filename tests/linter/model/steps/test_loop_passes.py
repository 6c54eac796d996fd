"""What changes from one loop pass to the next (`linter.model.steps._loop_passes`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.steps._loop_passes import (
    assigned_in,
    breaks,
    follows_the_target,
    loop_targets,
    loops_between,
    mentions,
    on_one_pass_only,
    per_pass_names,
    skips_passes,
    variables_read,
)
from linter.model.syntax._module_index import ModuleIndex, module_index


def _index(source: str) -> ModuleIndex:
    source = textwrap.dedent(source)
    return module_index(ModuleContext("t.py", source, cst.parse_module(source)))


def test_per_pass_names_are_the_loop_targets_and_what_the_body_rebinds() -> None:
    index = _index(
        """
        count = 0
        for idx, (img, mask) in enumerate(loader):
            count += 1
            self.global_step = self.global_step + 1
            do_step = (idx + 1) % accum == 0
        """
    )
    (loop,) = index.nodes(cst.For)
    assert loop_targets(loop) == {"idx", "img", "mask"}
    assert per_pass_names(index, loop) == {
        "idx",
        "img",
        "mask",
        "count",
        "self.global_step",
        "do_step",
    }


def test_mentions_matches_whole_dotted_words_only() -> None:
    assert mentions("(idx + 1) % config.ACCUMULATION_STEPS", {"idx"})
    assert mentions("self.global_step % k", {"self.global_step"})
    assert not mentions("self.idx_map", {"idx"})
    assert not mentions("cfg.idx", {"idx"})


def test_breaks_sees_only_the_loops_own_break() -> None:
    index = _index(
        """
        while True:
            for x in xs:
                break
        for y in ys:
            if y:
                break
        """
    )
    outer_while = index.module.body[0]
    inner_for, last_for = index.nodes(cst.For)
    assert not breaks(outer_while)  # its only break is the inner for's
    assert breaks(inner_for)
    assert breaks(last_for)


def test_loops_between_stop_at_the_scope_and_the_function() -> None:
    index = _index(
        """
        for epoch in range(3):
            for batch in loader:
                for micro in batch:
                    scaler.unscale_(opt)
        """
    )
    call = index.calls_named(".unscale_")[0]
    outer, middle, inner = index.nodes(cst.For)
    assert list(loops_between(index, call, middle)) == [inner]
    assert list(loops_between(index, call, index.module)) == [inner, middle, outer]


def test_variables_read_are_names_not_attribute_parts() -> None:
    (expression,) = [cst.parse_expression("opts[k].step(self.scaler)")]
    assert variables_read(expression) == {"opts", "k", "self"}


def test_a_step_under_an_equality_with_the_loop_variable_runs_on_one_pass() -> None:
    index = _index(
        """
        for micro in range(accum):
            if micro == accum - 1:
                first()
            if (micro + 1) % accum == 0:
                second()
            if is_last_batch:
                third()
            if other == 0:
                fourth()
        """
    )
    (loop,) = index.nodes(cst.For)
    calls = {c.func.value: c for c in index.nodes(cst.Call) if isinstance(c.func, cst.Name)}
    assert on_one_pass_only(index, calls["first"], loop)
    assert not on_one_pass_only(index, calls["second"], loop)  # a modulo: many passes
    assert on_one_pass_only(index, calls["third"], loop)
    assert not on_one_pass_only(index, calls["fourth"], loop)  # not the loop's variable


def test_a_continue_of_the_loop_skips_passes_one_of_a_nested_loop_does_not() -> None:
    index = _index(
        """
        for opt in optimizers:
            if opt is not mine:
                continue
            step(opt)
        for opt in optimizers:
            for p in params:
                if p is None:
                    continue
            step(opt)
        """
    )
    first, second = [loop for loop in index.nodes(cst.For) if loop.target.value == "opt"]
    assert skips_passes(first.body)
    assert not skips_passes(second.body)


def test_assigned_in_holds_plain_assignments_in_the_loop() -> None:
    index = _index(
        """
        scaler = make()
        for case in cases:
            scaler = GradScaler()
            self.count += 1
        """
    )
    (loop,) = index.nodes(cst.For)
    assert assigned_in(index, loop) == {"scaler"}


def test_names_bound_from_the_loop_target_follow_it() -> None:
    index = _index(
        """
        for group in groups:
            optimizer = self.optimizers[group]
            inner = optimizer.inner
            shared = self.optimizers["backbone"]
            limit = config.max_norm
            def later():
                hidden = group
        """
    )
    (loop,) = index.nodes(cst.For)
    assert follows_the_target(index, loop) == {"group", "optimizer", "inner"}
