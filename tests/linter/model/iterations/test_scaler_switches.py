"""When a scaler scales (`linter.model.iterations._scaler_switches`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.iterations._iteration import TrainingIterations, of_module
from linter.model.iterations._iteration_events import Kind
from linter.model.iterations._scaler_switches import DISABLED, scaler_off, scaler_switches
from linter.model.syntax._module_index import ModuleIndex, module_index


def _model(source: str) -> tuple[ModuleIndex, TrainingIterations]:
    source = textwrap.dedent(source)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    return module_index(context), of_module(context)


def _step(model: TrainingIterations) -> cst.Call:
    return next(e.call for e in model.events if e.kind is Kind.SCALER_STEP)


def test_a_scaler_built_disabled_never_scales() -> None:
    index, model = _model(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda", enabled=False)
        for batch in loader:
            scaler.step(opt)
        """
    )
    # The iteration model drops a disabled scaler's events; the switch still tells why.
    (step,) = index.calls_named(".step")
    assert scaler_switches(index, model).of("scaler", step) == DISABLED


def test_an_enabled_flag_and_the_branch_around_the_constructor_are_its_switch() -> None:
    index, model = _model(
        """
        import torch
        if torch.cuda.is_available():
            scaler = torch.amp.GradScaler("cuda", enabled=args.amp)
        for batch in loader:
            scaler.step(opt)
        """
    )
    switches = scaler_switches(index, model).of("scaler", _step(model))
    assert isinstance(switches, list)
    (switch,) = switches
    assert switch.enabled is not None
    assert cst.Module([]).code_for_node(switch.enabled) == ("args.amp")
    assert {fact.subject for fact in switch.facts} == {"torch.cuda.is_available()", "args.amp"}


def test_a_scaler_the_module_does_not_build_is_unknown_and_an_alias_is_followed() -> None:
    index, model = _model(
        """
        import torch
        class T:
            def __init__(self):
                self.scaler = torch.amp.GradScaler("cuda")
            def step(self, scaler):
                s = self.scaler
                s.step(self.opt)
                scaler.step(self.opt)
        """
    )
    steps = [e.call for e in model.events if e.kind is Kind.SCALER_STEP]
    switches = scaler_switches(index, model)
    always = switches.of("s", steps[0])
    assert isinstance(always, list)
    assert [s.facts for s in always] == [frozenset()]
    assert switches.of("scaler", steps[1]) is None


def test_a_backward_where_the_scaler_is_none_or_its_flag_is_off_runs_with_it_off() -> None:
    index, model = _model(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda", enabled=args.amp)
        for batch in loader:
            if scaler is None:
                a.backward()
            if not args.amp:
                b.backward()
            if args.amp:
                c.backward()
            scaler.step(opt)
        """
    )
    switches = scaler_switches(index, model).of("scaler", _step(model))
    assert isinstance(switches, list)
    backwards = [e for e in model.events if e.kind is Kind.BACKWARD]
    off = [scaler_off(model.facts, model.conditions(b), "scaler", switches) for b in backwards]
    assert off == [True, True, False]
