"""Outlines: a module summarised by CPython's parser, its per-step reasons and values made
by the project when a query needs them."""

from __future__ import annotations

import dataclasses
import hashlib
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from linter._parse import parse_module
from linter._rule import ModuleContext
from linter.model.assembly._summarize import summarize
from linter.model.assembly._summary_making import (
    SUMMARY_MAKER,
    full_summary,
    summarise_file,
    values_summary,
)
from linter.model.project._imports import ModuleFiles
from linter.model.project._module_context import FunctionRef
from linter.model.project._outline import outline, outline_fits
from linter.model.project._project import Project
from linter.model.project._project_index import caller_digests
from linter.model.project._summary import ModuleSummary
from linter.model.project._summary_store import Summaries, SummaryStore
from linter.model.project._value_records import AUTOCAST, AUTOCAST_FACTORY, SCALER, possible_kinds
from linter.model.project._value_records import ENGINE as ENGINE_KIND
from linter.model.syntax._line_numbers import function_source, line_numbers_cached
from linter.model.syntax._module_index import module_index

FIXTURES = Path(__file__).parents[2] / "fixtures"

#: Shapes where CPython's tree and libcst's differ: parentheses kept by libcst, byte columns,
#: async functions, classes in classes and in functions, decorators and defaults that call,
#: lambdas, starred bases, strings joined by juxtaposition, dict literals (keys before values in
#: CPython's fields), receivers built in place, annotated and constructed receivers.
TRICKY = (
    '''
import os, sys
import a.b.c
import numpy as np
from . import sibling
from ..pkg.mod import thing as other, more
from x import *
sys.path.insert(0, os.path.join("..", "src"))
sys.path.insert(0, "lib")
sys.path.append("a" "b")
sys.path.append(f"{os.sep}c")
LIMIT = (1 +
         2)  # a comment
NAME = \\
    "plain"
NAME2 = "é" ; OTHER = {"k": make(1), "j": make(2)}
TWICE = 1
TWICE = 2
A = B = (f(a))
(C) = 3
LONG = "'''
    + "x" * 300
    + """"


def count():
    TWICE = 3
    return TWICE


class Base(object, *mixins, metaclass=Meta):
    attribute = build("x")

    @decorate(option=helper())
    def train_step(self, batch, scale=default_scale(), fn=lambda v: v.detach()):
        self.trainer = Trainer(cfg)
        self.trainer.fit(batch)
        Callback(path).on_backward(batch)
        runner: Runner = make_runner()
        runner.go()
        return {"a": first(), "b": second()}["a"]

    async def later(self, task: "tasks.Task", other: "a" "b", raw: bytes):
        await task.run()
        other.run()
        raw.decode()

    def declared(self, given):
        self.y: Three = given
        self.y.go_on()
        self.z: Optional[Four] = given
        self.z.stop()

    class Inner:
        def method(self):
            helper()

        def both(self):
            self.x = One()
            self.x = Two()
            self.x.go()


def outer(x):
    def inner():
        nested_call()

    class Local:
        def local_method(self):
            local_call()

    item = Item()
    item.use()
    return [f(y) for y in g(x) if h(y)] + [ä(1) for _ in "ü"]


if True:
    def conditional():
        cond_call()
"""
)


def _outline_and_full(path: str, text: str) -> tuple[ModuleSummary | None, ModuleSummary]:
    data = text.encode()
    digest = hashlib.sha256(data).hexdigest()
    full = summarize(ModuleContext(path, text, cst.parse_module(text)), path, has_amp=False)
    cleared = dataclasses.replace(
        full,
        functions=tuple(dataclasses.replace(f, reason=None) for f in full.functions),
        calls=tuple(dataclasses.replace(c, reason=None, open=False) for c in full.calls),
        values=(),
        deferred=digest,
        deferred_values=possible_kinds(text),
    )
    return outline(path, text, digest), cleared


def test_an_outline_is_the_summary_less_its_reasons_on_tricky_shapes() -> None:
    found, expected = _outline_and_full("/p/tricky.py", TRICKY)
    assert found == expected
    assert found is not None
    assert len(found.calls) > 20  # the shapes above are all in it
    assert ("LIMIT", "(1 +\n         2)") in found.constants
    assert ("NAME", '"plain"') in found.constants
    # Joined literals and f-strings are not plain strings to libcst: only "lib" is kept.
    assert found.sys_path == ("lib",)


