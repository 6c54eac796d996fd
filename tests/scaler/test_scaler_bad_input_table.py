"""Bad input to every public name of ``scaler``, as one table.

Each row is one wrong call. It must raise the row's exception with a one-line message that names
the argument, or, where we promise parity, do what ``torch.amp.GradScaler`` does (the row runs the
same call on torch's scaler side by side). A rejected call leaves the scaler as it was: its state
dict, its per-optimizer stages and the gradients are compared before and after. A test at the end
fails when a public name (``scaler.__all__``, ``GradScaler``'s public methods and constructor
arguments) has no row, so that a new one cannot ship untested.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

import scaler
from scaler import GradScaler

META = torch.ones((), device="meta")
INF, NAN = math.inf, math.nan
HUGE = 10**400  # an int no float holds
VALID_STATE = {
    "scale": 1024.0,
    "growth_factor": 2.0,
    "backoff_factor": 0.5,
    "growth_interval": 100,
    "_growth_tracker": 3,
}


@dataclass
class Setup:
    """A scaler mid-iteration (one full step done, the next one scaled, nothing unscaled)."""

    scaler: Any
    optimizer: torch.optim.Optimizer
    param: torch.nn.Parameter
    tmp_path: Path


def make_setup(scaler_class: type, tmp_path: Path) -> Setup:
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([param], lr=0.1)
    scaler_ = scaler_class("cpu", init_scale=8.0, growth_interval=3)
    scaler_.scale(torch.ones(()))
    param.grad = torch.ones(2) * 8.0
    scaler_.step(optimizer)
    scaler_.update()
    scaler_.scale(torch.ones(()))
    param.grad = torch.full((2,), 16.0)
    return Setup(scaler_, optimizer, param, tmp_path)


def snapshot(setup: Setup) -> tuple:
    scaler_ = setup.scaler
    stages = {key: value["stage"] for key, value in scaler_._per_optimizer_states.items()}
    return (scaler_.state_dict(), stages, setup.param.detach().clone(), setup.param.grad.clone())


@dataclass(frozen=True, slots=True)
class BadCall:
    """One wrong call of a public name, and what must come of it."""

    #: The public name covered: "GradScaler(init_scale)", "GradScaler.update", "inspect_checkpoint".
    covers: str
    #: What is wrong with the call (the test id).
    what: str
    #: The call, given a fresh ``Setup``.
    call: Callable[[Setup], object]
    #: The exception expected (an instance of it), or None when the call is accepted.
    error: type[BaseException] | None
    #: A regex the one-line message must match; it names the argument.
    match: str = ""
    #: Also run on ``torch.amp.GradScaler``: torch raises a type ours is an instance of, or both
    #: accept the call.
    parity: bool = False


def ctor(**kwargs: Any) -> Callable[[Setup], object]:
    return lambda _: GradScaler(**{"device": "cpu", **kwargs})


def state(**changes: Any) -> dict[str, Any]:
    """A state dict with entries changed (``...`` removes an entry)."""
    merged = {**VALID_STATE, **changes}
    return {key: value for key, value in merged.items() if value is not ...}


CONSTRUCTOR = [
    BadCall("GradScaler(device)", "int", ctor(device=3), ValueError, "device must be"),
    BadCall("GradScaler(device)", "None", ctor(device=None), ValueError, "device must be"),
    *(
        BadCall("GradScaler(init_scale)", what, ctor(init_scale=value), ValueError, "init_scale")
        for what, value in [
            ("nan", NAN),
            ("inf", INF),
            ("negative", -1.0),
            ("zero", 0.0),
            ("str", "8"),
            ("None", None),
            ("huge int", HUGE),
            ("meta tensor", META),
            ("2-element tensor", torch.ones(2)),
            ("complex tensor", torch.tensor(1 + 1j)),
        ]
    ),
    *(
        BadCall("GradScaler(growth_factor)", what, ctor(growth_factor=value), ValueError, "growth")
        for what, value in [("nan", NAN), ("inf", INF), ("one", 1.0), ("zero", 0.0), ("str", "2")]
    ),
    *(
        BadCall(
            "GradScaler(backoff_factor)", what, ctor(backoff_factor=value), ValueError, "backoff"
        )
        for what, value in [("nan", NAN), ("negative", -0.5), ("zero", 0.0), ("one", 1.0)]
    ),
    *(
        BadCall(
            "GradScaler(growth_interval)",
            what,
            ctor(growth_interval=value),
            ValueError,
            "growth_interval must be an int",
        )
        for what, value in [
            ("zero", 0),
            ("negative", -5),
            ("fraction", 2.5),
            ("nan", NAN),
            ("huge int", HUGE),
            ("str", "10"),
            ("meta tensor", torch.ones((), device="meta", dtype=torch.int64)),
        ]
    ),
    BadCall("GradScaler(enabled)", "str", ctor(enabled="yes"), ValueError, "enabled must be"),
    BadCall("GradScaler(enabled)", "2", ctor(enabled=2), ValueError, "enabled must be"),
    BadCall("GradScaler(min_scale)", "zero", ctor(min_scale=0.0), ValueError, "min_scale"),
    BadCall("GradScaler(min_scale)", "nan", ctor(min_scale=NAN), ValueError, "min_scale"),
    BadCall("GradScaler(min_scale)", "huge int", ctor(min_scale=HUGE), ValueError, "min_scale"),
    BadCall("GradScaler(max_scale)", "str", ctor(max_scale="big"), ValueError, "max_scale"),
    BadCall("GradScaler(max_scale)", "inf", ctor(max_scale=INF), ValueError, "max_scale"),
    BadCall(
        "GradScaler(max_scale)",
        "below min",
        ctor(min_scale=4.0, max_scale=2.0),
        ValueError,
        "max_scale must be >= min_scale",
    ),
    BadCall("GradScaler(hysteresis)", "zero", ctor(hysteresis=0), ValueError, "hysteresis"),
    BadCall("GradScaler(hysteresis)", "huge", ctor(hysteresis=2**40), ValueError, "hysteresis"),
    BadCall("GradScaler(hysteresis)", "fraction", ctor(hysteresis=1.5), ValueError, "hysteresis"),
    BadCall("GradScaler(below_one)", "unknown", ctor(below_one="loud"), ValueError, "below_one"),
    BadCall("GradScaler(below_one)", "None", ctor(below_one=None), ValueError, "below_one"),
    BadCall(
        "GradScaler(process_group)",
        "without init_process_group",
        ctor(process_group=object()),
        ValueError,
        "process_group was given but torch.distributed is not initialized",
    ),
    *(
        BadCall(
            "GradScaler(track_overflows)",
            what,
            ctor(track_overflows=value),
            ValueError,
            "track_overflows must be a bool",
        )
        for what, value in [("int 1", 1), ("str", "yes"), ("None", None)]
    ),
]


def tracking() -> GradScaler:
    return GradScaler("cpu", track_overflows=True)


#: watch() and overflow_report(): a clear error for what they cannot take.
OVERFLOW_TRACKING = [
    *(
        BadCall(
            "GradScaler.watch",
            what,
            lambda s, value=value: tracking().watch(value),
            TypeError,
            match,
        )
        for what, value, match in [
            ("str", "model", r"watch\(\) takes a torch.nn.Module.*got str"),
            ("int", 3, r"watch\(\) takes a torch.nn.Module.*got int"),
            ("a tensor", torch.ones(2), r"watch\(\) takes a torch.nn.Module.*got Tensor"),
            ("None", None, r"watch\(\) takes a torch.nn.Module.*got NoneType"),
            (
                "parameters without names",
                [torch.nn.Parameter(torch.ones(2))],
                r"\(name, parameter\) pairs .*; item 0 is Parameter \(2,\)$",
            ),
            (
                "a name that is not a str",
                [(0, torch.nn.Parameter(torch.ones(2)))],
                r"item 0 is \(0, Parameter \(2,\)\)$",
            ),
            ("names without tensors", {"w": 1.0}, r"item 0 is \('w', 1\.0\)"),
        ]
    ),
    BadCall(
        "GradScaler.watch",
        "prefix not a str",
        lambda s: tracking().watch(torch.nn.Linear(1, 1), prefix=3),
        TypeError,
        r"watch\(\): prefix must be a str, got int",
    ),
    BadCall(
        "GradScaler.watch",
        "a scaler that does not track overflows",
        lambda s: s.scaler.watch(torch.nn.Linear(1, 1)),
        RuntimeError,
        r"watch\(\) needs a scaler that tracks overflows: .*track_overflows=True",
    ),
    *(
        BadCall(
            "GradScaler.overflow_report",
            what,
            lambda s, value=value: tracking().overflow_report(top=value),
            ValueError,
            r"top must be an int >= 1 \(the number of rows\), or None for all",
        )
        for what, value in [
            ("top 0", 0),
            ("top negative", -3),
            ("top fraction", 2.5),
            ("top str", "3"),
            ("top bool", True),
        ]
    ),
    BadCall(
        "GradScaler.overflow_report",
        "a scaler that does not track overflows",
        lambda s: s.scaler.overflow_report(),
        RuntimeError,
        r"overflow_report\(\) needs a scaler that tracks overflows",
    ),
]

METHODS = [
    # scale: torch's errors, and torch's (lazy) acceptance of any iterable.
    BadCall(
        "GradScaler.scale", "float", lambda s: s.scaler.scale(3.0), ValueError, "outputs", True
    ),
    BadCall(
        "GradScaler.scale", "None", lambda s: s.scaler.scale(None), ValueError, "outputs", True
    ),
    BadCall(
        "GradScaler.scale",
        "list with an int",
        lambda s: s.scaler.scale([torch.ones(()), 3]),
        ValueError,
        "outputs must be a Tensor or an iterable of Tensors",
        True,
    ),
    BadCall("GradScaler.scale", "meta tensor", lambda s: s.scaler.scale(META), None, parity=True),
    # unscale_ / step: a wrong "optimizer" leaves no per-optimizer state behind.
    *(
        BadCall(
            f"GradScaler.{method}",
            what,
            lambda s, method=method, value=value: getattr(s.scaler, method)(value),
            AttributeError,
            rf"{method}\(optimizer\): optimizer must be a torch.optim.Optimizer",
            True,
        )
        for method in ("unscale_", "step")
        for what, value in [("str", "adam"), ("None", None), ("module", torch.nn.Linear(1, 1))]
    ),
    BadCall(
        "GradScaler.step",
        "closure",
        lambda s: s.scaler.step(s.optimizer, closure=lambda: 0.0),
        RuntimeError,
        "Closure use is not currently supported",
        True,
    ),
    BadCall(
        "GradScaler.unscale_",
        "meta-device gradients (accepted, as by torch: meta kernels are no-ops)",
        lambda s: s.scaler.unscale_(meta_optimizer()),
        None,
        parity=True,
    ),
    # update(new_scale): ours rejects what would corrupt the scale (torch takes nan, 0, -1).
    *(
        BadCall(
            "GradScaler.update",
            what,
            lambda s, value=value: s.scaler.update(value),
            ValueError,
            "new_scale",
        )
        for what, value in [
            ("nan", NAN),
            ("inf", INF),
            ("negative", -1.0),
            ("zero", 0.0),
            ("str", "8"),
            ("bool", True),
            ("huge int", HUGE),
        ]
    ),
    *(
        BadCall(
            "GradScaler.update",
            what,
            lambda s, value=value: s.scaler.update(value),
            AssertionError,
            "new_scale should be a float or a 1-element",
            True,
        )
        for what, value in [
            ("meta tensor", META),
            ("2-element tensor", torch.ones(2)),
            ("requires_grad tensor", torch.ones((), requires_grad=True)),
        ]
    ),
    # setters: ours checks what torch stores blindly.
    *(
        BadCall(
            f"GradScaler.{setter}",
            what,
            lambda s, v=v, f=setter: getattr(s.scaler, f)(v),
            ValueError,
            name,
        )
        for setter, name, cases in [
            ("set_growth_factor", "new_factor", [("nan", NAN), ("one", 1.0), ("str", "2")]),
            ("set_backoff_factor", "new_factor", [("None", None), ("zero", 0.0), ("inf", INF)]),
            (
                "set_growth_interval",
                "new_interval",
                [("zero", 0), ("huge int", HUGE), ("meta tensor", META), ("fraction", 0.5)],
            ),
        ]
        for what, v in cases
    ),
    # methods without arguments: Python's TypeError, as torch.
    *(
        BadCall(
            f"GradScaler.{getter}",
            "an argument",
            lambda s, g=getter: getattr(s.scaler, g)(1),
            TypeError,
            "positional argument",
            getter in dir(torch.amp.GradScaler),
        )
        for getter in (
            "get_scale",
            "get_growth_factor",
            "get_backoff_factor",
            "get_growth_interval",
            "is_enabled",
            "state_dict",
            "peek_scale",
            "check",
            "stats",
            "restoring",
            "is_tracking_overflows",
        )
    ),
    BadCall(
        "GradScaler.step_skipped",
        "an optimizer that never stepped",
        lambda s: s.scaler.step_skipped(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))])),
        RuntimeError,
        r"step_skipped\(optimizer\) is valid after scaler.step\(optimizer\)",
    ),
    BadCall(
        "GradScaler.step_skipped",
        "None",
        lambda s: s.scaler.step_skipped(None),
        RuntimeError,
        r"step_skipped\(optimizer\)",
    ),
    # load_state_dict: missing, extra, mistyped keys, other versions.
    BadCall(
        "GradScaler.load_state_dict",
        "None",
        lambda s: s.scaler.load_state_dict(None),
        ValueError,
        "state_dict must be a dict",
    ),
    BadCall(
        "GradScaler.load_state_dict",
        "empty (from a disabled scaler)",
        lambda s: s.scaler.load_state_dict({}),
        RuntimeError,
        "The source state dict is empty",
        True,
    ),
    BadCall(
        "GradScaler.load_state_dict",
        "extra keys (a later version's)",
        lambda s: s.scaler.load_state_dict(state(_future_key=1)),
        None,
        parity=True,
    ),
    BadCall(
        "GradScaler.load_state_dict",
        "torch's five keys only (ours before its extra keys)",
        lambda s: s.scaler.load_state_dict(state()),
        None,
        parity=True,
    ),
    *(
        BadCall(
            "GradScaler.load_state_dict",
            what,
            lambda s, bad=bad: s.scaler.load_state_dict(bad),
            ValueError,
            match,
        )
        for what, bad, match in [
            ("missing scale", state(scale=...), "missing 'scale'"),
            ("missing tracker", state(_growth_tracker=...), "missing '_growth_tracker'"),
            ("scale str", state(scale="8"), r"state_dict\['scale'\]"),
            ("scale nan", state(scale=NAN), r"state_dict\['scale'\]"),
            ("scale meta tensor", state(scale=META), r"state_dict\['scale'\]"),
            ("scale 2-element tensor", state(scale=torch.ones(2)), r"state_dict\['scale'\]"),
            ("growth_factor None", state(growth_factor=None), r"state_dict\['growth_factor'\]"),
            ("backoff_factor inf", state(backoff_factor=INF), r"state_dict\['backoff_factor'\]"),
            ("interval huge", state(growth_interval=HUGE), r"state_dict\['growth_interval'\]"),
            ("tracker huge", state(_growth_tracker=2**40), r"state_dict\['_growth_tracker'\]"),
            ("tracker negative", state(_growth_tracker=-1), r"state_dict\['_growth_tracker'\]"),
            (
                "hysteresis tracker str",
                state(_hysteresis_tracker="1"),
                r"state_dict\['_hysteresis_tracker'\]",
            ),
            (
                "stats of another version (7 counters)",
                state(_ampscale_stats={"counters": [0] * 7, "scale_range": [1.0, 1.0]}),
                r"\['counters'\] must be 6 ints",
            ),
            (
                "stats counter huge",
                state(_ampscale_stats={"counters": [2**70] * 6, "scale_range": [1.0, 1.0]}),
                r"\['counters'\] must be 6 ints",
            ),
        ]
    ),
]


def meta_optimizer() -> torch.optim.Optimizer:
    param = torch.nn.Parameter(torch.ones(2, device="meta"))
    param.grad = torch.ones(2, device="meta")
    return torch.optim.SGD([param], lr=0.1)


def _checkpoint_file(setup: Setup, name: str, content: bytes) -> Path:
    path = setup.tmp_path / name
    path.write_bytes(content)
    return path


FUNCTIONS = [
    BadCall(
        "inspect_checkpoint",
        "int path",
        lambda s: scaler.inspect_checkpoint(3),
        TypeError,
        "inspect_checkpoint: path must be a str or Path",
    ),
    BadCall(
        "inspect_checkpoint",
        "missing path",
        lambda s: scaler.inspect_checkpoint(s.tmp_path / "nope"),
        scaler.CheckpointError,
        "no such file or folder",
    ),
    BadCall(
        "inspect_checkpoint",
        "truncated safetensors",
        lambda s: scaler.inspect_checkpoint(_checkpoint_file(s, "m.safetensors", b"\x10\x00")),
        scaler.CheckpointError,
        "m.safetensors: not a readable safetensors file",
    ),
    BadCall(
        "inspect_checkpoint",
        "not a checkpoint",
        lambda s: scaler.inspect_checkpoint(_checkpoint_file(s, "notes.txt", b"hi")),
        scaler.CheckpointError,
        "notes.txt: not a .safetensors file or a model folder",
    ),
    BadCall(
        "check_fp16_compat",
        "not a module",
        lambda s: scaler.check_fp16_compat("model", torch.ones(1)),
        TypeError,
        "check_fp16_compat: model must be a torch.nn.Module",
    ),
    BadCall(
        "check_fp16_compat",
        "no example input",
        lambda s: scaler.check_fp16_compat(torch.nn.Linear(1, 1)),
        ValueError,
        "check_fp16_compat: needs an example input",
    ),
    BadCall(
        "check_fp16_compat",
        "backward not a bool",
        lambda s: scaler.check_fp16_compat(torch.nn.Linear(1, 1), torch.ones(1), backward="yes"),
        TypeError,
        "backward must be True or False",
    ),
    BadCall(
        "check_fp16_compat",
        "loss_fn not callable",
        lambda s: scaler.check_fp16_compat(torch.nn.Linear(1, 1), torch.ones(1), loss_fn=3),
        TypeError,
        "loss_fn must be callable",
    ),
    BadCall("SyncCounter", "an argument", lambda s: scaler.SyncCounter(1), TypeError, "argument"),
    BadCall(
        "SkipAwareScheduler",
        "not a scheduler",
        lambda s: scaler.SkipAwareScheduler(s.optimizer, s.scaler),
        ValueError,
        r"scheduler must be a torch\.optim\.lr_scheduler\.LRScheduler, got SGD",
    ),
    BadCall(
        "SkipAwareScheduler",
        "ReduceLROnPlateau",
        lambda s: scaler.SkipAwareScheduler(_plateau(s), s.scaler),
        ValueError,
        "ReduceLROnPlateau steps on a metric",
    ),
    BadCall(
        "SkipAwareScheduler",
        "not a scaler",
        lambda s: scaler.SkipAwareScheduler(_step_lr(s), "scaler"),
        ValueError,
        r"scaler must be a scaler\.GradScaler or torch\.amp\.GradScaler, got str",
    ),
    BadCall(
        "SkipAwareScheduler",
        "horizon 0",
        lambda s: scaler.SkipAwareScheduler(_step_lr(s), s.scaler, horizon=0),
        ValueError,
        "horizon must be a positive int, got 0",
    ),
    BadCall(
        "SkipAwareScheduler",
        "horizon a bool",
        lambda s: scaler.SkipAwareScheduler(_step_lr(s), s.scaler, horizon=True),
        ValueError,
        "horizon must be a positive int, got True",
    ),
    BadCall(
        "SkipAwareScheduler",
        "step(epoch)",
        lambda s: scaler.SkipAwareScheduler(_step_lr(s), s.scaler).step(3),
        ValueError,
        r"step\(\) takes no epoch",
    ),
]


def _step_lr(setup: Setup) -> torch.optim.lr_scheduler.LRScheduler:
    return torch.optim.lr_scheduler.StepLR(setup.optimizer, step_size=1)


def _plateau(setup: Setup) -> torch.optim.lr_scheduler.ReduceLROnPlateau:
    return torch.optim.lr_scheduler.ReduceLROnPlateau(setup.optimizer)


def _frozen_field_write(name: str) -> BadCall:
    """Result records are frozen: writing a field is an error, not a silent change."""
    cls = getattr(scaler, name)
    field = dataclasses.fields(cls)[0].name

    def write(_: Setup) -> None:
        instance = cls.__new__(cls)
        setattr(instance, field, None)

    return BadCall(name, f"write .{field}", write, dataclasses.FrozenInstanceError, field)


RESULT_RECORDS = (
    "CheckpointReport",
    "DtypeCount",
    "Fp16CompatReport",
    "Fp16Offender",
    "OverflowReport",
    "OverflowRow",
    "ScalerStats",
    "SkippedFile",
)
#: Public names that take no input from users: raised or warned by us, or an enum of stages.
TAKE_NO_INPUT = {
    "CheckpointError": "an exception type ours raises",
    "ScaleBelowOneError": "an exception type ours raises",
    "ScaleBelowOneWarning": "a warning category ours warns",
    "OptState": "torch's enum of per-optimizer stages, re-exported for isinstance checks",
}
ROWS = [
    *CONSTRUCTOR,
    *METHODS,
    *OVERFLOW_TRACKING,
    *FUNCTIONS,
    *map(_frozen_field_write, RESULT_RECORDS),
]


def run(call: Callable[[Setup], object], setup: Setup) -> BaseException | None:
    try:
        call(setup)
    except Exception as error:  # the exception is the observation
        return error
    return None


@pytest.mark.parametrize("row", ROWS, ids=[f"{row.covers}-{row.what}" for row in ROWS])
def test_bad_input_is_rejected_by_name_and_changes_nothing(row: BadCall, tmp_path: Path) -> None:
    setup = make_setup(GradScaler, tmp_path)
    before = snapshot(setup)
    error = run(row.call, setup)
    if row.error is None:
        assert error is None, f"{row.covers} raised {error!r}"
    else:
        assert isinstance(error, row.error), f"{row.covers}: {error!r} is not a {row.error}"
        message = str(error)
        assert "\n" not in message.strip(), f"not one line: {message!r}"
        assert re.search(row.match, message), f"{message!r} !~ {row.match!r}"
        after = snapshot(setup)
        for index, (was, now) in enumerate(zip(before, after, strict=True)):
            if isinstance(was, torch.Tensor):
                assert torch.equal(was, now), f"{row.covers} changed tensor {index}"
            else:
                assert was == now, f"{row.covers} changed the scaler: {was} -> {now}"
    if row.parity:
        theirs = run(row.call, make_setup(torch.amp.GradScaler, tmp_path))
        if theirs is None:
            assert error is None, f"torch accepts it; ours raised {error!r}"
        else:
            assert isinstance(error, type(theirs)), f"ours {error!r}, torch {theirs!r}"


def public_names() -> set[str]:
    names = set(scaler.__all__) - {"GradScaler"}
    names |= {
        f"GradScaler.{name}"
        for name, _ in inspect.getmembers(GradScaler, callable)
        if not name.startswith("_")
    }
    names |= {f"GradScaler({arg})" for arg in inspect.signature(GradScaler).parameters}
    return names


def test_every_public_name_has_bad_input_rows() -> None:
    covered = {row.covers for row in ROWS} | set(TAKE_NO_INPUT)
    missing = sorted(public_names() - covered)
    assert not missing, f"public names with no bad-input row: {missing}"
    assert not covered - public_names(), "rows for names that are not public"
