"""`linter.model.syntax._noqa_sites`: a line's noqa directive as the nodes a fix replaces."""

from __future__ import annotations

import libcst as cst

from linter._rule import ModuleContext
from linter.model.syntax._noqa_sites import noqa_sites


def context(source: str) -> ModuleContext:
    return ModuleContext("t.py", source, cst.parse_module(source))


SOURCE = """\
# noqa: AMP009
x = f(  # noqa: AMP001
    1,  # a comment
)  # noqa
s = '# noqa: AMP002'
"""


def test_each_directive_line_has_its_comment_node() -> None:
    sites = noqa_sites(context(SOURCE))
    assert sorted(sites) == [1, 2, 4]
    assert sites[1].own_line
    assert not sites[2].own_line
    assert sites[2].comment.value == "# noqa: AMP001"
    assert sites[4].directive.codes is None


def test_replacing_with_no_text_drops_the_comment_and_its_spacing_only() -> None:
    ctx = context(SOURCE)
    old, new = noqa_sites(ctx)[2].replaced(None)
    assert ctx.module.code_for_node(old) == "  # noqa: AMP001\n"
    assert ctx.module.code_for_node(new) == "\n"
    old, new = noqa_sites(ctx)[2].replaced("# noqa: F841")
    assert ctx.module.code_for_node(new) == "# noqa: F841"


def test_a_module_without_directives_has_no_sites() -> None:
    assert noqa_sites(context("x = 1  # just a comment\n")) == {}
