"""The project: summaries joined across modules, and the questions rules ask of it."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.assembly._summarize import summarize
from linter.model.assembly._summary_making import SUMMARY_MAKER
from linter.model.iterations._iteration import of_module
from linter.model.iterations._iteration_events import Kind
from linter.model.project._imports import ModuleFiles
from linter.model.project._module_context import FunctionRef
from linter.model.project._project import Project
from linter.model.project._summary import ModuleSummary
from linter.model.syntax._tree import descendants


def build(tmp_path: Path, sources: dict[str, str]) -> Project:
    summaries = {}
    for name, source in sources.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = textwrap.dedent(source)
        path.write_text(text, encoding="utf-8")
        context = ModuleContext(str(path), text, cst.parse_module(text))
        summaries[str(path)] = summarize(context, str(path), has_amp=True)
    return Project(ModuleFiles(str(tmp_path), list(summaries)), summaries, maker=SUMMARY_MAKER)


def context_of(project: Project, path: Path) -> ModuleContext:
    text = path.read_text(encoding="utf-8")
    return ModuleContext(str(path), text, cst.parse_module(text), project)


ENGINE = """
def train_step(model, batch, optimizer, scaler):
    scaler.scale(model(batch)).backward()
    scaler.step(optimizer)
    scaler.update()
    return scaler.get_scale()