def test_an_annotated_attribute_declares_its_receivers_class() -> None:
    # flair's `self.model: LanguageModel = model`: both parsers read the class it declares; an
    # `Optional[...]` declares none.
    found, expected = _outline_and_full("/p/tricky.py", TRICKY)
    assert found is not None
    for summary in (found, expected):
        receivers = {c.callee: c.receiver_type for c in summary.calls}
        assert receivers["self.y.go_on"] == "Three"
        assert receivers["self.z.stop"] is None


def test_a_folder_built_from_the_scripts_own_file_is_on_its_path() -> None:
    # Research scripts put their repository on sys.path by a path built from __file__: the
    # folder, relative to the script's own, is what both summaries record.
    text = textwrap.dedent(
        """\
        import os, sys
        import os.path as osp
        from pathlib import Path

        BASE_DIR = os.path.dirname(os.path.abspath(__file__))
        ROOT_DIR = os.path.dirname(BASE_DIR)
        sys.path.append(ROOT_DIR)
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
        sys.path.insert(0, osp.abspath(osp.join(__file__, *([".."] * 3))))
        sys.path.append(str(Path(__file__).resolve().parents[1] / "third_party"))
        sys.path.append(str(Path(__file__).parent))
        sys.path.append(__file__)
        sys.path.append(os.environ["EXTRA"])
        sys.path.append(os.path.join(os.getcwd(), ".."))
        """
    )
    found, expected = _outline_and_full("/p/tools/train.py", text)
    assert found == expected
    assert found is not None
    assert found.sys_path == ("../lib", "../..", "..", "../third_party", ".")


