"""Issue 45: which gradient tensors overflowed, kept on the device, reported at one host read."""

from __future__ import annotations

import dataclasses
import math
import pickle

import pytest
import torch
from overflow_blocks import (
    OVERFLOWING_TENSOR,
    BlockNet,
    make_block_overflow,
    train_step,
)
from scaler_harness import MODES, OPTIMIZERS

from scaler import GradScaler, OverflowReport, OverflowRow

#: The step at which the block is rescaled (steps before it are clean at any scale).
RESCALE_AT = 3
STEPS = 20


def tracked_run(mode: str, rescale: bool, **scaler_options) -> tuple[GradScaler, list[bool]]:
    """``STEPS`` steps of BlockNet with AdamW in ``mode``; the block made to overflow at
    ``RESCALE_AT`` when ``rescale``. Returns the scaler and whether each step was skipped.

    The model is gone when the report is read: the names ``watch()`` gave must outlive it.
    """
    model = BlockNet()
    # A small LR: the other layers stay well inside fp16 (a larger one lets later steps
    # overflow elsewhere too, and the skipped steps would no longer be the block's alone).
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, **MODES[mode])
    scaler = GradScaler("cpu", growth_interval=4, track_overflows=True, **scaler_options)
    scaler.watch(model)
    skipped = []
    for step in range(STEPS):
        if rescale and step == RESCALE_AT:
            make_block_overflow(model)
        skipped.append(bool(train_step(model, optimizer, scaler)))
    return scaler, skipped


# --------------------------------------------------------------------------- the done-when gate


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_report_names_the_one_overflowing_layer_with_its_first_step_and_count(
    mode: str,
) -> None:
    scaler, skipped = tracked_run(mode, rescale=True)
    # Only that block's gradient can overflow, so the skipped steps are exactly its steps.
    overflowing_steps = [step for step, was_skipped in enumerate(skipped) if was_skipped]
    assert overflowing_steps, "the rescaled block must overflow at the default scale"
    assert overflowing_steps[0] == RESCALE_AT
    report = scaler.overflow_report()
    assert [row.name for row in report.rows] == [OVERFLOWING_TENSOR]
    (row,) = report.rows
    assert row.first_step == overflowing_steps[0]
    assert row.nonfinite_steps == len(overflowing_steps)
    assert row.last_step == overflowing_steps[-1]
    assert (report.tracked_tensors, report.overflowed_tensors, report.steps) == (16, 1, STEPS)
    assert scaler.stats().overflowed_tensors == 1


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_twin_without_the_rescaled_block_reports_nothing(mode: str) -> None:
    scaler, skipped = tracked_run(mode, rescale=False)
    assert not any(skipped)
    report = scaler.overflow_report()
    assert report.rows == ()
    assert (report.tracked_tensors, report.overflowed_tensors) == (16, 0)
    assert scaler.stats().overflowed_tensors == 0
    assert str(report) == f"No gradient overflowed: 16 tensors tracked over {STEPS} steps."


@pytest.mark.parametrize("mode", sorted(MODES))
def test_tracking_changes_nothing_in_the_training(mode: str) -> None:
    results = []
    for track in (False, True):
        model = BlockNet()
        optimizer = OPTIMIZERS["adamw"](model.parameters(), **MODES[mode])
        scaler = GradScaler("cpu", growth_interval=4, track_overflows=track)
        scales = []
        for step in range(12):
            if step == RESCALE_AT:
                make_block_overflow(model)
            train_step(model, optimizer, scaler)
            scales.append(scaler.get_scale())
        stats = dataclasses.replace(scaler.stats(), overflowed_tensors=None)
        results.append((scales, [p.detach().clone() for p in model.parameters()], stats))
    (scales_off, params_off, stats_off), (scales_on, params_on, stats_on) = results
    assert scales_on == scales_off
    assert stats_on == stats_off
    for off, on in zip(params_off, params_on, strict=True):
        assert torch.equal(off, on)


# --------------------------------------------------------------------------- what is recorded


def poisoned_run(scaler: GradScaler, params, optimizer, poison: dict[int, dict[int, float]]):
    """One step per entry of ``poison``: every gradient 1.0, then ``{param: value}`` written
    into element 0 of those gradients."""
    for step in range(len(poison)):
        scaler.scale(torch.ones(()))
        for param in params:
            param.grad = torch.ones_like(param)
        for index, value in poison[step].items():
            params[index].grad.view(-1)[0] = value
        scaler.step(optimizer)
        scaler.update()