"""


def test_a_summary_round_trips_through_json(tmp_path: Path) -> None:
    project = build(tmp_path, {"engine.py": ENGINE})
    summary = project.summaries[str(tmp_path / "engine.py")]
    again = ModuleSummary.from_json(json.loads(json.dumps(summary.to_json())))
    assert again == summary
    assert again.digest() == summary.digest()


def test_callers_are_found_through_an_import_alias(tmp_path: Path) -> None:
    project = build(
        tmp_path,
        {
            "engine.py": ENGINE,
            "main.py": """
                import engine as eng

                def main(loader, model, optimizer, scaler):
                    for batch in loader:
                        eng.train_step(model, batch, optimizer, scaler)
            """,
        },
    )
    sites = project.callers(FunctionRef(str(tmp_path / "engine.py"), "train_step"))
    assert [(os.path.basename(p), r.line, r.reason) for p, r in sites] == [
        ("main.py", 6, "inside the loop at line 5")
    ]


def test_a_function_per_step_because_of_a_loop_in_another_module(tmp_path: Path) -> None:
    project = build(
        tmp_path,
        {
            "engine.py": ENGINE,
            "main.py": """
                from engine import train_step

                def main(loader, model, optimizer, scaler):
                    for batch in loader:
                        train_step(model, batch, optimizer, scaler)
            """,
        },
    )
    context = context_of(project, tmp_path / "engine.py")
    function = next(s for s in context.module.body if isinstance(s, cst.FunctionDef))
    why = project.per_step_reason(context, function)
    assert why == "in `train_step()`, called inside the loop at line 5 of main.py"
    assert str(tmp_path / "main.py") in project.used


def test_called_once_per_epoch_elsewhere_is_not_per_step(tmp_path: Path) -> None:
    project = build(
        tmp_path,
        {
            "engine.py": ENGINE,
            "main.py": """
                from engine import train_step

                def main(epochs, model, batch, optimizer, scaler):
                    for epoch in range(epochs):
                        train_step(model, batch, optimizer, scaler)
            """,
        },
    )
    context = context_of(project, tmp_path / "engine.py")
    function = next(s for s in context.module.body if isinstance(s, cst.FunctionDef))
    assert project.per_step_reason(context, function) is None


def test_self_calls_in_a_base_class_reach_a_subclass_override(tmp_path: Path) -> None:
    project = build(
        tmp_path,
        {
            "base.py": """
                class Base:
                    def fit(self, loader):
                        for batch in loader:
                            self.step(batch)
            """,
            "amp.py": """
                from base import Base

                class Amp(Base):
                    def step(self, batch):
                        return self.scaler.get_scale()
            """,
        },
    )
    assert project.bases(str(tmp_path / "amp.py"), "Amp") == [(str(tmp_path / "base.py"), "Base")]
    sites = project.callers(FunctionRef(str(tmp_path / "amp.py"), "Amp.step"))
    assert [os.path.basename(path) for path, _ in sites] == ["base.py"]


def test_a_method_name_resolves_only_when_one_connected_class_defines_it(
    tmp_path: Path,
) -> None:
    project = build(
        tmp_path,
        {
            "a.py": "class A:\n    def optimize_parameters(self):\n        pass\n",
            "b.py": "class B:\n    def optimize_parameters(self):\n        pass\n",
            "c.py": "class C:\n    def run_iteration(self):\n        pass\n",
            "lone.py": "def f(other):\n    other.run_iteration()\n",
            "main.py": """
                import a, b, c

                def main(model, other):
                    model.optimize_parameters()
                    other.run_iteration()
            """,
        },
    )
    summary = project.summaries[str(tmp_path / "main.py")]
    first, second = (r for r in summary.calls if r.callee.endswith(("parameters", "iteration")))
    assert project.call_targets(summary.path, first) == []
    assert project.call_targets(summary.path, second) == [
        FunctionRef(str(tmp_path / "c.py"), "C.run_iteration")
    ]
    lone = project.summaries[str(tmp_path / "lone.py")]
    (call,) = (r for r in lone.calls if r.callee == "other.run_iteration")
    assert project.call_targets(lone.path, call) == []  # c.py is not connected to lone.py


def test_a_reexport_through_a_package_init_is_followed(tmp_path: Path) -> None:
    project = build(
        tmp_path,
        {
            "pkg/__init__.py": "from .engine import train_step\n",
            "pkg/engine.py": ENGINE,
            "main.py": "from pkg import train_step\n",
        },
    )
    found = project.resolve(str(tmp_path / "main.py"), "train_step")
    assert found == FunctionRef(str(tmp_path / "pkg/engine.py"), "train_step")


STAR_SOURCES = {
    "utils/io.py": """
        import torch

        def save_checkpoint(path, model, optimizer, scaler):
            torch.save({"scaler": scaler.state_dict()}, path)

        def _raw_save(path, model):
            torch.save(model.state_dict(), path)
    """,
    "utils/legacy.py": """
        __all__ = ["count_parameters"]

        def count_parameters(model):
            return sum(p.numel() for p in model.parameters())

        def save_checkpoint(path, model, optimizer, scaler):
            pass
    """,
    "utils/__init__.py": "from .io import *\n",
    "train.py": "from utils.io import *\nfrom utils.legacy import *\n",
    "pkg_train.py": "from utils import *\n",
}


@pytest.mark.parametrize(
    ("importer", "name", "expected"),
    [
        # The later star import does not bind a name its `__all__` leaves out.
        ("train.py", "save_checkpoint", ("utils/io.py", "save_checkpoint")),
        ("train.py", "count_parameters", ("utils/legacy.py", "count_parameters")),
        ("train.py", "_raw_save", None),  # a leading underscore: not public
        ("pkg_train.py", "save_checkpoint", ("utils/io.py", "save_checkpoint")),  # a chain
        ("pkg_train.py", "no_such_helper", None),
    ],
)
def test_a_star_import_binds_the_public_names_of_a_project_module(
    tmp_path: Path, importer: str, name: str, expected: tuple[str, str] | None
) -> None:
    project = build(tmp_path, STAR_SOURCES)
    found = project.resolve(str(tmp_path / importer), name)
    if expected is None:
        assert found is None or found == ()
    else:
        assert found == FunctionRef(str(tmp_path / expected[0]), expected[1])


def test_a_grafted_function_brings_its_events_placed_at_the_call(tmp_path: Path) -> None:
    project = build(
        tmp_path,
        {
            "engine.py": ENGINE,
            "main.py": """
                from engine import train_step

                def main(loader, model, optimizer, scaler):
                    for batch in loader:
                        train_step(model, batch, optimizer, scaler)
                        scaler.update()
            """,
        },
    )
    context = context_of(project, tmp_path / "main.py")
    model = of_module(context)
    (iteration,) = model.iterations
    kinds = [event.kind for event in iteration.events]
    assert kinds == [Kind.SCALED_BACKWARD, Kind.SCALER_STEP, Kind.UPDATE, Kind.UPDATE]
    foreign = iteration.events[2]
    assert context.position(foreign.call).start.line == 6  # the call that brings it
    assert context.foreign_position(foreign.call) == ("engine.py", 5, 5)
    assert iteration.may_precede(iteration.events[1], iteration.events[2])
    assert not iteration.may_precede(iteration.events[2], iteration.events[1])


def test_a_function_grafted_at_two_calls_of_one_file_is_placed_at_each(tmp_path: Path) -> None:
    project = build(
        tmp_path,
        {
            "engine.py": ENGINE,
            "main.py": """
                from engine import train_step

                def main(loader, model, optimizer, scaler):
                    for batch in loader:
                        train_step(model, batch, optimizer, scaler)
                        scaler.update()
                    for batch in loader:
                        train_step(model, batch, optimizer, scaler)
                        scaler.update()
            """,
        },
    )
    context = context_of(project, tmp_path / "main.py")
    lines = [
        [context.position(event.call).start.line for event in iteration.events]
        for iteration in of_module(context).iterations
    ]
    # One shared tree placed every grafted event at the later call: [[9, 9, 9, 7], ...].
    assert lines == [[6, 6, 6, 7], [9, 9, 9, 10]]


def test_the_next_file_reuses_a_grafted_tree_and_no_call_shares_one(tmp_path: Path) -> None:
    main = """
        from engine import train_step

        def main(loader, model, optimizer, scaler):
            for batch in loader:
                train_step(model, batch, optimizer, scaler)
                train_step(model, batch, optimizer, scaler)
    """
    project = build(tmp_path, {"engine.py": ENGINE, "a.py": main, "b.py": main})
    grafted = {}
    for name in ("a.py", "b.py"):
        context = context_of(project, tmp_path / name)
        function = context.module.body[-1]
        assert isinstance(function, cst.FunctionDef)
        calls = [n for n in descendants(function) if isinstance(n, cst.Call)]
        grafted[name] = [project.graft(context, call) for call in calls]
    first, second = grafted["a.py"]
    assert first is not None
    assert second is not None
    assert first is not second
    # The second is a copy of the first: equal code, no node in common.
    assert first.deep_equals(second)
    assert not set(map(id, descendants(first))) & set(map(id, descendants(second)))
    again, twice = grafted["b.py"]
    assert again is first
    assert twice is second


def test_a_constant_of_a_config_module(tmp_path: Path) -> None:
    project = build(
        tmp_path,
        {
            "config.py": "import torch\nAMP_DTYPE = torch.bfloat16\nLR = 3e-4\nLR = 1e-4\n",
            "train.py": "import config\nfrom config import LR\n",
        },
    )
    context = context_of(project, tmp_path / "train.py")
    value = project.constant(context, "config.AMP_DTYPE")
    assert value is not None
    assert cst.Module([]).code_for_node(value) == "torch.bfloat16"
    assert project.constant(context, "LR") is None  # bound twice: not a constant


@pytest.mark.parametrize("callee", ["missing", "torch.save", "config.LR"])
def test_a_call_the_project_cannot_resolve_grafts_nothing(tmp_path: Path, callee: str) -> None:
    project = build(
        tmp_path,
        {"config.py": "LR = 1\n", "train.py": f"import torch\nimport config\n{callee}(x)\n"},
    )
    context = context_of(project, tmp_path / "train.py")
    call = context.module.body[-1].body[0].value  # type: ignore[attr-defined]
    assert project.graft(context, call) is None


TRAINER = """
from transformers import Trainer