def test_an_outline_keeps_line_ends_as_written() -> None:
    # sd-scripts writes `re.compile(r"""...""")` over CRLF lines: the constant keeps them.
    text = 'PATTERN = re.compile(\r\n    r"""\r\na|\r\nb""",\r\n)\r\nX = "é" + f(1)\r\n'
    found, expected = _outline_and_full("/p/crlf.py", text)
    assert found == expected
    assert found is not None
    assert dict(found.constants)["PATTERN"] == 're.compile(\r\n    r"""\r\na|\r\nb""",\r\n)'


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: str(p.relative_to(FIXTURES))
)
def test_an_outline_is_the_summary_less_its_reasons_on_every_fixture(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError:
        pytest.skip("not Python libcst parses (a fixture of broken input)")
    found, expected = _outline_and_full(str(path), text)
    assert found == expected


def test_an_outline_fits_only_a_module_that_exports_no_amp_value() -> None:
    assert outline_fits("import torch\ndef build(): return torch.nn.Linear(2, 2)\n")
    for text in (
        "scaler = torch.amp.GradScaler()\n",
        "from torch.cuda.amp import GradScaler as GS\nscaler = GS()\n",
        "class T:\n    def __init__(self):\n        self.scaler = self.accelerator.scaler\n",
        "ctx = torch.autocast('cuda')\n",
        "engine = deepspeed.initialize(model=m)\n",
        "acc = Accelerator (mixed_precision='fp16')\n",
        "trainer = Trainer(precision = '16-mixed')\n",
    ):
        assert not outline_fits(text), text


def test_an_outline_defers_only_the_kinds_of_value_its_text_can_spell() -> None:
    # timm's NativeScaler wraps a GradScaler the module never builds: not a value here.
    text = "class Trainer:\n    def __init__(self):\n        self.loss_scaler = NativeScaler()\n"
    assert outline_fits(text)
    assert _outline_and_full("/p/native.py", text)[1].values == ()
    assert possible_kinds("ctx = torch.autocast('cuda')\n") == (AUTOCAST, AUTOCAST_FACTORY)
    assert possible_kinds("scaler = torch.amp.GradScaler()\n") == (SCALER,)
    assert possible_kinds("engine = deepspeed.initialize(model=m)\n") == (ENGINE_KIND,)


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: str(p.relative_to(FIXTURES))
)
def test_a_kind_of_value_the_outline_rules_out_is_in_no_full_summary(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        pytest.skip("not Python libcst parses (a fixture of broken input)")
    full = summarize(ModuleContext(str(path), text, module), str(path), has_amp=False)
    assert {value.kind for value in full.values} <= set(possible_kinds(text))


def _deferring_values() -> list[Path]:
    """The fixtures whose outlines leave values for the project to make."""
    return [
        path
        for path in sorted(FIXTURES.rglob("*.py"))
        if summarise_file((str(path), path.read_bytes(), True)).deferred_values
    ]


@pytest.mark.parametrize("path", _deferring_values(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_values_made_alone_are_the_full_summarys_values(path: Path) -> None:
    data = path.read_bytes()
    outlined = summarise_file((str(path), data, True))
    full = full_summary(str(path), data, outlined)
    alone = values_summary(str(path), data, outlined)
    assert full is not None
    assert alone is not None
    assert alone.values == full.values
    assert alone.functions == ()  # no per-step reason was made
    assert alone.calls == ()


def test_values_asked_first_make_no_reason_and_a_reason_asked_later_does(tmp_path: Path) -> None:
    amp_engine = "import torch\n\nscaler = torch.amp.GradScaler()\n" + textwrap.dedent(ENGINE)
    (tmp_path / "engine.py").write_text(amp_engine)
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    paths = [str(tmp_path / "engine.py"), str(tmp_path / "main.py")]
    summaries = {path: summarise_file((path, Path(path).read_bytes(), True)) for path in paths}
    project = Project(ModuleFiles(str(tmp_path), paths), summaries, maker=SUMMARY_MAKER)
    assert [(v.holder, v.kind) for v in project.values_of(paths[0])] == [("scaler", "scaler")]
    assert not project._deferred  # values alone: no full summary, no reason made
    target = FunctionRef(paths[0], "train_step")
    why = project._called_per_step(target, target.path, 0, frozenset())
    assert why == "in `train_step()`, called inside the loop at line 6 of main.py"
    assert project._deferred


def test_every_file_gets_an_outline_whose_reasons_the_full_summary_holds() -> None:
    text = "def main(loader, step):\n    for batch in loader:\n        step(batch)\n"
    found = summarise_file(("/p/main.py", text.encode(), True))
    full = summarize(
        ModuleContext("/p/main.py", text, cst.parse_module(text)), "/p/main.py", has_amp=True
    )
    assert found.deferred == hashlib.sha256(text.encode()).hexdigest()
    assert found.has_amp
    assert found.calls[0].reason is None
    assert full.calls[0].reason == "inside the loop at line 2"


def test_an_outline_defers_its_values_only_when_its_text_may_hold_one() -> None:
    plain = summarise_file(("/p/a.py", b"def f(x):\n    return x\n", False))
    scaler = summarise_file(("/p/b.py", b"import torch\nscaler = torch.amp.GradScaler()\n", True))
    assert not plain.deferred_values
    assert scaler.deferred_values
    assert scaler.values == ()


def test_a_file_cpython_rejects_gets_the_full_summary() -> None:
    # A `print` statement: neither parser takes it, and the summary is empty as before.
    broken = summarise_file(("/p/old.py", b"print 'x'\n", False))
    assert broken == ModuleSummary("/p/old.py")


ENGINE = """
def train_step(model, batch, optimizer, scaler):
    scaler.scale(model(batch)).backward()
    scaler.step(optimizer)
    scaler.update()
    return scaler.get_scale()
"""

MAIN = """
from engine import train_step


def main(model, loader, optimizer, loss_state):
    for batch in loader:
        train_step(model, batch, optimizer, loss_state)


def once(model, batch, optimizer, loss_state):
    train_step(model, batch, optimizer, loss_state)
"""


def _project(tmp_path: Path, main: str = MAIN) -> tuple[Project, FunctionRef]:
    (tmp_path / "engine.py").write_text(textwrap.dedent(ENGINE))
    (tmp_path / "main.py").write_text(textwrap.dedent(main))
    summaries = {
        str(tmp_path / "engine.py"): summarise_file(
            (str(tmp_path / "engine.py"), (tmp_path / "engine.py").read_bytes(), True)
        ),
        str(tmp_path / "main.py"): summarise_file(
            (str(tmp_path / "main.py"), (tmp_path / "main.py").read_bytes(), False)
        ),
    }
    assert summaries[str(tmp_path / "main.py")].deferred  # main.py is an outline
    project = Project(ModuleFiles(str(tmp_path), list(summaries)), summaries, maker=SUMMARY_MAKER)
    return project, FunctionRef(str(tmp_path / "engine.py"), "train_step")


def test_the_project_makes_an_outlines_reasons_when_asked(tmp_path: Path) -> None:
    project, target = _project(tmp_path)
    why = project._called_per_step(target, target.path, 0, frozenset())
    assert why == "in `train_step()`, called inside the loop at line 6 of main.py"


def test_an_outline_whose_file_changed_since_gives_no_reason(tmp_path: Path) -> None:
    project, target = _project(tmp_path)
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN) + "\n# edited\n")
    assert project._called_per_step(target, target.path, 0, frozenset()) is None


def test_an_outline_reads_an_editor_buffer_before_the_disk(tmp_path: Path) -> None:
    project, target = _project(tmp_path)
    data = (tmp_path / "main.py").read_bytes()
    (tmp_path / "main.py").write_text("# saved over, the buffer is what was summarised\n")
    buffered = Project(
        project.files,
        project.summaries,
        buffers={str(tmp_path / "main.py"): data},
        maker=SUMMARY_MAKER,
    )
    why = buffered._called_per_step(target, target.path, 0, frozenset())
    assert why == "in `train_step()`, called inside the loop at line 6 of main.py"


def test_the_project_makes_an_outlines_values_when_asked(tmp_path: Path) -> None:
    (tmp_path / "amp.py").write_text("import torch\n\nscaler = torch.amp.GradScaler()\n")
    path = str(tmp_path / "amp.py")
    summary = summarise_file((path, (tmp_path / "amp.py").read_bytes(), True))
    project = Project(ModuleFiles(str(tmp_path), [path]), {path: summary}, maker=SUMMARY_MAKER)
    assert summary.values == ()
    assert [(v.holder, v.kind, v.line) for v in project.values_of(path)] == [
        ("scaler", "scaler", 3)
    ]


def test_an_outlines_caller_digest_follows_its_content(tmp_path: Path) -> None:
    # Moving the call out of the loop changes no call record's text but the reason: the digest
    # of the callers of `train_step` must change with the outline's content.
    project, _target = _project(tmp_path)
    before = caller_digests(project.summaries)["train_step"]
    loop = "    for batch in loader:\n        train_step"
    moved = MAIN.replace(loop, "    if loader:\n        train_step")
    assert moved != MAIN
    again, _target = _project(tmp_path, moved)
    assert caller_digests(again.summaries)["train_step"] != before


def test_an_outlines_full_summary_leaves_the_linted_modules_state_alone(tmp_path: Path) -> None:
    # On allennlp, with every rule on, an outline's values made in the middle of a lint replaced
    # the linted module's index (and with it a grafted callback), and an AMP012 finding was lost.
    (tmp_path / "amp.py").write_text("import torch\n\nscaler = torch.amp.GradScaler()\n")
    path = str(tmp_path / "amp.py")
    summary = summarise_file((path, (tmp_path / "amp.py").read_bytes(), True))
    project = Project(ModuleFiles(str(tmp_path), [path]), {path: summary}, maker=SUMMARY_MAKER)
    text = "def train(step):\n    for batch in range(3):\n        step(batch)\n"
    linted = ModuleContext(str(tmp_path / "train.py"), text, parse_module(text), project)
    index = module_index(linted)
    lines = line_numbers_cached(text, index)
    source = function_source(text, index, index.nodes(cst.FunctionDef)[0])
    assert project.values_of(path)  # made now, from amp.py's own parse
    assert parse_module(text) is linted.module
    assert module_index(linted) is index
    assert line_numbers_cached(text, index) is lines
    assert function_source(text, index, index.nodes(cst.FunctionDef)[0]) == source


def test_a_full_summary_made_on_demand_is_kept_for_the_next_run(tmp_path: Path) -> None:
    (tmp_path / "amp.py").write_text("import torch\n\nscaler = torch.amp.GradScaler()\n")
    path = str(tmp_path / "amp.py")
    outlined = summarise_file((path, (tmp_path / "amp.py").read_bytes(), True))
    store = SummaryStore(str(tmp_path / "cache"), "code")

    def project() -> Project:
        summaries = Summaries(store, SUMMARY_MAKER)
        summaries.add(path, outlined)
        return Project(ModuleFiles(str(tmp_path), [path]), summaries, maker=SUMMARY_MAKER)

    made = project().values_of(path)
    assert made
    # The next run reads what the first made, not the file (gone here, to show it).
    (tmp_path / "amp.py").unlink()
    assert project().values_of(path) == made
    # Without the store, the file is read: gone, it answers nothing.
    assert (
        Project(
            ModuleFiles(str(tmp_path), [path]), {path: outlined}, maker=SUMMARY_MAKER
        ).values_of(path)
        == ()
    )
