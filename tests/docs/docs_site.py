"""What the docs tests share: where the sources are, and a built site."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

#: The Sphinx source folder.
DOCS = Path(__file__).resolve().parents[2] / "docs"


@dataclass(frozen=True, slots=True)
class DocsBuild:
    """The outcome of one Sphinx build."""

    #: Folder holding the HTML output.
    html: Path
    #: Exit status of sphinx-build.
    returncode: int
    #: stdout and stderr of sphinx-build, together.
    log: str
    #: CPU seconds (user + system) of sphinx-build and the processes it waited for.
    cpu_seconds: float

    def page(self, docname: str) -> str:
        """The HTML of one page, by document name (``guides/scale-collapse``)."""
        return (self.html / f"{docname}.html").read_text(encoding="utf-8")


#: Where the theme (Furo) opens a page's own content, after the navigation sidebar.
MAIN_CONTENT = '<article role="main"'


def text_of(page_html: str) -> str:
    """The visible text of a page body, tags stripped and whitespace collapsed."""
    body = page_html[page_html.index(MAIN_CONTENT) :]
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))