def train(model, data):
    Trainer(model=model, train_dataset=data).train()
"""


def _trainer_train(
    project: Project, tmp_path: Path
) -> tuple[ModuleContext, cst.FunctionDef, cst.Param]:
    """`trainer.py`'s context, its `train` function and that function's first parameter."""
    context = context_of(project, tmp_path / "trainer.py")
    function = context.module.body[1]
    assert isinstance(function, cst.FunctionDef)
    return context, function, function.params.params[0]


def test_calls_from_other_modules_bring_the_argument_each_caller_passes(tmp_path: Path) -> None:
    project = build(
        tmp_path,
        {
            "trainer.py": TRAINER,
            "main.py": """
                from trainer import train


                def main(data):
                    net = load()
                    train(net, data)


                train(other, data)
            """,
        },
    )
    context, function, param = _trainer_train(project, tmp_path)
    [call] = project.calls_from_other_modules(context, function, param)
    # The call in `main()`, not the one at the top level (top-level code is not summarised).
    assert cst.Module([]).code_for_node(call) == "train(net, data)"
    assert context.foreign_position(call.args[0].value) == ("main.py", 7, 11)
    assert context.position(call).start.line == context.position(param).start.line
    assert str(tmp_path / "main.py") in project.used


def test_a_function_no_other_module_calls_has_no_foreign_calls(tmp_path: Path) -> None:
    project = build(tmp_path, {"trainer.py": TRAINER, "main.py": "import trainer\n"})
    context = context_of(project, tmp_path / "trainer.py")
    function = context.module.body[1]
    assert isinstance(function, cst.FunctionDef)
    assert project.calls_from_other_modules(context, function, function) == []


def test_a_call_in_parentheses_on_lines_of_its_own_is_found(tmp_path: Path) -> None:
    # The caller's calls are matched by CPython's lines, as the summary's call lines are: the
    # callee's line, not the line of the "(" around it.
    project = build(
        tmp_path,
        {
            "trainer.py": TRAINER,
            "main.py": """
                from trainer import train


                def main(data):
                    net = load()
                    result = (
                        train(net, data)
                    )
                    return result
            """,
        },
    )
    context, function, param = _trainer_train(project, tmp_path)
    [call] = project.calls_from_other_modules(context, function, param)
    assert isinstance(call.func, cst.Name)
    assert call.func.value == "train"
    assert context.foreign_position(call.args[0].value) == ("main.py", 8, 15)


def test_asking_about_another_parameter_places_the_same_callers_at_it(tmp_path: Path) -> None:
    main = "from trainer import train\n\n\ndef main(data):\n    train(load(), data)\n"
    project = build(tmp_path, {"trainer.py": TRAINER, "main.py": main})
    context, function, model = _trainer_train(project, tmp_path)
    data = function.params.params[1]
    [first] = project.calls_from_other_modules(context, function, model)
    assert context.position(first).start == context.position(model).start
    [second] = project.calls_from_other_modules(context, function, data)
    assert second is first
    assert context.position(first).start == context.position(data).start
    assert first in context.foreign
    assert context.foreign_position(first.args[1]) == ("main.py", 5, 19)


TRAINERS = """
class Trainer:
    def train_step(self, batch):
        return batch