def test_rows_are_sorted_by_first_step_then_by_count_and_cut_at_top() -> None:
    params = [torch.nn.Parameter(torch.ones(3)) for _ in range(4)]
    optimizer = torch.optim.SGD(params, lr=0.0)
    scaler = GradScaler("cpu", track_overflows=True)
    scaler.watch(dict(zip("abcd", params, strict=True)))
    inf, nan = math.inf, math.nan
    poison = {0: {}, 1: {1: inf}, 2: {0: nan, 2: inf}, 3: {2: -inf}, 4: {2: nan}, 5: {0: inf}}
    poisoned_run(scaler, params, optimizer, poison)
    report = scaler.overflow_report()
    assert [(r.name, r.nonfinite_steps, r.first_step, r.last_step) for r in report.rows] == [
        ("b", 1, 1, 1),
        ("c", 3, 2, 4),  # first at 2 like "a", but more often
        ("a", 2, 2, 5),
    ]
    assert (report.tracked_tensors, report.overflowed_tensors) == (4, 3)
    top = scaler.overflow_report(top=2)
    assert [r.name for r in top.rows] == ["b", "c"]
    assert top.overflowed_tensors == 3
    assert "the first 2 of 3" in str(top)
    assert len(scaler.overflow_report(top=None).rows) == 3


def max_abs_oracle(mode: str) -> tuple[dict[str, float], OverflowReport]:
    """Train 4 steps: the head's weight poisoned at step 1, every tensor at step 3 (so that each
    is a row). Returns each tensor's largest finite unscaled |grad|, computed from the gradients
    themselves as the unscale kernel would unscale them, and the tracker's report."""
    model = BlockNet()
    optimizer = OPTIMIZERS["adam"](model.parameters(), **MODES[mode])
    scaler = GradScaler("cpu", track_overflows=True)
    scaler.watch(model)
    expected = {name: 0.0 for name, _ in model.named_parameters()}
    inputs, targets = torch.randn(32, 8), torch.randn(32, 4)
    for step in range(4):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(inputs).float(), targets)
        scaler.scale(loss).backward()
        for name, param in model.named_parameters():
            if step == 3 or (step == 1 and name == "head.weight"):
                param.grad.view(-1)[0] = math.nan
        inverse = torch.tensor(scaler.get_scale(), dtype=torch.float64).reciprocal().float()
        for name, param in model.named_parameters():
            peak = param.grad.abs().max()
            if torch.isfinite(peak):
                expected[name] = max(expected[name], float(peak * inverse))
        scaler.step(optimizer)
        scaler.update()
    return expected, scaler.overflow_report(top=None)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_max_abs_is_the_largest_finite_unscaled_gradient(mode: str) -> None:
    expected, report = max_abs_oracle(mode)
    assert (report.rows[0].name, report.rows[0].first_step) == ("head.weight", 1)
    assert {r.name for r in report.rows} == set(expected)
    for row in report.rows:
        assert expected[row.name] > 0
        # Equal bits where the kernel unscales (rounding is monotone); the fused path divides
        # by the scale, which may round the other way.
        assert row.max_abs == pytest.approx(expected[row.name], rel=1e-6), row.name
        if mode != "fused":
            assert row.max_abs == expected[row.name], row.name


def test_nan_and_negative_infinity_count_as_overflows() -> None:
    params = [torch.nn.Parameter(torch.ones(3)) for _ in range(2)]
    scaler = GradScaler("cpu", track_overflows=True)
    poisoned_run(scaler, params, torch.optim.SGD(params, lr=0.0), {0: {0: math.nan, 1: -math.inf}})
    assert [r.nonfinite_steps for r in scaler.overflow_report().rows] == [1, 1]


def test_a_tensor_that_never_was_finite_has_max_abs_zero_and_infinite_headroom() -> None:
    params = [torch.nn.Parameter(torch.ones(3))]
    scaler = GradScaler("cpu", track_overflows=True)
    poisoned_run(scaler, params, torch.optim.SGD(params, lr=0.0), {0: {0: math.inf}})
    (row,) = scaler.overflow_report().rows
    assert row.max_abs == 0.0
    assert row.headroom == math.inf
    assert OverflowRow("w", 1, 0, 0, max_abs=2.0).headroom == 32752.0  # 65504 / 2


# --------------------------------------------------------------------------- names and positions


