"""Code that runs on the first call only, then cached (`linter.model.steps._run_once`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from linter._rule import ModuleContext
from linter.model.steps._run_once import is_cached, memo_exit, memo_guard
from linter.model.syntax._dotted_names import ImportAliases
from linter.model.syntax._module_index import ModuleIndex, module_index
from linter.model.syntax._tree import walk


def _index(source: str) -> ModuleIndex:
    source = textwrap.dedent(source)
    return module_index(ModuleContext("t.py", source, cst.parse_module(source)))


def _ifs(index: ModuleIndex) -> list[cst.If]:
    found = [node for node in walk(index.module) if isinstance(node, cst.If)]
    return sorted(found, key=lambda node: index.order.get(node, 0))


@pytest.mark.parametrize(
    ("test", "body", "target"),
    [
        ("self._scale is None", "self._scale = scaler.get_scale()", "self._scale"),
        ('not hasattr(self, "base")', "self.base = scaler.get_scale()", "self.base"),
        ('getattr(self, "start", None) is None', "self.start = read()", "self.start"),
        (
            "not self._started",
            "log(read())\n                    self._started = True",
            "self._started",
        ),
        ("self._first", "log(read())\n                    self._first = False", "self._first"),
    ],
)
def test_a_test_for_an_unset_value_whose_body_sets_it_is_a_memo_guard(
    test: str, body: str, target: str
) -> None:
    index = _index(
        f"""
        class Hook:
            def on_step(self):
                if {test}:
                    {body}
        """
    )
    (statement,) = _ifs(index)
    memo = memo_guard(index, statement)
    assert memo is not None
    assert memo.target == target
    assert memo.resets == ()


@pytest.mark.parametrize(
    "source",
    [
        # The body does not set what the test checks.
        "def f(self):\n    if self._scale is None:\n        log(scaler.get_scale())\n",
        # It sets it back to the unset value.
        "def f(self):\n    if self._scale is None:\n        self._scale = None\n",
        # A plain local name is unset again on every call.
        "def f():\n    scale = None\n    if scale is None:\n        scale = read()\n",
        # A test about something else.
        "def f(self):\n    if self.scaler is not None:\n        self.scale = read()\n",
        "def f(self):\n    if step % 10 == 0:\n        self.scale = read()\n",
    ],
)
def test_other_tests_are_no_memo_guard(source: str) -> None:
    index = _index(source)
    (statement,) = _ifs(index)
    assert memo_guard(index, statement) is None


def test_a_local_name_cached_across_the_passes_of_a_loop_is_a_memo_guard() -> None:
    index = _index(
        """
        def train(loader):
            baseline = None
            for batch in loader:
                if baseline is None:
                    baseline = scaler.get_scale()
        """
    )
    (statement,) = _ifs(index)
    memo = memo_guard(index, statement)
    assert memo is not None
    # The initial binding is reported as a reset: the caller judges how often it runs.
    assert [type(node) for node in memo.resets] == [cst.Assign]


def test_assignments_of_the_unset_value_elsewhere_and_deletions_are_resets() -> None:
    index = _index(
        """
        class Hook:
            def __init__(self):
                self._scale = None

            def on_step_end(self):
                if self._scale is None:
                    self._scale = scaler.get_scale()
                self._scale = None
                del self._scale
                self._scale = 2.0
        """
    )
    (statement,) = _ifs(index)
    memo = memo_guard(index, statement)
    assert memo is not None
    assert [type(node) for node in memo.resets] == [cst.Assign, cst.Assign, cst.Del]


def test_an_early_exit_while_cached_before_the_statements_that_cache_is_a_memo_exit() -> None:
    index = _index(
        """
        class Hook:
            def reference(self):
                if self._reference is not None:
                    return self._reference
                self._reference = scaler.get_scale()
                return self._reference
        """
    )
    (function,) = index.nodes(cst.FunctionDef)
    statements = tuple(function.body.body)
    statement = statements[0]
    assert isinstance(statement, cst.If)
    memo = memo_exit(index, statement, statements[1:])
    assert memo is not None
    assert memo.target == "self._reference"
    assert memo_exit(index, statement, ()) is None
    assert memo_guard(index, statement) is None


@pytest.mark.parametrize(
    ("decorator", "expected"),
    [
        ("import functools\n@functools.cache", True),
        ("from functools import lru_cache\n@lru_cache(maxsize=None)", True),
        ("from functools import cached_property as lazy\n@lazy", True),
        ("import functools\n@functools.wraps(other)", False),
        ("@cache  # no import: some other `cache`", False),
    ],
)
def test_caching_decorators_are_recognised_by_qualified_name(
    decorator: str, expected: bool
) -> None:
    index = _index(f"{decorator}\ndef initial_scale():\n    return scaler.get_scale()\n")
    aliases = ImportAliases(index.nodes(cst.Import) + index.nodes(cst.ImportFrom))
    (function,) = index.nodes(cst.FunctionDef)
    assert is_cached(function, aliases) is expected