class Task:
    def train_step(self, batch):
        return batch
"""


def _targets(project: Project, path: Path, callee: str) -> list[str]:
    summary = project.summaries[str(path)]
    record = next(r for r in summary.calls if r.callee == callee)
    return [ref.qualname for ref in project.call_targets(str(path), record)]


@pytest.mark.parametrize("annotation", ["Trainer", '"Trainer"', "trainers.Trainer"])
def test_a_parameter_annotated_with_a_project_class_runs_that_class_method(
    tmp_path: Path, annotation: str
) -> None:
    project = build(
        tmp_path,
        {
            "trainers.py": TRAINERS,
            "main.py": f"""
                import trainers
                from trainers import Task, Trainer

                def train(trainer: {annotation}, task: Task, loader):
                    for batch in loader:
                        trainer.train_step(batch)
                        task.train_step(batch)
            """,
        },
    )
    main = tmp_path / "main.py"
    assert _targets(project, main, "trainer.train_step") == ["Trainer.train_step"]
    assert _targets(project, main, "task.train_step") == ["Task.train_step"]


def test_an_annotated_parameter_assigned_in_its_function_is_typed_by_the_assignment(
    tmp_path: Path,
) -> None:
    project = build(
        tmp_path,
        {
            "trainers.py": TRAINERS,
            "main.py": """
                from trainers import Task, Trainer

                def train(trainer: Trainer, loader):
                    trainer = Task()
                    for batch in loader:
                        trainer.train_step(batch)
            """,
        },
    )
    assert _targets(project, tmp_path / "main.py", "trainer.train_step") == ["Task.train_step"]


ONE_TRAINER = """
class Trainer:
    def train_step(self, batch):
        return batch
