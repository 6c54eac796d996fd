"""The docs hook that turns a docstring's ``Args:`` block into Sphinx ``:param:`` fields."""

from __future__ import annotations

import sys

from docs_site import DOCS, DocsBuild

sys.path.insert(0, str(DOCS / "_ext"))
from google_args import convert_args_sections


def test_entries_become_params_with_their_continuation_lines() -> None:
    lines = [
        "Summary.",
        "",
        "Args:",
        "    device: where the scale lives,",
        "        on the device.",
        "    enabled: switch.",
        "",
        "Tail paragraph.",
    ]
    assert convert_args_sections(lines) == [
        "Summary.",
        "",
        ":param device: where the scale lives,",
        "   on the device.",
        ":param enabled: switch.",
        "",
        "Tail paragraph.",
    ]


def test_a_note_in_the_header_is_kept_as_text() -> None:
    lines = ["Args (positional ones as torch's):", "    x: one."]
    assert convert_args_sections(lines) == [
        "Arguments (positional ones as torch's):",
        "",
        ":param x: one.",
    ]


def test_text_without_an_args_section_is_unchanged() -> None:
    lines = ["Arguments are described below:", "    not a section"]
    assert convert_args_sections(lines) == lines


def test_gradscaler_arguments_render_as_fields(built_docs: DocsBuild) -> None:
    page = built_docs.page("reference/api")
    gradscaler = page[page.index('id="scaler.GradScaler"') : page.index('id="scaler.GradScaler.')]
    assert '<dl class="field-list' in gradscaler
    for argument in ("init_scale", "min_scale", "below_one"):
        assert f"<strong>{argument}</strong>" in gradscaler