def test_without_watch_tensors_are_named_by_their_position() -> None:
    params = [torch.nn.Parameter(torch.ones(2)) for _ in range(3)]
    optimizer = torch.optim.SGD([{"params": params[:2]}, {"params": params[2:]}], lr=0.0)
    scaler = GradScaler("cpu", track_overflows=True)
    poisoned_run(scaler, params, optimizer, {0: {1: math.inf}, 1: {2: math.inf}})
    assert [row.name for row in scaler.overflow_report().rows] == [
        "param_groups[0][1]",
        "param_groups[1][0]",
    ]


def test_several_optimizers_each_name_their_own_tensors() -> None:
    first = [torch.nn.Parameter(torch.ones(2)) for _ in range(2)]
    second = [torch.nn.Parameter(torch.ones(2)) for _ in range(2)]
    optimizers = [torch.optim.SGD(first, lr=0.0), torch.optim.Adam(second, foreach=True)]
    scaler = GradScaler("cpu", track_overflows=True)
    scaler.watch({"second.1": second[1]})
    for step in range(3):
        scaler.scale(torch.ones(()))
        for param in first + second:
            param.grad = torch.ones(2)
        if step == 1:
            first[0].grad[0] = math.inf  # only the first optimizer skips
        if step == 2:
            second[1].grad[0] = math.inf
        for optimizer in optimizers:
            scaler.step(optimizer)
        scaler.update()
    rows = scaler.overflow_report().rows
    assert [(r.name, r.first_step) for r in rows] == [
        ("optimizers[0].param_groups[0][0]", 1),
        ("second.1", 2),
    ]
    assert scaler.overflow_report().tracked_tensors == 4


def test_watch_takes_modules_dicts_and_pairs_with_a_prefix_and_the_latest_name_wins() -> None:
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    scaler = GradScaler("cpu", track_overflows=True)
    poisoned_run(scaler, list(model.parameters()), optimizer, {0: {0: math.inf, 1: math.inf}})
    scaler.watch(model)
    assert [r.name for r in scaler.overflow_report().rows] == ["weight", "bias"]
    scaler.watch(model.named_parameters(), prefix="G.")
    assert [r.name for r in scaler.overflow_report().rows] == ["G.weight", "G.bias"]
    scaler.watch({"the bias": model.bias})
    assert [r.name for r in scaler.overflow_report().rows] == ["G.weight", "the bias"]


def test_a_bad_item_in_watch_leaves_the_names_as_they_were() -> None:
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    scaler = GradScaler("cpu", track_overflows=True)
    poisoned_run(scaler, list(model.parameters()), optimizer, {0: {0: math.inf}})
    with pytest.raises(TypeError, match="item 1"):
        scaler.watch([("w", model.weight), ("b", "not a tensor")])
    assert [r.name for r in scaler.overflow_report().rows] == ["param_groups[0][0]"]


# --------------------------------------------------------------------------- layouts


def test_a_tensor_without_a_gradient_in_some_steps_keeps_its_position_and_counts() -> None:
    params = [torch.nn.Parameter(torch.ones(2)) for _ in range(3)]
    optimizer = torch.optim.SGD(params, lr=0.0)
    scaler = GradScaler("cpu", track_overflows=True)
    scaler.watch(dict(zip("abc", params, strict=True)))
    # step: which params have a gradient, which of them is inf
    plan = [("abc", ""), ("bc", "c"), ("ac", "a"), ("ab", "b"), ("abc", "c")]
    for present, poisoned in plan:
        scaler.scale(torch.ones(()))
        for name, param in zip("abc", params, strict=True):
            param.grad = torch.ones(2) if name in present else None
            if name in poisoned:
                param.grad[1] = math.inf
        scaler.step(optimizer)
        scaler.update()
    rows = {
        r.name: (r.nonfinite_steps, r.first_step, r.last_step)
        for r in scaler.overflow_report().rows
    }
    assert rows == {"c": (2, 1, 4), "a": (1, 2, 2), "b": (1, 3, 3)}


def test_a_parameter_group_added_mid_run_is_tracked() -> None:
    first, later = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([first], lr=0.0)
    scaler = GradScaler("cpu", track_overflows=True)
    poisoned_run(scaler, [first], optimizer, {0: {}, 1: {}})
    optimizer.add_param_group({"params": [later]})
    poisoned_run(scaler, [first, later], optimizer, {0: {1: math.inf}})
    (row,) = scaler.overflow_report().rows
    assert (row.name, row.first_step) == ("param_groups[1][0]", 2)