"""


def test_a_receiver_of_a_class_no_summary_holds_runs_no_project_method(tmp_path: Path) -> None:
    # `Runner` is another library's: its `train_step` is not the project's only one, which an
    # unknown receiver would be taken to run.
    project = build(
        tmp_path,
        {
            "trainers.py": ONE_TRAINER,
            "main.py": """
                import trainers
                from mmengine import Runner

                def train(runner: Runner, helper, loader):
                    built = Runner()
                    for batch in loader:
                        runner.train_step(batch)
                        built.train_step(batch)
                        helper.train_step(batch)
            """,
        },
    )
    main = tmp_path / "main.py"
    assert _targets(project, main, "runner.train_step") == []
    assert _targets(project, main, "built.train_step") == []
    assert _targets(project, main, "helper.train_step") == ["Trainer.train_step"]


def test_imported_text_holds_the_imported_functions_the_file_names(tmp_path: Path) -> None:
    project = build(
        tmp_path,
        {
            "engine.py": """
                def train_step(model, batch, optimizer, scaler):
                    scaler.scale(model(batch)).backward()
                    scaler.step(optimizer)

                def clip(model, scaler):
                    scaler.unscale_(model.opt)

                class Runner:
                    def __init__(self, opt):
                        self.opt = opt
                        self.opt.zero_grad()

                    def run_epoch(self):
                        self.opt.zero_grad()

                    def step(self):
                        self.opt.step()
                """,
            "main.py": "import engine\n",
        },
    )
    main = str(tmp_path / "main.py")
    named = project.imported_text(main, "import engine\nengine.train_step(m, b, o, s)\n")
    assert "def train_step" in named
    assert "def clip" not in named
    assert "def run_epoch" not in named
    # A class named brings its constructor; a method only where the file names the method: a
    # call runs a method of another module only by its name (`x.run_epoch()`, `self.run_epoch()`).
    subclass = project.imported_text(main, "class Mine(engine.Runner): pass\n")
    assert "def __init__" in subclass
    assert "def run_epoch" not in subclass
    called = "class Mine(engine.Runner):\n    def go(self):\n        self.run_epoch()\n"
    assert "def run_epoch" in project.imported_text(main, called)
    assert "def run_epoch" in project.imported_text(main, "engine.Runner(o).run_epoch()\n")
    assert "def __init__" not in project.imported_text(main, "def __init__(self): pass\n")
    # A generic method name reaches the method only with its class named: `optimizer.step()`
    # alone runs no project method called `step`.
    assert "def step" not in project.imported_text(main, "optimizer.step()\n")
    assert "def step" in project.imported_text(main, "engine.Runner(o).step()\n")
    assert project.imported_text(main, "import engine\n") == ""
    assert str(tmp_path / "engine.py") in project.used


def test_a_function_that_only_counts_steps_has_no_step_word(tmp_path: Path) -> None:
    from linter.model.project._summary import graft_words

    assert graft_words("global_step += 1\nsteps_per_epoch = 10\n") == ()
    assert graft_words("optimizer.step()\n") == ("step",)
    assert graft_words("scaler.\\\n    update()\n") == ("update",)
    assert graft_words("loss.backward()\nstate_dict = model.state_dict()\n") == (
        "backward",
        "state_dict",
    )


def test_a_module_without_an_fp16_site_asks_no_other_module_for_its_models(
    tmp_path: Path,
) -> None:
    from linter.model.values._fp16_sites import Fp16Sites

    loader = "def load(name):\n    return AutoModel.from_pretrained(name).half()\n"
    quiet = "from loader import load\nmodel = load('t5')\nmodel.train()\nloss.backward()\n"
    project = build(tmp_path, {"loader.py": loader, "main.py": quiet})
    context = context_of(project, tmp_path / "main.py")
    assert list(Fp16Sites(context).sites()) == []
    assert context.grafts == {}
    # With an fp16 site, the model it trains is followed into the loader.
    loud = quiet + 'with torch.autocast("cuda", dtype=torch.float16):\n    out = model(x)\n'
    (tmp_path / "main.py").write_text(loud, encoding="utf-8")
    context = context_of(project, tmp_path / "main.py")
    list(Fp16Sites(context).sites())
    assert len(context.grafts) == 1


def test_finding_iterations_grafts_only_the_other_modules_functions_that_step(
    tmp_path: Path,
) -> None:
    helpers = """
        def report(loss):
            loss.backward()

        def train_step(model, batch, optimizer, scaler):
            scaler.scale(model(batch)).backward()
            scaler.step(optimizer)
            scaler.update()
    """
    main = """
        from helpers import report, train_step

        def warm_up(loss):
            report(loss)

        def main(loader, model, optimizer, scaler):
            for batch in loader:
                train_step(model, batch, optimizer, scaler)
    """
    project = build(tmp_path, {"helpers.py": helpers, "main.py": main})
    context = context_of(project, tmp_path / "main.py")
    (iteration,) = of_module(context).iterations
    assert [e.kind for e in iteration.events] == [
        Kind.SCALED_BACKWARD,
        Kind.SCALER_STEP,
        Kind.UPDATE,
    ]
    # `report` has a backward but no step, and no iteration calls it: nothing asked for it.
    grafted = {call.func.value for call, function in context.grafts.items() if function}
    assert grafted == {"train_step"}
    # Asked for directly, it is grafted as before.
    (call,) = [
        node
        for node in descendants(context.module)
        if isinstance(node, cst.Call) and getattr(node.func, "value", None) == "report"
    ]
    assert project.graft(context, call) is not None


def test_a_method_of_an_object_built_in_place_runs_that_class_method(tmp_path: Path) -> None:
    project = build(
        tmp_path,
        {
            "trainers.py": TRAINERS,
            "main.py": """
                import trainers
                from trainers import Task

                def train(loader, build_trainer):
                    for batch in loader:
                        Task().train_step(batch)
                        trainers.Trainer(batch).train_step(batch)
                        build_trainer(batch).train_step(batch)
            """,
        },
    )
    main = tmp_path / "main.py"
    assert _targets(project, main, "Task().train_step") == ["Task.train_step"]
    assert _targets(project, main, "trainers.Trainer().train_step") == ["Trainer.train_step"]
    # A factory's result may be anything: no record, so no guess at its class.
    callees = {record.callee for record in project.summaries[str(main)].calls}
    assert not {callee for callee in callees if callee.startswith("build_trainer")} - {
        "build_trainer"
    }


_WRAPPER = """
import torch


