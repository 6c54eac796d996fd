"""Class-hierarchy analysis: which candidates a call on an object of unknown class may run, and
whether they agree."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._parse import parse_module
from linter.model.project._candidates import (
    Candidate,
    agreeing_effects,
    arity_fits,
    classes_built,
    read_candidate,
    stored_parameter,
)
from linter.model.syntax import ModuleIndex, descendants


def _call(text: str) -> cst.Call:
    expression = cst.parse_expression(text)
    assert isinstance(expression, cst.Call)
    return expression


def _method(text: str) -> Candidate:
    candidate = read_candidate(textwrap.dedent(text))
    assert candidate is not None
    return candidate


TRAIN_STEP = "def train_step(self, text_z, pred_rgb, guidance_scale=100, *, as_latent=False): ..."


@pytest.mark.parametrize(
    "call",
    [
        "g.train_step(text_z, pred)",
        "g.train_step(text_z, pred, 7.5)",
        "g.train_step(text_z, pred_rgb=pred, as_latent=True)",
        "g.train_step(pred_rgb=pred, text_z=t)",
        "g.train_step(*args)",
        "g.train_step(text_z, **kwargs)",
    ],
)
def test_a_call_the_signature_accepts_fits(call: str) -> None:
    assert arity_fits(_call(call), _method(TRAIN_STEP))


@pytest.mark.parametrize(
    "call",
    [
        "g.train_step(pred)",  # `pred_rgb` missing
        "g.train_step(text_z, pred, 7.5, True)",  # `as_latent` is keyword-only
        "g.train_step(text_z, pred, scale=7.5)",  # no such parameter
        "g.train_step()",
    ],
)
def test_a_call_the_signature_refuses_does_not_fit(call: str) -> None:
    assert not arity_fits(_call(call), _method(TRAIN_STEP))


def test_a_static_method_takes_its_first_parameter_from_the_call() -> None:
    static = _method(
        """
        @staticmethod
        def backward(ctx, grad_output):
            return grad_output
        """
    )
    plain = _method("def backward(self, grad_output): ...")
    assert not arity_fits(_call("accelerator.backward(loss)"), static)
    assert arity_fits(_call("accelerator.backward(loss)"), plain)


def test_a_candidate_body_leaves_out_its_signature_and_decorators() -> None:
    candidate = _method(
        """
        @torch.no_grad()
        def train_step(self, latents, step_scale=1.0):
            grad = step_scale * latents
            latents.backward(gradient=grad)
        """
    )
    assert candidate.body.split() == [
        "grad",
        "=",
        "step_scale",
        "*",
        "latents",
        "latents.backward(gradient=grad)",
    ]


def test_source_that_holds_no_function_is_no_candidate() -> None:
    assert read_candidate("x = 1\n") is None
    assert read_candidate("def broken(:\n") is None


def test_star_parameters_take_what_is_left() -> None:
    method = _method("def step(self, *args, **kwargs): ...")
    assert arity_fits(_call("o.step(1, 2, closure=c)"), method)


def test_candidates_agree_on_the_same_lines_of_interest() -> None:
    first = """
        noise = torch.randn_like(latents)
        grad = scale * (self.unet(latents + noise, t) - noise)
        # comments and other lines aside
        latents.backward(gradient=grad, retain_graph=True)
    """
    second = """
        images = F.interpolate(pred, (64, 64))
        latents.backward(gradient=grad, retain_graph=True)
        return 0
    """
    assert agreeing_effects([first, second], ("backward", "step"))


@pytest.mark.parametrize(
    "other",
    [
        "self.scaler.scale(loss).backward()",  # scaled: not the same thing
        "return loss",  # nothing to backpropagate at all
        "latents.backward(gradient=grad, retain_graph=True)\nlatents.backward(gradient=grad)",
    ],
)
def test_candidates_that_do_different_things_disagree(other: str) -> None:
    first = "latents.backward(gradient=grad, retain_graph=True)"
    assert not agreeing_effects([first, other], ("backward", "step"))


def test_candidates_with_nothing_of_interest_do_not_agree() -> None:
    assert not agreeing_effects(["return x", "return y"], ("backward",))


def _nodes(text: str) -> tuple[cst.CSTNode, ...]:
    module = parse_module(textwrap.dedent(text))
    return tuple(descendants(module))


PROJECT = {"StableDiffusion": ("/p/sd.py", "StableDiffusion"), "IF": ("/p/if_.py", "IF")}


@pytest.mark.parametrize(
    ("source", "value", "expected"),
    [
        ("", "StableDiffusion(device)", {PROJECT["StableDiffusion"]}),
        ("", "IF(device) if opt.if_ else StableDiffusion(device)", set(PROJECT.values())),
        (
            "if opt.if_:\n    g = IF(d)\nelse:\n    g = StableDiffusion(d)\n",
            "g",
            set(PROJECT.values()),
        ),
        ("g = None\nif opt.guidance:\n    g = IF(d)\n", "g", {PROJECT["IF"]}),
        ("", "Zero123Pipeline(device)", {("", "Zero123Pipeline")}),  # another library's class
        ("", "build_guidance(opt)", None),  # a builder may return anything
        ("g = REGISTRY[name](opt)\n", "g", None),
        ("g = IF(d) if a else build(d)\n", "g", None),
        ("", "guidance", None),  # bound nowhere here: a parameter
        ("g = IF(d)\ng = g.module if wrapped else g\n", "g", None),  # bound to itself
        ("a = b\nb = a\n", "a", None),
    ],
)
def test_the_classes_a_value_is_built_from(
    source: str, value: str, expected: set[tuple[str, str]] | None
) -> None:
    found = classes_built(cst.parse_expression(value), _nodes(source), PROJECT.get)
    assert found == (frozenset(expected) if expected is not None else None)


def _class(text: str) -> tuple[ModuleIndex, cst.ClassDef]:
    module = parse_module(textwrap.dedent(text))
    index = ModuleIndex(module)
    cls = next(node for node in index.nodes(cst.ClassDef))
    return index, cls


def test_a_constructor_parameter_stored_as_an_attribute() -> None:
    index, cls = _class(
        """
        class Trainer:
            def __init__(self, model, guidance, *, fp16=True):
                self.guidance = guidance
                self.fp16 = fp16
        """
    )
    found = stored_parameter(index, cls, "self.guidance")
    assert found is not None
    assert found[0].name.value == "__init__"
    assert found[1] == "guidance"
    assert stored_parameter(index, cls, "self.fp16") is not None


@pytest.mark.parametrize(
    "body",
    [
        # assigned again elsewhere: not only what the constructor was given
        "def __init__(self, guidance):\n    self.guidance = guidance\n"
        "def swap(self, other):\n    self.guidance = other\n",
        # not a parameter
        "def __init__(self, opt):\n    self.guidance = make(opt)\n",
        # stored outside the constructor
        "def attach(self, guidance):\n    self.guidance = guidance\n",
    ],
)
def test_an_attribute_that_is_not_only_a_constructor_parameter(body: str) -> None:
    index, cls = _class("class Trainer:\n" + textwrap.indent(body, "    "))
    assert stored_parameter(index, cls, "self.guidance") is None
