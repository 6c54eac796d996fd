"""The real-browser check passes on the built site, and fails when the site is broken.

Each breaking test damages a copy of the site the way a bad build or deploy would, and checks that
the check names what broke; without them a check that could not fail would look the same.
"""

from __future__ import annotations

import re
from pathlib import Path

import docs_browser
import pytest
from PIL import Image, ImageStat


@pytest.fixture(scope="module")
def screenshots(site: Path, request: pytest.FixtureRequest) -> Path:
    folder = Path(request.config.getoption("--screenshots"))
    assert docs_browser.main([str(site), "--screenshots", str(folder)]) == 0
    return folder


def test_the_built_site_passes_every_check(screenshots: Path) -> None:
    # The fixture ran every check (search, pages, warnings, code-width, dark-mode) and asserted
    # that none failed; here, that it also left the screenshots.
    names = sorted(path.stem for path in screenshots.glob("*.png"))
    assert names == sorted(docs_browser.SCREENSHOTS)


def _brightness(path: Path) -> float:
    with Image.open(path) as image:
        assert image.width == docs_browser.WINDOW[0]
        return ImageStat.Stat(image.convert("L")).mean[0]


def test_screenshots_show_light_and_dark_pages(screenshots: Path) -> None:
    light = _brightness(screenshots / "scale-collapse.png")
    dark = _brightness(screenshots / "scale-collapse-dark.png")
    assert light > 180 > 90 > dark
    for name in ("landing", "rule-amp001"):
        assert _brightness(screenshots / f"{name}.png") > 180


#: A few pages around the ones the tests break, so that the pages check stays quick there.
SAMPLE_PAGES = ("index", "guides/scale-collapse", "guides/monitoring", "quickstart")


def _problems(site: Path, check: str) -> list[docs_browser.Problem]:
    return docs_browser.run(site, [check], screenshots=None, pages=SAMPLE_PAGES)


def test_a_corrupt_search_index_fails_the_search_check(site_copy: Path) -> None:
    index = site_copy / "searchindex.js"
    text = index.read_text(encoding="utf-8")
    index.write_text(text[: len(text) // 2], encoding="utf-8")  # a truncated upload
    problems = _problems(site_copy, "search")
    assert [(p.check, p.page) for p in problems] == [("search", "search")]
    assert "never finished or found nothing" in problems[0].detail


def test_a_search_index_without_the_guide_fails_the_search_check(site_copy: Path) -> None:
    # The index loads, but the guide's main index entry is gone, so it no longer ranks first.
    index = site_copy / "searchindex.js"
    text = index.read_text(encoding="utf-8")
    broken = re.sub(r'"scale below 1":\[\[\d+,"[^"]*",true\]\],?', "", text)
    assert broken != text
    index.write_text(broken, encoding="utf-8")
    problems = _problems(site_copy, "search")
    assert len(problems) == 1
    assert "is not among the first 3 results" in problems[0].detail


def test_a_missing_image_fails_the_pages_check(site_copy: Path) -> None:
    (site_copy / "_images" / "scale-collapse-1.png").unlink()
    problems = _problems(site_copy, "pages")
    assert {(p.page, p.detail) for p in problems} >= {
        ("guides/scale-collapse", "broken image ../_images/scale-collapse-1.png")
    }
    assert {p.page for p in problems} == {"guides/scale-collapse"}
    assert any("console error" in p.detail and "404" in p.detail for p in problems)


def test_a_script_error_fails_the_pages_check(site_copy: Path) -> None:
    page = site_copy / "quickstart.html"
    html = page.read_text(encoding="utf-8")
    page.write_text(html.replace("</body>", "<script>undefinedFunction();</script></body>"))
    problems = _problems(site_copy, "pages")
    assert [p.page for p in problems] == ["quickstart"]
    assert "undefinedFunction" in problems[0].detail


def test_a_hidden_warning_fails_the_warnings_check(site_copy: Path) -> None:
    page = site_copy / "reference" / "api.html"
    html = page.read_text(encoding="utf-8")
    page.write_text(html.replace("</head>", "<style>.admonition{display:none}</style></head>"))
    problems = _problems(site_copy, "warnings")
    assert [(p.check, p.page) for p in problems] == [("warnings", "reference/api")]


def test_a_wide_code_block_fails_the_code_width_check(site_copy: Path) -> None:
    page = site_copy / "quickstart.html"
    html = page.read_text(encoding="utf-8")
    wide = "x = " + " + ".join(f"value_{i}" for i in range(30))
    page.write_text(html.replace("<pre>", f"<pre>{wide}\n", 1), encoding="utf-8")
    problems = _problems(site_copy, "code-width")
    assert [(p.check, p.page) for p in problems] == [("code-width", "quickstart")]
    assert "value_29" in problems[0].detail


def test_a_theme_without_its_script_fails_the_dark_mode_check(site_copy: Path) -> None:
    # Furo's toggle is wired up by furo.js; without it the button does nothing.
    script = site_copy / "_static" / "scripts" / "furo.js"
    assert script.is_file()
    script.write_text("", encoding="utf-8")
    problems = _problems(site_copy, "dark-mode")
    assert [(p.check, p.page) for p in problems] == [("dark-mode", "index")]


def test_a_copy_button_that_copies_output_fails_the_copy_check(site_copy: Path) -> None:
    # As if the docs were built with copybutton_only_copy_prompt_lines = False and without
    # excluding Pygments' output class: the printed lines would be copied with the commands.
    script = site_copy / "_static" / "copybutton.js"
    text = script.read_text(encoding="utf-8")
    # formatCopyText(text, prompts, isRegexp, onlyCopyPromptLines, removePrompts, ...)
    only_prompt_lines = "true, true, true, true, '', '')"
    every_line = "true, false, true, true, '', '')"
    assert "'.linenos, .go'" in text
    assert only_prompt_lines in text
    text = text.replace("'.linenos, .go'", "'.linenos'").replace(only_prompt_lines, every_line)
    script.write_text(text, encoding="utf-8")
    problems = _problems(site_copy, "copy")
    assert {p.page for p in problems} == set(docs_browser.COPY_PAGES)
    assert all(p.check == "copy" and "gave" in p.detail for p in problems)