class ScalerBox:
    def __init__(self):
        self._scaler = torch.amp.GradScaler("cuda")

    def __call__(self, loss, optimizer):
        self._scaler.scale(loss).backward()
        self._scaler.step(optimizer)
        self._scaler.update()


class NoCall:
    def run(self, loss):
        loss.backward()
"""


@pytest.mark.parametrize(
    ("binding", "grafted"),
    [
        ("box = ScalerBox()", "__call__"),
        ("box = NoCall()", None),  # a class without `__call__`: nothing to run
        ("box = make_box()", None),  # a function's result: its class is unknown
    ],
)
def test_an_object_of_a_project_class_called_runs_its_dunder_call(
    tmp_path: Path, binding: str, grafted: str | None
) -> None:
    # MAE-style trainers call a scaler wrapper object built from another module's class.
    project = build(
        tmp_path,
        {
            "misc.py": _WRAPPER,
            "main.py": f"""
                from misc import NoCall, ScalerBox, make_box

                def main(loader, model, optimizer):
                    {binding}
                    for x in loader:
                        box(model(x), optimizer)
            """,
        },
    )
    context = context_of(project, tmp_path / "main.py")
    call = next(
        node
        for node in descendants(context.module)
        if isinstance(node, cst.Call) and cst.Module([]).code_for_node(node.func) == "box"
    )
    function = project.graft(context, call)
    assert (function.name.value if function is not None else None) == grafted


_EPOCH = """
import torch
from helpers import log_step


def backward(loss, scaler):
    scaler.scale(loss).backward()


def train_one_epoch(model, loader, optimizer, scaler):
    for x in loader:
        backward(model(x), scaler)
        log_step(model)
        scaler.step(optimizer)
        scaler.update()
"""
_HELPERS = """
def log_step(model):
    deeper(model)


def deeper(model):
    model.zero_grad()
