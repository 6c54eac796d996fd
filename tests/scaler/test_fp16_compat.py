"""check_fp16_compat: which modules' tensors leave fp16's range, first offender first."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from scaler import Fp16CompatReport, Fp16Offender, check_fp16_compat


def _linear(n_in: int, n_out: int, value: float) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    with torch.no_grad():
        layer.weight.fill_(value)
        layer.bias.zero_()
    return layer


def _rows(report: Fp16CompatReport) -> list[tuple[str, str, str]]:
    return [(o.module, o.kind, o.tensor) for o in report.offenders]


def _no_hooks_left(model: nn.Module) -> bool:
    modules_clean = all(
        not m._forward_hooks and not m._forward_pre_hooks and not m._backward_hooks
        for m in model.modules()
    )
    params_clean = all(not p._backward_hooks for p in model.parameters())
    return modules_clean and params_clean


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.proj(x))


class TwoStage(nn.Module):
    """Registers ``early`` first but calls ``late`` first, so execution order is observable."""

    def __init__(self) -> None:
        super().__init__()
        self.early = nn.Linear(4, 4)
        self.late = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.early(self.late(x))


class Squares(nn.Module):
    """Multiplies up through 90000, which fits fp32 but is inf in fp16, then scales back."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 300.0) * 300.0 / 90000.0


class CoinFlip(nn.Module):
    """Overflows or not depending on one random draw, as dropout depends on its masks."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = _linear(4, 4, 0.25)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # proj's output is fp16 under autocast, so the product overflows there too.
        y = self.proj(x)
        return y * 1e5 if torch.rand(()) < 0.5 else y


class Explodes(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("boom inside forward")


@dataclass
class Output:
    logits: torch.Tensor
    hidden: tuple[torch.Tensor, ...]


class ModelOutputLike(OrderedDict):
    """Shaped like transformers' ModelOutput: an OrderedDict whose entries are the outputs."""


