"""Every ```python block in the docs runs, page by page, and passes.

Blocks of one page share a namespace, like cells of a notebook, so a page can build on its own
setup. An output a page promises is written as a ``# -> OUTPUT`` comment at the end of the line
that prints it, and is compared with what the block printed: every promised line must be
printed, in order. Code that cannot run here (it needs several processes or a GPU) is written as a
``{code-block} python`` directive instead, which this collector does not pick up. Line numbers in
tracebacks are the lines of the Markdown file.
"""

from __future__ import annotations

import contextlib
import io
import re
import textwrap
from dataclasses import dataclass

import pytest
from docs_site import DOCS

#: Folders whose pages are not hand-written prose (generated, or included fragments).
SKIPPED_FOLDERS = {"_build", "_ext", "_snippets", "rules"}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})python[ \t]*$")
#: ``print(...)  # -> what it prints``: an output the page promises.
_PROMISE = re.compile(r"#\s*->\s*(?P<output>.+?)\s*$")


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """One executable block of a page."""

    #: 1-based line of the block's first code line in the Markdown file.
    line: int
    #: The code, dedented.
    code: str

    @property
    def promised_output(self) -> list[str]:
        """The lines the block promises to print, in order (``# -> OUTPUT`` comments)."""
        return [m["output"] for line in self.code.splitlines() if (m := _PROMISE.search(line))]


def python_blocks(markdown: str) -> list[CodeBlock]:
    """The ```python fenced blocks of a Markdown page, in order (indented fences included)."""
    lines = markdown.splitlines()
    blocks, index = [], 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        index += 1
        if not match:
            continue
        closing = re.compile(rf"^{re.escape(match['indent'])}{match['fence']}[ \t]*$")
        start = index
        while index < len(lines) and not closing.match(lines[index]):
            index += 1
        blocks.append(CodeBlock(start + 1, textwrap.dedent("\n".join(lines[start:index]))))
        index += 1
    return blocks


def _pages_with_examples() -> list[str]:
    pages = []
    for path in sorted(DOCS.rglob("*.md")):
        relative = path.relative_to(DOCS)
        if SKIPPED_FOLDERS & set(relative.parts):
            continue
        if python_blocks(path.read_text(encoding="utf-8")):
            pages.append(relative.as_posix())
    return pages


PAGES = _pages_with_examples()


def test_the_collector_finds_the_examples() -> None:
    # Guards against a collector bug that would make the parametrized test below vacuous.
    assert len(PAGES) >= 8
    assert sum(len(python_blocks((DOCS / p).read_text(encoding="utf-8"))) for p in PAGES) >= 20


def test_pages_promise_outputs_and_the_check_sees_them() -> None:
    # Guards the output comparison below against a pattern that matches nothing.
    promised = [
        output
        for page in PAGES
        for block in python_blocks((DOCS / page).read_text(encoding="utf-8"))
        for output in block.promised_output
    ]
    assert len(promised) >= 6
    assert "torch.float32" in promised


def printed_as_promised(printed: str, promised: list[str]) -> bool:
    """Whether the promised lines appear among the printed ones, in order."""
    lines = iter(printed.splitlines())
    return all(any(line.rstrip() == output for line in lines) for output in promised)


def test_a_broken_promise_is_caught() -> None:
    assert printed_as_promised("a\nb\nc\n", ["a", "c"])
    assert not printed_as_promised("a\nb\n", ["b", "a"])
    assert not printed_as_promised("tensor(1.)\n", ["tensor(0.)"])


def test_collector_handles_indented_fences() -> None:
    markdown = "text\n\n1. item\n\n   ```python\n   x = 1\n   ```\n\n```text\nno\n```\n"
    assert python_blocks(markdown) == [CodeBlock(line=6, code="x = 1")]


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page: str) -> None:
    path = DOCS / page
    namespace: dict[str, object] = {"__name__": f"docs_example_{path.stem.replace('-', '_')}"}
    for block in python_blocks(path.read_text(encoding="utf-8")):
        # Padding with newlines makes traceback line numbers point into the Markdown file.
        code = compile("\n" * (block.line - 1) + block.code, str(path), "exec")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, namespace)
        assert printed_as_promised(printed.getvalue(), block.promised_output), (
            f"{page}:{block.line}: promised {block.promised_output}, printed:\n{printed.getvalue()}"
        )
