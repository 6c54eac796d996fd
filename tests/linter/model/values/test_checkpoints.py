"""Resume checkpoints written and read (`linter.model.values._checkpoints`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.iterations._iteration import of_module
from linter.model.syntax._module_index import module_index
from linter.model.values._checkpoints import Checkpoints, checkpoints


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


@pytest.mark.parametrize(
    ("between", "holds"),
    [
        ("log.info(len(model.state_dict()))", False),
        ("state_dict.update(epoch=epoch)", False),
        ("state_dict['scaler'] = scaler.state_dict()", True),
        ("model.load_state_dict(state_dict=model.state_dict())", False),
    ],
)
def test_a_dict_named_state_dict_is_not_read_by_state_dict_calls(between: str, holds: bool) -> None:
    source = f"""
    def save(model, optimizer, scaler, epoch, path):
        state_dict = {{"model": model.state_dict(), "optimizer": optimizer.state_dict()}}
        {between}
        torch.save(state_dict, path)
    """
    assert writes(source) == [(5, holds)]


def test_a_dict_named_state_dict_handed_on_is_unknown() -> None:
    source = """
    def save(model, optimizer, path):
        state_dict = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        add_extra_state(state_dict)
        torch.save(state_dict, path)
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


_SNAPSHOT = """
from dataclasses import asdict, dataclass
from typing import NamedTuple

@dataclass
class Snapshot:
    model_state: dict
    optimizer_state: dict
    finished_epoch: int

class State(NamedTuple):
    model: dict
    optim: dict

class Options:  # neither: its fields are not its keywords
    pass
"""


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # A record of the model's and the optimizer's state, saved as it is or as a dict.
        ("torch.save(Snapshot(model_state=m.state_dict(), optimizer_state=o.state_dict()), p)", 1),
        ("s = State(model=m.state_dict(), optim=o.state_dict())\ntorch.save(s._asdict(), p)", 1),
        (
            "s = Snapshot(model_state=m.state_dict(), optimizer_state=o.state_dict())\n"
            "s = asdict(s)\n"
            "torch.save(s, p)",
            1,
        ),
        # Positional fields, a class that is no record: the content is not shown.
        ("torch.save(Snapshot(m.state_dict(), o.state_dict(), 3), p)", 0),
        ("torch.save(Options(model_state=m.state_dict(), optimizer_state=o.state_dict()), p)", 0),
    ],
)
def test_a_record_of_model_and_optimizer_state_is_a_resume_checkpoint(
    body: str, expected: int
) -> None:
    source = _SNAPSHOT + "def save(m, o, p):\n" + textwrap.indent(body, "    ") + "\n"
    assert [holds for _, holds in writes(source)] == [False] * expected


@pytest.mark.parametrize(
    ("handed", "expected"),
    [
        # Handed on only where this save does not run: the save still writes what was built.
        ("if remote:\n    upload(s)\nelse:\n    torch.save(s, p)", [False]),
        # Handed on before the save: it may add anything.
        ("upload(s)\ntorch.save(s, p)", []),
    ],
)
def test_a_dict_handed_on_in_an_exclusive_arm_is_still_known(
    handed: str, expected: list[bool]
) -> None:
    body = 's = {"model": m.state_dict(), "optimizer": o.state_dict()}\n' + handed
    source = "def save(m, o, p, remote):\n" + textwrap.indent(body, "    ") + "\n"
    assert [holds for _, holds in writes(source)] == expected


def test_a_record_built_from_a_loaded_checkpoint_is_read_from_it() -> None:
    source = (
        _SNAPSHOT
        + """
def resume(self, path):
    data = torch.load(path)
    snapshot = Snapshot(**data)
    self.optimizer.load_state_dict(snapshot.optimizer_state)
    other = Snapshot(**self.defaults)
    self.optimizer.load_state_dict(other.optimizer_state)
"""
    )
    context, found = model(source)
    lines = [context.position(call).start.line for call in found.optimizer_loads()]
    # The load from the checkpoint, not the one from the defaults.
    restored = (
        textwrap.dedent(source)
        .splitlines()
        .index("    self.optimizer.load_state_dict(snapshot.optimizer_state)")
    )
    assert lines == [restored + 1]


def test_a_save_only_the_tpu_branch_runs_is_left_out() -> None:
    source = """
    def save(self, path):
        ckpt = {"state_dict": self.state_dict(), "optimizer": self.optimizer.state_dict()}
        if self.using_tpu:
            xm.save(ckpt, path)
        else:
            torch.save(ckpt, path)
    """
    assert writes(source) == [(7, False)]


@pytest.mark.parametrize(
    ("build", "holds"),
    [
        ("Checkpointer(model, out_dir, optimizer=optimizer, scheduler=scheduler)", False),
        ("DetectionCheckpointer(model, cfg.OUTPUT_DIR, optimizer=opt)", False),
        ("FSDPCheckpointer(model, out_dir, optimizer=optimizer, scaler=model.fp16_scaler)", True),
        ("Checkpointer(model, out_dir, optimizer=optimizer, grad_scaler=gs)", True),
    ],
)
def test_a_checkpointer_of_the_model_and_the_optimizer_is_a_resume_checkpoint(
    build: str, holds: bool
) -> None:
    context, found = model(build)
    assert [(context.position(w.call).start.line, w.holds_scaler) for w in found.writes] == [
        (1, holds)
    ]
    assert "checkpointer" in found.writes[0].remedy


@pytest.mark.parametrize(
    "build",
    [
        "Checkpointer(model, out_dir)",
        "DetectionCheckpointer(model, cfg.OUTPUT_DIR, trainer=weakref.proxy(self))",
        "PeriodicCheckpointer(checkpointer, period=1000, max_iter=max_iter)",
        'Checkpointer(checkpoints_dir, recoverables={"model": model, "optimizer": opt})',
        "Checkpointer(model, out_dir, optimizer=None)",
    ],
)
def test_checkpointers_of_the_weights_or_of_other_things_are_not(build: str) -> None:
    assert writes(build) == []