def test_sparse_gradients_are_tracked_by_their_values() -> None:
    embedding = torch.nn.Embedding(10, 3, sparse=True)
    dense = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD([*embedding.parameters(), *dense.parameters()], lr=0.0)
    scaler = GradScaler("cpu", track_overflows=True)
    scaler.watch(embedding, prefix="embedding.")
    scaler.watch(dense, prefix="dense.")
    for step in range(2):
        optimizer.zero_grad()
        scaler.scale(dense(embedding(torch.tensor([1, 4]))).sum()).backward()
        if step == 1:
            embedding.weight.grad._values()[0, 0] = math.inf
        scaler.step(optimizer)
        scaler.update()
    assert [(r.name, r.first_step) for r in scaler.overflow_report().rows] == [
        ("embedding.weight", 1)
    ]


def test_unscale_before_clipping_records_each_step_once_before_the_clip() -> None:
    model = BlockNet()
    optimizer = torch.optim.AdamW(model.parameters(), foreach=True)
    scaler = GradScaler("cpu", track_overflows=True)
    scaler.watch(model)
    inputs, targets = torch.randn(32, 8), torch.randn(32, 4)
    unclipped = {}
    for step in range(3):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(inputs).float(), targets)
        scaler.scale(loss).backward()
        if step > 0:
            model.head.bias.grad[0] = math.inf
        scaler.unscale_(optimizer)
        if step == 0:
            unclipped = {n: float(p.grad.abs().max()) for n, p in model.named_parameters()}
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-6)
        scaler.step(optimizer)
        scaler.update()
    report = scaler.overflow_report()
    (row,) = report.rows
    assert (row.name, row.nonfinite_steps, row.first_step, row.last_step) == ("head.bias", 2, 1, 2)
    assert row.max_abs == pytest.approx(unclipped["head.bias"], rel=1e-6)
    assert row.max_abs > 1e-3  # the clip (to 1e-6) came after the record


# --------------------------------------------------------------------------- steps and state


def test_steps_are_numbered_as_stats_counts_them_and_continue_after_a_load() -> None:
    params = [torch.nn.Parameter(torch.ones(2))]
    optimizer = torch.optim.SGD(params, lr=0.0)
    scaler = GradScaler("cpu", track_overflows=True)
    poisoned_run(scaler, params, optimizer, {0: {}, 1: {}})
    scaler.update(1024.0)  # update(new_scale) is not a step, as in stats()
    assert scaler.stats().steps == 2
    poisoned_run(scaler, params, optimizer, {0: {0: math.inf}})
    assert scaler.overflow_report().rows[0].first_step == 2

    resumed = GradScaler("cpu", track_overflows=True)
    resumed.load_state_dict(scaler.state_dict())
    poisoned_run(resumed, params, torch.optim.SGD(params, lr=0.0), {0: {}, 1: {0: math.inf}})
    (row,) = resumed.overflow_report().rows
    assert (row.first_step, row.nonfinite_steps) == (4, 1)
    assert resumed.overflow_report().steps == resumed.stats().steps == 5


def test_a_load_mid_run_keeps_what_was_tracked_and_renumbers_from_the_checkpoint() -> None:
    params = [torch.nn.Parameter(torch.ones(2))]
    optimizer = torch.optim.SGD(params, lr=0.0)
    scaler = GradScaler("cpu", track_overflows=True)
    saved = scaler.state_dict()
    poisoned_run(scaler, params, optimizer, {0: {}, 1: {0: math.inf}})
    scaler.load_state_dict(saved)  # back to step 0
    poisoned_run(scaler, params, optimizer, {0: {0: math.inf}})
    (row,) = scaler.overflow_report().rows
    assert (row.nonfinite_steps, row.first_step, row.last_step) == (2, 0, 1)


def test_a_restores_dummy_step_is_not_a_step() -> None:
    params = [torch.nn.Parameter(torch.ones(2))]
    optimizer = torch.optim.SGD(params, lr=0.0)
    scaler = GradScaler("cpu", track_overflows=True)
    with scaler.restoring():
        poisoned_run(scaler, params, optimizer, {0: {}})
    poisoned_run(scaler, params, optimizer, {0: {0: math.inf}})
    assert scaler.overflow_report().rows[0].first_step == 0


def test_the_state_dict_is_the_same_with_tracking_and_loads_either_way() -> None:
    params = [torch.nn.Parameter(torch.ones(2))]
    scalers = {}
    for track in (False, True):
        scalers[track] = GradScaler("cpu", track_overflows=track)
        poisoned_run(scalers[track], params, torch.optim.SGD(params, lr=0.0), {0: {0: math.inf}})
    assert scalers[True].state_dict() == scalers[False].state_dict()
    plain, tracking = GradScaler("cpu"), GradScaler("cpu", track_overflows=True)
    plain.load_state_dict(scalers[True].state_dict())
    tracking.load_state_dict(scalers[False].state_dict())
    theirs = torch.amp.GradScaler("cpu")
    theirs.load_state_dict(scalers[True].state_dict())
    assert plain.get_scale() == tracking.get_scale() == theirs.get_scale() == 2.0**15
    assert tracking.overflow_report().rows == ()


