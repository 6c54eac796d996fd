"""Resume checkpoints written and read (`linter.model._checkpoints`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model._checkpoints import Checkpoints, checkpoints
from linter.model._iteration import of_module
from linter.model._module_index import module_index


def model(source: str) -> tuple[ModuleContext, Checkpoints]:
    source = textwrap.dedent(source)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    iterations = of_module(context)
    return context, checkpoints(
        module_index(context), iterations.receivers, iterations.is_optimizer
    )


def writes(source: str) -> list[tuple[int, bool]]:
    """(line of the saver call, holds the scaler's state) of each resume checkpoint."""
    context, found = model(source)
    return [(context.position(w.call).start.line, w.holds_scaler) for w in found.writes]


@pytest.mark.parametrize(
    "save",
    [
        'torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, p)',
        "torch.save(dict(net=model.state_dict(), opt=opt.state_dict()), p)",
        'xm.save({"state_dict": unwrap(model).state_dict(), "optimizer": optim.state_dict()}, p)',
        'save_checkpoint({"model": model.module.state_dict(), "optim": sd}, is_best)',
        'accelerator.save({"model": model, "optimizer": optimizer.state_dict()}, p)',
    ],
)
def test_a_dict_of_model_and_optimizer_state_is_a_resume_checkpoint(save: str) -> None:
    assert writes(save) == [(1, False)]


@pytest.mark.parametrize(
    "save",
    [
        'torch.save(model.state_dict(), "weights.pt")',
        'torch.save({"model": model.state_dict(), "epoch": 3}, p)',
        'torch.save({"optimizer": optimizer.state_dict()}, p)',
        'model.save_pretrained("out")',
        'hooks.before_save({"model": model.state_dict(), "optimizer": optimizer.state_dict()})',
        'np.save(p, {"model": model.state_dict(), "optimizer": optimizer.state_dict()})',
        'torch.save({"model": deepcopy(model).half(), "optimizer": None, "epoch": 3}, p)',
        'torch.save({"model": model.state_dict(), "optim_state": ""}, p)',
    ],
)
def test_exports_and_other_calls_are_not(save: str) -> None:
    assert writes(save) == []


@pytest.mark.parametrize(
    "entry",
    [
        '"scaler": scaler.state_dict()',
        '"grad_scaler": gs',
        '"amp": amp.state_dict()',
        '"extra": {"loss_scaler": loss_scaler.state_dict()}',
        '"scale_state": self.scaler.state_dict()',
    ],
)
def test_the_scalers_state_is_found_by_value_or_key(entry: str) -> None:
    source = (
        f'torch.save({{"model": model.state_dict(), "optimizer": opt.state_dict(), {entry}}}, p)'
    )
    assert writes(source) == [(1, True)]


def test_a_dict_built_up_before_the_save_is_read_whole() -> None:
    source = """
    def save(model, optimizer, scaler, path):
        ckpt = torch.load(path)  # an earlier checkpoint, not the one saved
        ckpt = {"model": model.state_dict()}
        ckpt["optimizer"] = optimizer.state_dict()
        ckpt.update(scaler=scaler.state_dict())
        torch.save(ckpt, path)
    """
    assert writes(source) == [(7, True)]


@pytest.mark.parametrize(
    "between",
    ["hooks.before_save(ckpt)", "ckpt.update(extra)", "ckpt.update(**extra)"],
)
def test_a_dict_that_may_change_unseen_is_unknown(between: str) -> None:
    source = f"""
    def save(model, optimizer, path):
        ckpt = {{"model": model.state_dict(), "optimizer": optimizer.state_dict()}}
        {between}
        torch.save(ckpt, path)
    """
    assert writes(source) == []


def test_a_spread_makes_the_content_unknown() -> None:
    assert (
        writes('torch.save({"model": m.state_dict(), "optimizer": o.state_dict(), **x}, p)') == []
    )


def test_optimizer_loads_and_scaler_restores() -> None:
    context, found = model(
        """
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        self.opt_d.load_state_dict(ckpt["opt_d"])
        """
    )
    lines = [context.position(call).start.line for call in found.optimizer_loads()]
    assert lines == [3, 4]
    assert not found.restores_a_scaler()


@pytest.mark.parametrize(
    "restore",
    ['scaler.load_state_dict(ckpt["scaler"])', 'if "grad_scaler" in ckpt: x = ckpt["grad_scaler"]'],
)
def test_a_scaler_restored_by_call_or_key(restore: str) -> None:
    _, found = model(f'optimizer.load_state_dict(ckpt["optimizer"])\n{restore}\n')
    assert found.restores_a_scaler()


@pytest.mark.parametrize(
    "save",
    ['checkpoint["scaler"] = scaler.state_dict()', 'state["grad_scaler"], epoch = sd, 3'],
)
def test_a_scaler_key_assigned_for_a_save_restores_nothing(save: str) -> None:
    _, found = model(f'optimizer.load_state_dict(ckpt["optimizer"])\n{save}\n')
    assert not found.restores_a_scaler()
