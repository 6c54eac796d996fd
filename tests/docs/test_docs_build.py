"""The site builds with zero warnings, quickly, and every page is reachable from the toctree."""

from __future__ import annotations

import ast
import importlib.metadata
import pickle
import re

from docs_site import DOCS, DocsBuild, text_of

#: The brief's budget for one build; CI runs it twice (tox env ``docs`` and these tests). Counted
#: in CPU seconds, which other processes on the machine do not inflate as they do wall time.
#: Sixteen rule pages (each fix showcase run at build time), the project-model, config-file,
#: editor, baseline, compile and FSDP2 pages: the whole build stays well under two minutes of CPU.
MAX_BUILD_SECONDS = 120


def test_build_succeeds_without_warnings(docs_build: DocsBuild) -> None:
    assert docs_build.returncode == 0, docs_build.log
    assert not re.search(r"WARNING|ERROR", docs_build.log), docs_build.log


def test_build_is_fast(built_docs: DocsBuild) -> None:
    assert built_docs.cpu_seconds < MAX_BUILD_SECONDS


def _source_docnames() -> set[str]:
    ignored = {"_build", "_ext", "_snippets"}
    return {
        path.relative_to(DOCS).with_suffix("").as_posix()
        for path in DOCS.rglob("*.md")
        if not ignored & set(path.relative_to(DOCS).parts)
    }


def test_every_page_is_reachable_from_the_root_toctree(built_docs: DocsBuild) -> None:
    # Sphinx's pickled environment records, for each document, the documents its toctrees include.
    environment = pickle.loads((built_docs.html / ".doctrees" / "environment.pickle").read_bytes())
    reachable, pending = set(), ["index"]
    while pending:
        docname = pending.pop()
        if docname not in reachable:
            reachable.add(docname)
            pending.extend(environment.toctree_includes.get(docname, ()))
    assert _source_docnames() - reachable == set()
    assert _source_docnames() <= set(environment.found_docs)


def test_no_page_is_left_out_of_the_html(built_docs: DocsBuild) -> None:
    html = built_docs.html
    assert [name for name in _source_docnames() if not (html / f"{name}.html").exists()] == []


def test_docs_do_not_fetch_anything() -> None:
    # intersphinx would download inventories at build time; the build must work offline.
    tree = ast.parse((DOCS / "conf.py").read_text(encoding="utf-8"))
    extensions = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["extensions"]
    )
    assert "myst_parser" in extensions
    assert "sphinx.ext.intersphinx" not in extensions


def test_the_title_names_the_installed_version(built_docs: DocsBuild) -> None:
    version = importlib.metadata.version("ampscale")
    assert f"<title>ampscale {version}</title>" in built_docs.page("index")
    assert f"ampscale {version}" in built_docs.page("guides/scale-collapse")


def test_the_theme_has_dark_mode_copy_buttons_and_tabs(built_docs: DocsBuild) -> None:
    page = built_docs.page("quickstart")
    assert 'class="theme-toggle"' in page  # Furo's light/dark/auto switch
    assert "copybutton.js" in page
    assert 'class="sd-tab-set' in page  # the HF / accelerate / Lightning tabs
    assert (built_docs.html / "_static" / "favicon.svg").is_file()


def test_the_changelog_is_part_of_the_docs(built_docs: DocsBuild) -> None:
    text = text_of(built_docs.page("changelog"))
    changelog = (DOCS.parent / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "Keep a Changelog" in changelog
    assert "Keep a Changelog" in text
    assert "[Unreleased]" in changelog
    assert "Unreleased" in text
