"""What the built pages must say: the scale-below-1 warning, the finfo table, the CLI, the API."""

from __future__ import annotations

import re
import sys

import pytest
from docs_site import DOCS, MAIN_CONTENT, DocsBuild, text_of

import scaler
from linter.cli import build_parser
from linter.rules import ALL_RULES

#: Pages that must carry the "loss scale may fall below 1" warning.
WARNING_PAGES = ("guides/scale-collapse", "guides/troubleshooting-nans", "reference/api")


@pytest.mark.parametrize("docname", WARNING_PAGES)
def test_scale_below_one_warning_is_on_the_page(built_docs: DocsBuild, docname: str) -> None:
    text = text_of(built_docs.page(docname)).lower()
    assert "may fall below 1" in text
    assert "2**-128" in text


@pytest.mark.parametrize("docname", ["guides/scale-collapse", "guides/troubleshooting-nans"])
def test_guides_open_with_the_warning_admonition(built_docs: DocsBuild, docname: str) -> None:
    page = built_docs.page(docname)
    heading = page.index("<h1")
    admonition = re.search(r'class="(warning admonition|admonition warning)"', page).start()
    first_paragraph_after_heading = page.index("<p>", page.index("</h1>"))
    assert heading < admonition < first_paragraph_after_heading


def test_amp002_page_carries_the_warning(built_docs: DocsBuild) -> None:
    assert "AMP002" in {rule.code for rule in ALL_RULES}
    text = text_of(built_docs.page("reference/rules/amp002")).lower()
    assert "may fall below 1" in text
    assert "2**-128" in text


def test_finfo_table_shows_fp16_limits(built_docs: DocsBuild) -> None:
    page = built_docs.page("explanation/number-formats")
    table = page[page.index('class="finfo-table') : page.index("</table>")]
    text = text_of(MAIN_CONTENT + table)
    assert "65504" in text
    assert "2**-14" in text  # fp16 min normal
    assert "2**-24" in text  # fp16 min subnormal
    assert "2**-10" in text  # fp16 eps
    assert "2**-149" in text  # fp32's smallest subnormal, where torch's scale becomes 0


def test_cli_reference_lists_every_option_of_the_real_parser(built_docs: DocsBuild) -> None:
    text = text_of(built_docs.page("reference/cli"))
    parser = build_parser()
    for action in parser._actions:
        for flag in action.option_strings:
            assert flag in text, flag
    assert parser.format_usage().split()[1] in text  # the program name, from the usage line


def test_api_page_documents_every_public_scaler_name(built_docs: DocsBuild) -> None:
    page = built_docs.page("reference/api")
    for name in scaler.__all__:
        assert f'id="scaler.{name}"' in page, name


@pytest.mark.parametrize("docname", ["guides/scale-collapse", "explanation/number-formats"])
def test_build_time_figures_are_embedded(built_docs: DocsBuild, docname: str) -> None:
    images = re.findall(r'<img[^>]+src="([^"]+\.png)"', built_docs.page(docname))
    assert images
    for src in images:
        assert (built_docs.html / docname).parent.joinpath(src).resolve().stat().st_size > 10_000


@pytest.mark.parametrize(
    ("docname", "arguments", "code"),
    [
        ("quickstart", ["examples/fp16_get_scale_every_step.py"], "AMP001"),
        (
            "guides/bf16-checkpoints",
            ["examples/finetune_bf16_checkpoint_in_fp16.py", "examples/finetune_bf16.py"],
            "AMP002",
        ),
    ],
)
def test_pages_show_what_amp_lint_prints_today(
    built_docs: DocsBuild, docname: str, arguments: list[str], code: str
) -> None:
    sys.path.insert(0, str(DOCS / "_ext"))
    from lint_output import run_amp_lint

    status, output = run_amp_lint(arguments)
    assert status == 1
    assert code in output
    text = text_of(built_docs.page(docname))
    for line in output.strip().splitlines():
        assert " ".join(line.split()) in text


def test_support_matrix_shows_every_row_of_the_trust_table(built_docs: DocsBuild) -> None:
    from scaler._fused_support import TRUST_TABLE

    page = built_docs.page("guides/fsdp2-fp16")
    start = page.index('class="fused-trust-table')
    table = page[start : page.index("</table>", start)]
    assert table.count("<tr") == len(TRUST_TABLE) + 1  # the header, then one row per entry
    text = text_of(MAIN_CONTENT + table)
    for verdict in ("trusted (no sync)", "unverified: host fallback", "host fallback (1 sync"):
        assert verdict in text
    assert text.count("(fused=True)") == len(TRUST_TABLE)