"""


def test_a_call_in_a_grafted_function_runs_a_function_of_that_functions_module(
    tmp_path: Path,
) -> None:
    # open_clip: main.py -> train_one_epoch (training/train.py) -> backward (same module).
    project = build(
        tmp_path,
        {
            "engine.py": _EPOCH,
            "helpers.py": _HELPERS,
            "main.py": """
                from engine import train_one_epoch

                def main(loader, model, optimizer, scaler):
                    train_one_epoch(model, loader, optimizer, scaler)
            """,
        },
    )
    context = context_of(project, tmp_path / "main.py")
    outer = next(n for n in descendants(context.module) if isinstance(n, cst.Call))
    epoch = project.graft(context, outer)
    assert epoch is not None
    assert epoch.name.value == "train_one_epoch"
    inner = {
        cst.Module([]).code_for_node(n.func): n
        for n in descendants(epoch)
        if isinstance(n, cst.Call)
    }
    nested = project.graft(context, inner["backward"])
    assert nested is not None
    assert nested.name.value == "backward"
    # Placed at the call in main.py, named in engine.py.
    scaled = next(n for n in descendants(nested) if isinstance(n, cst.Call))
    assert context.position(scaled).start.line == 5
    assert context.foreign_position(scaled) == ("engine.py", 7, 5)
    # One level only: a function grafted into a grafted one grafts nothing further.
    logged = project.graft(context, inner["log_step"])
    assert logged is not None
    deeper = next(n for n in descendants(logged) if isinstance(n, cst.Call))
    assert project.graft(context, deeper) is None


@pytest.mark.parametrize(
    ("compat", "expected"),
    [
        ("from torch.cuda.amp import GradScaler\n", "torch.cuda.amp.GradScaler"),
        (
            "try:\n    from torch.cuda.amp import GradScaler\nexcept ImportError:\n"
            "    GradScaler = None\n",
            "torch.cuda.amp.GradScaler",
        ),
        ("import torch\nclass GradScaler(torch.amp.GradScaler):\n    pass\n", None),
        ("from pkg.scalers import GradScaler\n", None),  # the project's own: `resolve` says
        ("from . import GradScaler\n", None),
    ],
    ids=["plain", "try-except-fallback", "defined-here", "from-the-project", "relative"],
)
def test_a_library_name_a_project_module_re_exports(
    tmp_path: Path, compat: str, expected: str | None
) -> None:
    project = build(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/scalers.py": "class GradScaler:\n    pass\n",
            "pkg/compat.py": compat,
            "train.py": "from pkg.compat import GradScaler\n",
        },
    )
    path = str(tmp_path / "train.py")
    assert project.library_name(path, "pkg.compat.GradScaler") == expected
    assert project.library_name(path, "torch.amp.GradScaler") is None  # not the project's


_INJECTED = {
    "trainer.py": """
        class Trainer:
            def __init__(self, guidance):
                self.guidance = guidance

            def step(self, x):
                return self.guidance.train_step(x)
    """,
    "run.py": """
        def run(fn, x):
            return fn(x)
    """,
    "guidance.py": """
        class Guidance:
            def train_step(self, x):
                return x * 2

            def __call__(self, x):
                return x
    """,
    "main.py": """
        from guidance import Guidance
        from run import run
        from trainer import Trainer

        def main():
            Trainer(Guidance()).step(1)
            run(Guidance(), 1)
    """,
}


@pytest.mark.parametrize(
    ("module", "callee", "method"),
    [("trainer.py", "self.guidance.train_step", "train_step"), ("run.py", "fn", "__call__")],
)
def test_the_class_of_an_object_is_sought_only_for_a_question_a_candidate_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, callee: str, method: str
) -> None:
    # Seeking which classes the callers pass walks every caller in other modules; when no
    # project method of that name mentions what the question asks about, the walk is skipped
    # and the answer is left undecided for the next question, not kept.
    project = build(tmp_path, _INJECTED)
    context = context_of(project, tmp_path / module)
    call = next(
        node
        for node in descendants(context.module)
        if isinstance(node, cst.Call) and cst.Module([]).code_for_node(node.func) == callee
    )
    walked: list[str] = []
    real = project._calls_elsewhere

    def walking(context: ModuleContext, function: cst.FunctionDef) -> object:
        walked.append(function.name.value)
        return real(context, function)

    monkeypatch.setattr(project, "_calls_elsewhere", walking)
    assert project.graft(context, call, ("backward",)) is None
    assert walked == []
    function = project.graft(context, call)
    assert function is not None
    assert function.name.value == method
    assert walked
