"""Sphinx configuration for the ampscale documentation.

The build is offline and strict: ``sphinx-build -W --keep-going -n -b html docs <out>`` must pass
with no warnings. Generated parts (number-format table, CLI reference, rule pages, figures) come
from the local extensions in ``_ext/`` so they cannot drift from the code.
"""

import os
import sys
from importlib.metadata import version as _metadata_version
from pathlib import Path

# Figures are rendered at build time on machines without a display.
os.environ.setdefault("MPLBACKEND", "Agg")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "ampscale"
# The installed distribution's version, so the title says which release a reader is looking at
# (and a version switcher has something to switch between).
release = version = _metadata_version("ampscale")
author = "the ampscale developers"
copyright = "the ampscale developers"

extensions = [
    "myst_parser",
    "sphinx_copybutton",
    "sphinx_design",
    "sphinx.ext.autodoc",
    "google_args",
    "matplotlib.sphinxext.plot_directive",
    "finfo_table",
    "fused_trust_table",
    "cli_reference",
    "lint_output",
    "rule_pages",
    "page_coverage",
]

# The commands whose every argument must appear on a page (page_coverage fails the build if one
# does not): ``module:function`` returning the command's argparse parser, subcommands followed.
ampscale_commands = [
    "linter.cli:build_parser",
    "linter.cli:build_server_parser",
    "scaler.cli:build_parser",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
# _snippets holds text included into several pages; it is not a page of its own.
exclude_patterns = ["_build", "_snippets", "_ext", ".gitignore"]
root_doc = "index"

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

nitpicky = True
# No intersphinx: the build must not touch the network, so references to other projects' objects
# (torch, libcst, the standard library) cannot resolve. They come from autodoc's rendering of our
# signatures and type hints. We ignore exactly those namespaces, and nothing of our own, so that a
# reference to an ampscale name that does not exist still fails the build.
nitpick_ignore_regex = [
    (r"py:.*", r"(torch|nn|libcst|cst)(\..*)?"),
    # The frameworks scaler.integrations plugs into.
    (r"py:.*", r"(transformers|accelerate|lightning)(\..*)?"),
    (
        r"py:.*",
        r"(collections\.abc|typing|types|enum|dataclasses|argparse|warnings|pathlib|os|abc)\..*",
    ),
    (r"py:class", r"(Iterable|Iterator|Sequence|Mapping|Callable|Any|Literal|Self|Path)"),
    (r"py:class", r"(Tensor|Optimizer|Module|ProcessGroup|PathLike)"),
    # A typing alias of ours (Literal["ignore", "warn", "raise"]); autodoc prints its name, which
    # is not a documented object. The constructor's docstring lists the values.
    (r"py:class", r"BelowOnePolicy"),
    # The project model's types in `ModuleContext`'s signature: the model layer is internal
    # (linter.model), explained on its own page rather than in the API reference.
    (r"py:class", r"(Project|ProjectQueries|ForeignSite|linter\.model\..*)"),
]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}

# Figures: PNG only, no "source"/"formats" links (the code lives in _ext/scale_figures.py).
plot_formats = [("png", 110)]
plot_html_show_formats = False
plot_html_show_source_link = False
plot_include_source = False
plot_rcparams = {"figure.figsize": (7.5, 3.6), "font.size": 9}

# Furo: light and dark schemes (following the reader's system, with a toggle), a responsive
# layout and a search box in the sidebar. Its assets ship in the wheel: nothing is fetched.
html_theme = "furo"
html_title = f"ampscale {release}"
html_static_path = ["_static"]
html_css_files = ["ampscale.css"]
html_favicon = "_static/favicon.svg"
html_theme_options = {"navigation_with_keys": True}

# Copy buttons copy the command or code only: the "$ " of a console session, ">>> " and "... "
# of a Python session are left out, and so are the lines they print. Prompts are recognised by
# this pattern at the start of a line, not by Pygments' prompt class: its console lexer also
# takes an indented "# comment" printed by a command (a diff of Python code) for a root prompt.
copybutton_prompt_text = r"\$ |>>> |\.\.\. "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = True
copybutton_exclude = ".linenos, .go"
