"""A stateful fuzz: ours and ``torch.amp.GradScaler`` driven side by side through random sequences.

Every rule runs the same call in two worlds (each a scaler, its own parameters and optimizers)
and checks that both raised the same exception type (ours may raise a subclass) or neither did;
after every rule the scales, growth trackers and parameters must agree. The rules have no
preconditions, so misuse comes in any order: ``unscale_`` twice, ``step`` twice, ``update``
without a step, ``step`` before any ``scale``, a checkpoint or pickle mid-iteration.

Where torch is wrong, the machine expects our documented behaviour instead (SPEC 1.2); one
misuse is allowed to leave non-finite parameters in both:

* **Scale collapse.** Once torch's scale falls below 2**-126 (the smallest scale whose fp32
  reciprocal is finite), ours stays at that floor (tests/scaler/test_scaler_collapse.py): from
  then on the two trajectories differ by design, and the machine checks only that ours stays
  within [floor, fp32 max] with finite parameters, where torch's may not be.
* **Gradients unscaled by another scale than the one they were scaled with** (the scale changed
  by ``update``, ``update(new_scale)`` or a checkpoint load between a backward and ``step``, and
  no ``zero_grad`` in between) can overflow to inf in the multiplication: the unscale kernel
  checks the gradients before it multiplies, so the step is not skipped, in torch and in ours
  alike (found by this machine's long soak). It is misuse, not the scale, so after it the
  collapsed branch stops requiring finite parameters; before the collapse both worlds still
  must agree exactly.
* **Fused SGD with momentum** keeps uninitialised momentum buffers when its first step is skipped
  (tests/scaler/test_scaler_fused_sgd.py, which also shows ours matching foreach SGD). Both
  worlds run the same fused optimizer (so misuse takes the same path and raises the same
  errors); once torch's optimizer holds buffers where ours holds none, that optimizer's
  parameters are no longer compared.

CI runs the bounded ``ci`` profile (tests/conftest.py); ``--hypothesis-profile=long`` soaks.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from parity_harness import torch_keys

from scaler import GradScaler
from scaler._scale_update import FP32_MAX, SAFETY_FLOOR

KINDS = ("SGD", "Adam", "AdamW")
MODES = {"forloop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
HYPER = {"SGD": {"lr": 0.05}, "Adam": {"lr": 1e-2}, "AdamW": {"lr": 1e-2, "weight_decay": 0.1}}
#: Scales to start from: the default, small ones, and one a few overflows above the floor.
INIT_SCALES = (2.0**16, 8.0, 1.0, 2.0**-124)
#: ``update(new_scale)`` values; 2**-130 is below our floor (torch takes it, ours clamps).
NEW_SCALES = (2.0**10, 3.0, 1.0, 2.0**-20, 2.0**-130)
POISONS = (math.inf, -math.inf, math.nan)


@dataclass(frozen=True, slots=True)
class OptimizerSpec:
    """One optimizer of the scenario, as both worlds build it."""

    #: torch.optim class name.
    kind: str
    #: "forloop", "foreach" or "fused".
    mode: str
    #: SGD's momentum (ignored by Adam/AdamW).
    momentum: float


class World:
    """One scaler with its own parameters and optimizers, built identically in both worlds."""

    def __init__(self, scaler: Any, specs: list[OptimizerSpec]) -> None:
        self.scaler = scaler
        self.params: list[list[torch.nn.Parameter]] = []
        self.optimizers: list[torch.optim.Optimizer] = []
        for index, spec in enumerate(specs):
            generator = torch.Generator().manual_seed(index)
            params = [
                torch.nn.Parameter(torch.randn(3, generator=generator)),
                torch.nn.Parameter(torch.randn(2, 2, generator=generator)),
            ]
            kwargs = {**HYPER[spec.kind], **MODES[spec.mode]}
            if spec.kind == "SGD":
                kwargs["momentum"] = spec.momentum
            self.params.append(params)
            self.optimizers.append(getattr(torch.optim, spec.kind)(params, **kwargs))

    def all_params(self) -> list[torch.nn.Parameter]:
        return [p for params in self.params for p in params]


def call(function, *args: Any) -> BaseException | None:
    """Run ``function``; the exception it raised, or None."""
    try:
        function(*args)
    except Exception as error:  # the exception is the observation
        return error
    return None


class ScalerVersusTorch(RuleBasedStateMachine):
    """Drives ``scaler.GradScaler`` and ``torch.amp.GradScaler`` through the same calls."""

    @initialize(
        specs=st.lists(
            st.builds(
                OptimizerSpec,
                st.sampled_from(KINDS),
                st.sampled_from(tuple(MODES)),
                st.sampled_from((0.0, 0.9)),
            ),
            min_size=1,
            max_size=3,
        ),
        init_scale=st.sampled_from(INIT_SCALES),
        growth_interval=st.integers(1, 4),
    )
    def build(self, specs: list[OptimizerSpec], init_scale: float, growth_interval: int) -> None:
        kwargs = {"init_scale": init_scale, "growth_interval": growth_interval}
        self.specs = specs
        self.ours = World(GradScaler("cpu", **kwargs), specs)
        self.theirs = World(torch.amp.GradScaler("cpu", **kwargs), specs)
        #: Optimizers (by index) whose torch twin kept uninitialised momentum buffers.
        self.torch_fused_sgd_garbage: set[int] = set()
        #: Set once torch's scale has fallen below our floor (see the module docstring).
        self.collapsed = False
        #: Gradients exist that were scaled by another scale than the current one (the scale
        #: changed after a backward and before zero_grad).
        self.stale_grads = False
        #: An unscale_ or step ran on such gradients (see the module docstring).
        self.unscaled_stale_grads = False

    def both(self, action) -> None:
        """Run ``action(world)`` in both worlds; the same exception type, or none."""
        theirs = call(action, self.theirs)
        ours = call(action, self.ours)
        if theirs is None:
            assert ours is None, f"ours raised {ours!r}; torch did not"
        else:
            assert ours is not None, f"torch raised {theirs!r}; ours did not"
            assert isinstance(ours, type(theirs)), f"ours raised {ours!r}, torch {theirs!r}"

    # ------------------------------------------------------------------ the training step

    @rule(
        poisons=st.lists(
            st.tuples(st.integers(0, 2), st.integers(0, 1), st.sampled_from(POISONS)),
            max_size=2,
        ),
        step=st.integers(0, 3),
    )
    def scale_and_backward(self, poisons, step: int) -> None:
        """A scaled backward (gradients accumulate), then inf/NaN written into chosen params."""

        def backward(world: World) -> None:
            loss = sum(((p * p).sum() * 0.05 + p.sum() * (0.1 + step)) for p in world.all_params())
            world.scaler.scale(loss).backward()
            for optimizer_index, param_index, value in poisons:
                params = world.params[optimizer_index % len(world.params)]
                params[param_index].grad.view(-1)[0] = value

        self.both(backward)

    @rule(set_to_none=st.booleans())
    def zero_grad(self, set_to_none: bool) -> None:
        self.both(lambda world: [o.zero_grad(set_to_none) for o in world.optimizers])
        self.stale_grads = False

    @rule(index=st.integers(0, 2))
    def unscale(self, index: int) -> None:
        self.unscaled_stale_grads |= self.stale_grads
        self.both(lambda w: w.scaler.unscale_(w.optimizers[index % len(w.optimizers)]))

    @rule(index=st.integers(0, 2))
    def step(self, index: int) -> None:
        self.unscaled_stale_grads |= self.stale_grads
        self.both(lambda w: w.scaler.step(w.optimizers[index % len(w.optimizers)]))
        index %= len(self.specs)
        spec = self.specs[index]
        if spec.kind == "SGD" and spec.mode == "fused" and spec.momentum:
            ours, theirs = self.ours.optimizers[index], self.theirs.optimizers[index]
            for mine, other in zip(self.ours.params[index], self.theirs.params[index], strict=True):
                # torch's skipped first step stored buffers its kernel never wrote; ours none.
                if "momentum_buffer" in theirs.state[other] and not ours.state[mine]:
                    self.torch_fused_sgd_garbage.add(index)

    @rule()
    def update(self) -> None:
        self.both(lambda world: world.scaler.update())
        self.stale_grads = True

    @rule(new_scale=st.sampled_from(NEW_SCALES), as_tensor=st.booleans())
    def update_to(self, new_scale: float, as_tensor: bool) -> None:
        value = torch.tensor(new_scale) if as_tensor else new_scale
        self.both(lambda world: world.scaler.update(value))
        self.stale_grads = True

    # ------------------------------------------------------------------ checkpoints

    @rule()
    def swap_checkpoints(self) -> None:
        """ours → torch and torch → ours, at any point (torch's loader ignores our extra keys)."""
        self.stale_grads = True
        states: dict[int, dict] = {}
        self.both(lambda world: states.__setitem__(id(world), world.scaler.state_dict()))
        ours_state, theirs_state = states[id(self.ours)], states[id(self.theirs)]
        if not self.collapsed:
            assert torch_keys(ours_state) == theirs_state
        self.both(
            lambda world: world.scaler.load_state_dict(
                theirs_state if world is self.ours else ours_state
            )
        )

    @rule()
    def pickle_round_trip(self) -> None:
        """Allowed between iterations only; mid-iteration both refuse (and nothing changes)."""

        def round_trip(world: World) -> None:
            world.scaler = pickle.loads(pickle.dumps(world.scaler))

        self.both(round_trip)

    # ------------------------------------------------------------------ after every rule

    @invariant()
    def agree(self) -> None:
        if not hasattr(self, "ours"):
            return
        ours, theirs = self.ours.scaler.get_scale(), self.theirs.scaler.get_scale()
        self.collapsed = self.collapsed or not theirs >= SAFETY_FLOOR
        compared = [i for i in range(len(self.specs)) if i not in self.torch_fused_sgd_garbage]
        our_params = [p for i in compared for p in self.ours.params[i]]
        their_params = [p for i in compared for p in self.theirs.params[i]]
        if self.collapsed:  # documented: ours holds the floor, torch goes below it
            assert SAFETY_FLOOR <= ours <= FP32_MAX
            if not self.unscaled_stale_grads:
                assert all(torch.isfinite(p).all() for p in self.ours.all_params())
            return
        assert ours == theirs
        assert self.ours.scaler._get_growth_tracker() == self.theirs.scaler._get_growth_tracker()
        for mine, other in zip(our_params, their_params, strict=True):
            assert bool(torch.isfinite(mine).all()) >= bool(torch.isfinite(other).all())
            torch.testing.assert_close(mine, other, atol=1e-7, rtol=1e-6, equal_nan=True)


TestScalerVersusTorch = ScalerVersusTorch.TestCase


def test_gradients_scaled_before_a_scale_change_overflow_in_both_scalers() -> None:
    # The misuse the machine exempts (module docstring): backward at 2**16, the scale set to
    # 2**-120 before step; unscaling multiplies by 2**120 and overflows after the inf check.
    # If ours ever catches it, this fails, and the machine's exemption should go.
    for scaler_class in (torch.amp.GradScaler, GradScaler):
        param = torch.nn.Parameter(torch.ones(2))
        optimizer = torch.optim.SGD([param], lr=0.1)
        scaler_ = scaler_class("cpu")
        scaler_.scale((param * 3).sum()).backward()
        scaler_.update(2.0**-120)
        scaler_.step(optimizer)
        assert torch.isinf(param).all(), scaler_class
