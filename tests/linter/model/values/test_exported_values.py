"""Values other modules reach: what a summary exports, and what an importer gets of it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
from test_project import build, context_of

from linter._rule import ModuleContext
from linter.model.project._value_records import AUTOCAST, AUTOCAST_FACTORY, ENGINE, SCALER
from linter.model.syntax._module_index import module_index
from linter.model.values._exported_values import value_records
from linter.model.values._imported_values import imported_values


def exported(source: str) -> dict[str, tuple[str, str]]:
    text = textwrap.dedent(source)
    context = ModuleContext("m.py", text, cst.parse_module(text))
    return {r.holder: (r.kind, r.dtype) for r in value_records(context, module_index(context))}


def test_globals_and_attributes_bound_to_scalers_and_autocasts_are_exported() -> None:
    found = exported(
        """\
        import functools
        import torch
        from torch import autocast as ac

        scaler = torch.amp.GradScaler("cuda")
        ctx = ac("cuda", dtype=torch.bfloat16)
        amp = functools.partial(torch.autocast, "cuda", dtype=torch.float16)


        class Base:
            def __init__(self):
                self.loss_sc = torch.cuda.amp.GradScaler()
                self.cast = torch.autocast("cuda")
        """
    )
    assert found == {
        "scaler": (SCALER, ""),
        "ctx": (AUTOCAST, "bf16"),
        "amp": (AUTOCAST_FACTORY, "fp16"),
        "Base.self.loss_sc": (SCALER, ""),
        "Base.self.cast": (AUTOCAST, "fp16"),
    }


def test_what_the_module_cannot_pin_down_is_not_exported() -> None:
    found = exported(
        """\
        import torch

        ctx = torch.autocast("cuda", dtype=torch.float16, enabled=args.fp16)
        choice = torch.autocast("cuda") if fp16 else nullcontext()


        class Base:
            def __init__(self, fp16):
                self.sc = torch.amp.GradScaler("cuda")

            def reset(self):
                self.sc = None


        def local():
            scaler = torch.amp.GradScaler("cuda")
        """
    )
    # An `enabled=` switch keeps the context but not its dtype; a choice, a rebound attribute
    # and a function's local are not exported at all.
    assert found == {"ctx": (AUTOCAST, "")}


def test_an_engine_a_function_returns_is_exported_with_its_setting() -> None:
    text = textwrap.dedent(
        """\
        import deepspeed


        def build_engine(model):
            config = {"train_batch_size": 8, "fp16": {"enabled": True}}
            engine, optimizer, _, _ = deepspeed.initialize(model=model, config=config)
            return engine, optimizer
        """
    )
    context = ModuleContext("m.py", text, cst.parse_module(text))
    [record] = value_records(context, module_index(context))
    assert (record.holder, record.kind, record.dtype) == ("build_engine()", ENGINE, "DeepSpeed")
    assert (record.precision, record.scales) == ("fp16", True)


SOURCES = {
    "amp.py": """
        import torch
        from accelerate import Accelerator

        scaler = torch.amp.GradScaler("cuda")
        rebound = torch.amp.GradScaler("cuda")
        rebound = None


        class Base:
            def __init__(self):
                self.sc = torch.amp.GradScaler("cuda")


        def make_accelerator():
            return Accelerator(mixed_precision="fp16")
    """,
    "main.py": """
        import amp
        from amp import Base, make_accelerator, rebound, scaler as s


        class Child(Base):
            def step(self):
                self.sc.step(opt)


        class Own(Base):
            def __init__(self):
                self.sc = other()

            def step(self):
                self.sc.step(opt)


        accelerator = make_accelerator()
    """,
}


def test_an_importer_reaches_globals_attributes_and_returns_of_another_module(
    tmp_path: Path,
) -> None:
    project = build(tmp_path, SOURCES)
    context = context_of(project, tmp_path / "main.py")
    index = module_index(context)
    values = imported_values(index)
    by_name = {name: values.of_name(name) for name in ("s", "amp.scaler", "rebound", "Base")}
    assert {n: (v[0].kind, v[1]) if v else None for n, v in by_name.items()} == {
        "s": (SCALER, "amp.py"),
        "amp.scaler": (SCALER, "amp.py"),
        "rebound": None,
        "Base": None,
    }
    child, own = [
        call
        for call in index.nodes(cst.Call)
        if cst.Module([]).code_for_node(call) == "self.sc.step(opt)"
    ]
    inherited = values.of_attribute("self.sc", child)
    assert inherited is not None
    assert inherited[0].kind == SCALER
    assert values.of_attribute("self.sc", own) is None  # the subclass binds it itself
    [built] = [
        c for c in index.nodes(cst.Call) if cst.Module([]).code_for_node(c) == "make_accelerator()"
    ]
    engine = values.of_call(built)
    assert engine is not None
    assert (engine[0].kind, engine[0].precision) == (ENGINE, "fp16")


def test_a_module_linted_alone_imports_nothing() -> None:
    text = "from amp import scaler\nscaler.step(opt)\n"
    context = ModuleContext("main.py", text, cst.parse_module(text))
    assert imported_values(module_index(context)).of_name("scaler") is None


def test_a_subclass_inherits_the_values_its_base_binds_and_it_does_not(tmp_path: Path) -> None:
    project = build(tmp_path, SOURCES)
    context = context_of(project, tmp_path / "main.py")
    index = module_index(context)
    child, own = index.nodes(cst.ClassDef)
    values = imported_values(index)
    assert [(r.holder, r.kind, path) for r, path in values.inherited(child)] == [
        ("Base.self.sc", SCALER, "amp.py")
    ]
    assert values.inherited(own) == []


def test_scalers_functions_return_are_exported_by_place_with_their_precision() -> None:
    text = textwrap.dedent(
        """\
        import torch

        def init_opt(model, use_bf16):
            optimizer = torch.optim.AdamW(model.parameters())
            scaler = torch.amp.GradScaler("cuda") if use_bf16 else None
            return optimizer, scaler, None

        def build_scaler():
            return torch.amp.GradScaler("cuda")

        def fp16_scaler(args):
            return torch.amp.GradScaler("cuda", enabled=args.fp16)

        def maybe(flag):
            if flag:
                return torch.optim.SGD([]), torch.amp.GradScaler("cuda")
            return torch.optim.SGD([]), StandardScaler()  # another thing at that place

        def uneven(flag):
            if flag:
                return torch.amp.GradScaler("cuda")
            return None, None

        class Trainer:
            def make(self):
                return torch.amp.GradScaler("cuda")  # a method: not reached by a call here
        """
    )
    context = ModuleContext("m.py", text, cst.parse_module(text))
    found = {
        r.holder: (r.kind, r.line, r.precision)
        for r in value_records(context, module_index(context))
    }
    assert found == {
        "init_opt()[1]": (SCALER, 5, ""),
        "build_scaler()": (SCALER, 9, ""),
        "fp16_scaler()": (SCALER, 12, "other"),
    }


def test_an_importer_binds_a_returned_scaler_by_its_place(tmp_path: Path) -> None:
    from linter.model.values._scaler_receivers import scaler_receivers

    project = build(
        tmp_path,
        {
            "helper.py": (
                "import torch\n"
                "def init_opt(m):\n"
                '    scaler = torch.amp.GradScaler("cuda")\n'
                "    return torch.optim.SGD(m.parameters()), scaler\n"
            ),
            "main.py": (
                "from helper import init_opt\n"
                "opt, scaler = init_opt(model)\n"
                "sched, other = init_opt(model)[::-1]\n"
                "scaler.step(opt)\n"
                "opt.step()\n"
                "other.step()\n"
            ),
        },
    )
    context = context_of(project, tmp_path / "main.py")
    receivers = scaler_receivers(module_index(context))
    assert set(receivers.imported) == {"scaler"}
    bound, record, path = receivers.imported["scaler"]
    assert (cst.Module([]).code_for_node(bound), record.holder, path) == (
        "scaler",
        "init_opt()[1]",
        "helper.py",
    )
    assert receivers.proves(cst.Name("scaler"))
    assert not receivers.proves(cst.Name("opt"))