class StructuredOutput(nn.Module):
    """Returns, in one of several containers, a small tensor and an overflowing one it made."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def forward(self, x: torch.Tensor) -> object:
        logits = x * 1e5
        if self.kind == "tuple":
            return (x, logits)
        if self.kind == "dict":
            return {"hidden": x, "logits": logits}
        if self.kind == "model_output":
            return ModelOutputLike(hidden=x, logits=logits)
        return Output(logits=logits, hidden=(x,))


def test_overflowing_weights_name_the_offending_module_first() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with torch.no_grad():
        model[2].weight[0, :3] = 1e5

    report = check_fp16_compat(model, torch.randn(3, 4))

    first = report.offenders[0]
    assert (first.module, first.kind, first.tensor) == ("2", "weight", "weight")
    assert first.overflow_count == 3
    assert first.max_abs == pytest.approx(1e5)
    assert not report.ok


def test_only_out_of_range_weights_are_reported() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with torch.no_grad():
        model[2].weight[0, :3] = 1e5

    report = check_fp16_compat(model, torch.randn(3, 4), backward=False)

    weight_rows = [r for r in _rows(report) if r[1] in ("weight", "bias")]
    assert weight_rows == [("2", "weight", "weight")]


def test_bf16_weights_beyond_fp16_are_reported() -> None:
    model = nn.Sequential(_linear(4, 2, 1.0e5)).to(torch.bfloat16)

    report = check_fp16_compat(model, torch.ones(2, 4, dtype=torch.bfloat16), backward=False)

    assert _rows(report)[0] == ("0", "weight", "weight")
    assert report.offenders[0].overflow_count == 8


def test_activation_overflow_with_weights_that_fit() -> None:
    # 4 inputs of 200 times weights of 100: every output is 80000 > 65504.
    model = nn.Sequential(_linear(4, 1, 100.0))

    report = check_fp16_compat(model, torch.full((2, 4), 200.0), backward=False)

    assert _rows(report) == [("0", "activation", "output")]
    row = report.offenders[0]
    assert row.overflow_count == 2
    assert row.max_abs == pytest.approx(80000.0)
    assert row.nonfinite_under_autocast == 2


def test_overflow_that_only_happens_inside_a_module_under_autocast() -> None:
    model = nn.Sequential(_linear(4, 4, 0.25), Squares())

    report = check_fp16_compat(model, torch.ones(2, 4), backward=False)

    assert _rows(report) == [("1", "activation", "output")]
    row = report.offenders[0]
    assert row.overflow_count == 0
    assert row.max_abs == pytest.approx(1.0)
    assert row.nonfinite_under_autocast == 8


def test_gradient_underflow_is_detected() -> None:
    model = nn.Sequential(_linear(4, 2, 0.5))

    report = check_fp16_compat(model, torch.ones(3, 4), loss_fn=lambda y: y.sum() * 2.0**-30)

    assert report.checked_gradients
    assert set(_rows(report)) == {
        ("0", "gradient", "output.grad"),
        ("0", "gradient", "weight.grad"),
        ("0", "gradient", "bias.grad"),
    }
    output_grad = report.offenders[0]
    assert output_grad.tensor == "output.grad"
    assert output_grad.underflow_count == output_grad.numel == 6
    assert output_grad.max_abs == pytest.approx(2.0**-30)
    assert report.underflows == report.offenders


def test_gradient_overflow_becomes_inf_under_autocast() -> None:
    model = nn.Sequential(_linear(4, 2, 0.5))

    report = check_fp16_compat(model, torch.ones(3, 4), loss_fn=lambda y: y.sum() * 1e6)

    output_grad = next(o for o in report.offenders if o.tensor == "output.grad")
    assert output_grad.overflow_count == 6
    assert output_grad.nonfinite_under_autocast == 6


def test_healthy_model_is_ok() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2))

    report = check_fp16_compat(model, torch.randn(5, 4))

    assert report.ok
    assert report.offenders == ()
    assert report.checked_gradients
    assert report.device_type == "cpu"
    assert "ok" in str(report)


def test_default_loss_gives_a_final_norm_layer_real_gradients() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8))

    report = check_fp16_compat(model, torch.randn(4, 8))

    # The plain sum of a LayerNorm's outputs is constant: its gradients would be rounding noise
    # around 1e-8, reported as underflow.
    assert report.ok, str(report)


# The strided layout is what TransformerEncoder's fast path makes (the jagged one takes seconds to
# import); torch warns that it is a prototype.
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_nested_tensors_are_measured() -> None:
    class Scale(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 1e5

    nested = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(1, 3)])

    report = check_fp16_compat(Scale(), nested, backward=False)

    assert _rows(report) == [("", "activation", "output")]
    assert report.offenders[0].overflow_count == report.offenders[0].numel == 9


def test_forward_offenders_come_in_execution_order_then_backward() -> None:
    model = TwoStage()
    with torch.no_grad():
        model.early.weight.fill_(1e5)
        model.late.weight.fill_(1e5)

    report = check_fp16_compat(model, torch.ones(1, 4), loss_fn=lambda y: y.sum() * 2.0**-60)

    rows = _rows(report)
    assert rows.index(("late", "weight", "weight")) < rows.index(("early", "weight", "weight"))
    kinds = [kind for _, kind, _ in rows]
    first_gradient = kinds.index("gradient")
    assert "gradient" not in kinds[:first_gradient]
    assert all(kind == "gradient" for kind in kinds[first_gradient:])


def test_module_never_called_still_has_its_weights_checked() -> None:
    model = TwoStage()
    model.unused = _linear(2, 2, 7e4)

    report = check_fp16_compat(model, torch.zeros(1, 4), backward=False)

    assert _rows(report) == [("unused", "weight", "weight")]


def test_str_is_a_table_naming_the_modules() -> None:
    model = nn.Sequential(OrderedDict(encoder=Encoder(), head=nn.Linear(4, 2)))
    with torch.no_grad():
        model.encoder.proj.weight.fill_(1e5)

    text = str(check_fp16_compat(model, torch.ones(2, 4), backward=False))

    header, *rows = text.splitlines()[1:]
    assert header.split()[:4] == ["#", "module", "kind", "tensor"]
    assert rows[0].split()[:4] == ["1", "encoder.proj", "weight", "weight"]
    assert "offending" in text.splitlines()[0]


@pytest.mark.parametrize(
    ("kind", "label"),
    [
        ("tuple", "output[1]"),
        ("dict", "output['logits']"),
        ("model_output", "output['logits']"),
        ("dataclass", "output.logits"),
    ],
)
def test_structured_outputs_are_searched(kind: str, label: str) -> None:
    report = check_fp16_compat(StructuredOutput(kind), torch.ones(1, 4))

    assert _rows(report)[0] == ("", "activation", label)


def test_a_tensor_passed_up_by_a_container_is_reported_once_at_its_maker() -> None:
    model = nn.Sequential(OrderedDict(head=_linear(4, 1, 100.0)))

    report = check_fp16_compat(model, torch.full((2, 4), 200.0), backward=False)

    assert _rows(report) == [("head", "activation", "output")]


def test_a_tensor_written_in_place_is_reported_where_it_changed() -> None:
    class ScaleInPlace(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mul_(1e5)

    model = nn.Sequential(_linear(4, 4, 0.25), ScaleInPlace())

    report = check_fp16_compat(model, torch.ones(2, 4), backward=False)

    assert _rows(report) == [("1", "activation", "output")]
    assert report.offenders[0].nonfinite_under_autocast == 8


def test_an_output_inside_a_dict_is_labelled_by_its_key() -> None:
    class Wrapper(nn.Module):
        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"small": x, "big": x * 1e5}

    report = check_fp16_compat(Wrapper(), torch.ones(1, 3), backward=False)

    assert _rows(report) == [("", "activation", "output['big']")]


def test_a_loss_entry_in_the_output_is_the_default_loss() -> None:
    class WithLoss(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = _linear(4, 2, 0.5)

        def forward(self, x: torch.Tensor) -> ModelOutputLike:
            logits = self.head(x)
            return ModelOutputLike(loss=logits.sum() * 2.0**-30, logits=logits)

    report = check_fp16_compat(WithLoss(), torch.ones(1, 4))

    # Had the outputs been summed, every gradient would be about 1: no underflow.
    assert ("head", "gradient", "weight.grad") in _rows(report)


def test_the_model_is_restored_exactly() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.ReLU(), nn.Linear(8, 2)
    )
    model.train()
    model[3].eval()
    model[4].bias.requires_grad_(False)
    model[0].weight.grad = torch.full_like(model[0].weight, 3.0)
    grads = {name: p.grad for name, p in model.named_parameters()}
    grad_values = {name: g.clone() for name, g in grads.items() if g is not None}
    state = {name: t.clone() for name, t in model.state_dict().items()}
    training = [m.training for m in model.modules()]
    requires_grad = [p.requires_grad for p in model.parameters()]
    example = torch.randn(6, 4) * 1e3
    rng = torch.get_rng_state()

    check_fp16_compat(model, example)

    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is grads[name] for name, p in model.named_parameters())
    assert all(torch.equal(model.get_parameter(k).grad, v) for k, v in grad_values.items())
    assert [m.training for m in model.modules()] == training
    assert [p.requires_grad for p in model.parameters()] == requires_grad
    assert torch.equal(torch.get_rng_state(), rng)
    assert _no_hooks_left(model)


@pytest.mark.parametrize("seed", range(8))
def test_both_runs_draw_the_same_random_numbers(seed: int) -> None:
    torch.manual_seed(seed)

    report = check_fp16_compat(CoinFlip(), torch.ones(4), backward=False)

    # The reference run's overflow and the autocast run's infs come from the same draw.
    assert [
        (o.module, o.overflow_count > 0, o.nonfinite_under_autocast > 0) for o in report.offenders
    ] in (
        [],
        [("", True, True)],
    )


def test_an_exception_in_forward_leaves_no_hooks_and_restores_buffers() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), Explodes())
    running_mean = model[1].running_mean.clone()
    example = torch.randn(3, 4, requires_grad=True)

    with pytest.raises(RuntimeError, match="boom inside forward"):
        check_fp16_compat(model, example)

    assert _no_hooks_left(model)
    assert not example._backward_hooks
    assert torch.equal(model[1].running_mean, running_mean)
    assert int(model[1].num_batches_tracked) == 0


def test_a_forward_that_writes_to_a_parameter_is_an_error_naming_it() -> None:
    class Drifts(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                self.proj.bias.add_(1.0)
            return self.proj(x)

    model = Drifts()

    with pytest.raises(RuntimeError, match=r"wrote to parameter 'proj\.bias' in place"):
        check_fp16_compat(model, torch.ones(1, 2))
    assert _no_hooks_left(model)


def test_frozen_model_skips_gradients_with_a_note() -> None:
    model = nn.Linear(4, 2).requires_grad_(False)

    report = check_fp16_compat(model, torch.ones(1, 4))

    assert not report.checked_gradients
    assert report.notes
    assert "gradients not checked" in str(report)


def test_keyword_examples_reach_the_model() -> None:
    class Keyword(nn.Module):
        def forward(self, *, input_ids: torch.Tensor, scale: float) -> torch.Tensor:
            return input_ids.float() * scale

    report = check_fp16_compat(Keyword(), input_ids=torch.ones(2, dtype=torch.long), scale=1e5)

    assert _rows(report) == [("", "activation", "output")]


def test_offender_label_names_module_and_tensor() -> None:
    row = Fp16Offender(
        module="",
        kind="activation",
        tensor="output",
        numel=1,
        max_abs=1e5,
        min_nonzero_abs=1e5,
        overflow_count=1,
        underflow_count=0,
        nonfinite_under_autocast=1,
    )
    assert row.label == "(model): output"


def test_model_that_is_not_a_module_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module, got function"):
        check_fp16_compat(lambda x: x, torch.ones(1))


def test_missing_example_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="needs an example input"):
        check_fp16_compat(nn.Linear(2, 2))


def test_non_bool_backward_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="backward must be True or False"):
        check_fp16_compat(nn.Linear(2, 2), torch.ones(1, 2), backward="yes")


def test_loss_fn_returning_a_vector_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="loss_fn must return a floating-point tensor"):
        check_fp16_compat(nn.Linear(2, 2), torch.ones(3, 2), loss_fn=lambda y: y)
