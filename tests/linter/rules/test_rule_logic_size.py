"""Each rule file stays a query: at most 150 lines of logic (issue 19, "rules as queries").

Logic lines are the lines that hold code, less the docstrings and the rule's data that is docs
rather than logic (``valid``/``invalid`` examples, ``summary``, ``triggers``): the same count as
the project's evaluation script, so the two never disagree about a rule file.
"""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize
from pathlib import Path

import pytest

import linter.rules

#: The bound the issue sets for one rule file's logic.
MAX_LOGIC_LINES = 150

#: Assigned names whose value is documentation or pre-filter data, not logic.
_DATA_NAMES = frozenset({"valid", "invalid", "summary", "triggers"})
#: Annotated assignments of those that are skipped too (examples typed as a tuple).
_ANNOTATED_DATA_NAMES = frozenset({"valid", "invalid"})
#: Tokens that are not code: comments, line ends, indentation, the end marker.
_NOT_CODE = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    }
)

RULES_DIR = Path(linter.rules.__file__).parent
RULE_FILES = sorted(RULES_DIR.glob("amp*.py"))


def _span(node: ast.stmt) -> range:
    return range(node.lineno, (node.end_lineno or node.lineno) + 1)


def _not_logic(tree: ast.AST) -> set[int]:
    """Lines of docstrings (of any body) and of the rule's documentation data."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(_span(first))
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id in _DATA_NAMES for target in node.targets
        ):
            lines.update(_span(node))
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id in _ANNOTATED_DATA_NAMES
        ):
            lines.update(_span(node))
    return lines


def logic_lines(source: str) -> int:
    """How many lines of ``source`` hold code that is neither a docstring nor rule data."""
    code: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _NOT_CODE:
            code.update(range(token.start[0], token.end[0] + 1))
    return len(code - _not_logic(ast.parse(source)))


def test_the_count_leaves_out_docstrings_examples_comments_and_blank_lines() -> None:
    source = textwrap.dedent(
        '''\
        """Module docstring."""

        import re  # a comment


        class Rule:
            """Docs
            over lines."""

            summary = "s"
            triggers = ("a",
                        "b")
            valid = (
                Example("x = 1"),
            )

            def check(self, context):
                # why
                if context:
                    return re.compile(
                        "x"
                    )
        '''
    )
    # import, class, def, if, and the three lines of the return.
    assert logic_lines(source) == 7


def test_a_multi_line_string_that_is_no_docstring_counts_on_every_line() -> None:
    source = 'MESSAGE = """one\ntwo\nthree"""\n'
    assert logic_lines(source) == 3


def test_the_rules_directory_holds_every_rule_file() -> None:
    assert len(RULE_FILES) == len(linter.rules.ALL_RULES)


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda path: path.stem)
def test_rule_logic_is_at_most_150_lines(path: Path) -> None:
    count = logic_lines(path.read_text(encoding="utf-8"))
    assert count <= MAX_LOGIC_LINES, (
        f"{path.name}: {count} lines of rule logic (at most {MAX_LOGIC_LINES}): move analyses "
        "into linter/model/ as named queries"
    )