def test_an_unpickled_scaler_tracks_afresh_and_keeps_numbering() -> None:
    params = [torch.nn.Parameter(torch.ones(2))]
    optimizer = torch.optim.SGD(params, lr=0.0)
    scaler = GradScaler("cpu", track_overflows=True)
    scaler.watch({"w": params[0]})
    poisoned_run(scaler, params, optimizer, {0: {0: math.inf}, 1: {}})
    copy = pickle.loads(pickle.dumps(scaler))
    assert copy.is_tracking_overflows()
    assert copy.overflow_report().rows == ()
    poisoned_run(copy, params, optimizer, {0: {0: math.inf}})
    assert [(r.name, r.first_step) for r in copy.overflow_report().rows] == [
        ("param_groups[0][0]", 2)
    ]
    assert scaler.overflow_report().rows[0].name == "w"  # the original is untouched


def test_a_disabled_scaler_tracks_nothing_and_reports_nothing() -> None:
    scaler = GradScaler("cpu", enabled=False, track_overflows=True)
    params = [torch.nn.Parameter(torch.ones(2))]
    scaler.watch({"w": params[0]})
    params[0].grad = torch.full((2,), math.inf)
    scaler.step(torch.optim.SGD(params, lr=0.0))
    scaler.update()
    assert scaler.overflow_report() == OverflowReport((), 0, 0, 0)
    assert scaler.stats().overflowed_tensors == 0


def test_tracking_is_off_by_default_and_stats_say_so() -> None:
    scaler = GradScaler("cpu")
    assert not scaler.is_tracking_overflows()
    assert scaler.stats().overflowed_tensors is None
    assert GradScaler("cpu", track_overflows=True).stats().overflowed_tensors == 0


# --------------------------------------------------------------------------- the report


def test_the_report_prints_as_a_table_and_flattens_for_loggers() -> None:
    report = OverflowReport(
        rows=(
            OverflowRow("encoder.block.3.layer.1.DenseReluDense.wo.weight", 12, 41200, 41388, 3.5),
            OverflowRow("param_groups[0][7]", 1, 41201, 41201, 0.0),
        ),
        tracked_tensors=190,
        overflowed_tensors=2,
        steps=41400,
    )
    lines = str(report).splitlines()
    assert lines[0] == "Gradients that overflowed (all 2; 190 tensors tracked over 41400 steps):"
    assert lines[1].split() == [
        "tensor",
        "non-finite",
        "steps",
        "first",
        "step",
        "last",
        "step",
        "max",
        "|grad|",
    ]
    assert lines[3].split() == [
        "encoder.block.3.layer.1.DenseReluDense.wo.weight",
        "12",
        "41200",
        "41388",
        "3.5",
    ]
    assert lines[4].split() == ["param_groups[0][7]", "1", "41201", "41201", "0"]
    assert len({len(line) for line in lines[1:]}) == 1  # aligned columns
    assert report.to_dict() == {
        "tracked_tensors": 190,
        "overflowed_tensors": 2,
        "overflow/encoder.block.3.layer.1.DenseReluDense.wo.weight/nonfinite_steps": 12,
        "overflow/encoder.block.3.layer.1.DenseReluDense.wo.weight/first_step": 41200,
        "overflow/encoder.block.3.layer.1.DenseReluDense.wo.weight/last_step": 41388,
        "overflow/encoder.block.3.layer.1.DenseReluDense.wo.weight/max_abs": 3.5,
        "overflow/param_groups[0][7]/nonfinite_steps": 1,
        "overflow/param_groups[0][7]/first_step": 41201,
        "overflow/param_groups[0][7]/last_step": 41201,
        "overflow/param_groups[0][7]/max_abs": 0.0,
    }
    assert dataclasses.asdict(report)["rows"][1]["name"] == "param_groups[0][7]"


def test_report_records_are_frozen_and_slotted() -> None:
    report = GradScaler("cpu", track_overflows=True).overflow_report()
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.steps = 3  # type: ignore[misc]
    assert not hasattr(report, "__dict__")
    assert not hasattr(OverflowRow("w", 1, 0, 0, 0.0), "__dict__")
