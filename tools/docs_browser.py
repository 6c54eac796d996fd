"""Open the built docs in headless Chromium, as a reader would, and check what only a browser does.

Sphinx's search runs in JavaScript, Furo's dark mode is a script, and whether an image loads or a
code block overflows is only known once a browser has laid the page out; the HTML tests in
``tests/docs`` cannot see any of that. This check serves a built site on localhost (Sphinx search
does not work reliably from ``file://``), drives Debian's ``chromium`` through its
``chromium-driver`` with Selenium, and checks:

* ``search``: searching "scale below 1" from the search page lists the collapse guide among the
  first three results;
* ``pages``: every page loads with no JavaScript console error and no broken image;
* ``warnings``: the "loss scale may fall below 1" warning admonition is visible on the
  GradScaler API page and on the collapse guide;
* ``code-width``: no code block on the collapse guide and the quickstart needs horizontal
  scrolling in a 1280-px-wide window;
* ``dark-mode``: the theme toggle switches to a dark page and back;
* ``copy``: a console block's copy button copies the commands only, without the ``$`` prompts
  and without what the commands printed.

It saves screenshots of the landing page, the collapse guide (light and dark) and a rule page.

    python tools/docs_browser.py docs/_build/html --screenshots docs/_build/screenshots

Exit status 0 when every check passed, 1 when one failed (each failure is one line naming the
check, the page and what was wrong), 2 when the site or the browser is missing.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import http.server
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement

#: Where Debian's packages put the browser and its driver (``apt-get install chromium
#: chromium-driver``); a downloaded browser build is never used.
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
#: Without these Chromium waits on the network (closed here) or a sandbox it cannot create as root.
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)
#: The window the code-width check and the screenshots use: a common laptop width.
WINDOW = (1280, 900)
#: What a reader types, and the page that must be among the first results.
SEARCH_QUERY = "scale below 1"
SEARCH_EXPECTED = "guides/scale-collapse"
SEARCH_TOP = 3
#: Pages that must show the scale-below-1 warning admonition, and a phrase of its title.
WARNING_PAGES = ("reference/api", "guides/scale-collapse")
WARNING_TITLE = "may fall below 1"
#: Pages whose code blocks must fit the window (the most code-heavy reading pages).
CODE_WIDTH_PAGES = ("guides/scale-collapse", "quickstart")
#: Pages whose console blocks' copy buttons are tried.
COPY_PAGES = ("quickstart", "guides/fixing")
#: Screenshot file name (without ``.png``) -> (page, colour scheme).
SCREENSHOTS = {
    "landing": ("index", "light"),
    "scale-collapse": ("guides/scale-collapse", "light"),
    "scale-collapse-dark": ("guides/scale-collapse", "dark"),
    "rule-amp001": ("reference/rules/amp001", "light"),
}
#: Screenshots taken of the whole page, not just the window (the guide's figure and code).
FULL_PAGE = frozenset({"scale-collapse"})
#: Seconds to wait for a page's scripts (search, theme) before calling it broken.
SCRIPT_TIMEOUT = 20.0


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing a reader would see go wrong."""

    #: The check that found it (``search``, ``pages``...).
    check: str
    #: The page, as a document name (``guides/scale-collapse``).
    page: str
    #: What is wrong, in one line.
    detail: str

    def __str__(self) -> str:
        return f"{self.check}: {self.page}: {self.detail}"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serve ``site`` on a free localhost port for the duration; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium() -> Iterator[WebDriver]:
    """A headless Chromium session with a fresh profile, its console log kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="docs-browser-profile-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        options.add_argument(f"--window-size={WINDOW[0]},{WINDOW[1]}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
        try:
            driver.set_window_size(*WINDOW)
            driver.set_page_load_timeout(SCRIPT_TIMEOUT)
            yield driver
        finally:
            driver.quit()


def _wait(condition: Callable[[], object], timeout: float = SCRIPT_TIMEOUT) -> object:
    """Poll ``condition`` until it returns something truthy; ``None`` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value or None
        time.sleep(0.1)


def _open(driver: WebDriver, base: str, page: str) -> None:
    driver.get(f"{base}{page}.html")
    _wait(lambda: driver.execute_script("return document.readyState") == "complete")


def _docname(base: str, href: str) -> str:
    return href.removeprefix(base).split("#")[0].split("?")[0].removesuffix(".html")


# The result list Sphinx's searchtools.js fills; its summary paragraph appears when it is done.
_SEARCH_DONE = """
const summary = document.querySelector('#search-results .search-summary');
if (!summary || !summary.textContent.trim()) return null;
return Array.from(document.querySelectorAll('#search-results ul.search li a'))
    .filter(a => !a.closest('li').parentElement.closest('li'))
    .map(a => a.href);
"""


def check_search(driver: WebDriver, base: str) -> list[Problem]:
    """Type the query into the search page's box, submit it, and read the ranked results."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _open(driver, base, "search")
    box = next(
        (field for field in driver.find_elements(By.NAME, "q") if field.is_displayed()), None
    )
    if box is None:
        return [Problem("search", "search", "no visible search box")]
    box.send_keys(SEARCH_QUERY, Keys.ENTER)
    _wait(lambda: "q=" in driver.current_url)
    results = _wait(lambda: driver.execute_script(_SEARCH_DONE))
    if results is None:
        summary = driver.execute_script(
            "const s = document.querySelector('#search-results');"
            "return s ? s.innerText.trim() : 'no #search-results element';"
        )
        return [
            Problem(
                "search",
                "search",
                f"searching {SEARCH_QUERY!r} never finished or found nothing "
                f"({summary[:80]!r}); is searchindex.js intact?",
            )
        ]
    top = [_docname(base, href) for href in results[:SEARCH_TOP]]
    if SEARCH_EXPECTED not in top:
        return [
            Problem(
                "search",
                "search",
                f"{SEARCH_EXPECTED} is not among the first {SEARCH_TOP} results for "
                f"{SEARCH_QUERY!r}: {top}",
            )
        ]
    return []


_BROKEN_IMAGES = """
return Array.from(document.images)
    .filter(img => !(img.complete && img.naturalWidth > 0))
    .map(img => img.getAttribute('src'));
"""


def _console_errors(driver: WebDriver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def check_pages(driver: WebDriver, base: str, pages: Sequence[str]) -> list[Problem]:
    """Every page: no console error while loading, every image decoded."""
    problems = []
    _console_errors(driver)  # drop what earlier checks logged
    for page in pages:
        _open(driver, base, page)
        _wait(
            lambda: driver.execute_script(
                "return document.images.length === 0 || "
                "Array.from(document.images).every(i => i.complete)"
            )
        )
        problems += [
            Problem("pages", page, f"broken image {src}")
            for src in driver.execute_script(_BROKEN_IMAGES)
        ]
        problems += [
            Problem("pages", page, f"console error: {message}")
            for message in _console_errors(driver)
        ]
    return problems


_VISIBLE_WARNINGS = """
return Array.from(document.querySelectorAll('.admonition.warning'))
    .filter(el => {
        const title = el.querySelector('.admonition-title');
        const box = el.getBoundingClientRect();
        const style = getComputedStyle(el);
        return title && title.textContent.includes(arguments[0]) && box.width > 200
            && box.height > 50 && style.visibility === 'visible' && style.display !== 'none'
            && parseFloat(style.opacity) > 0.5;
    }).length;
"""


def check_warnings(driver: WebDriver, base: str) -> list[Problem]:
    """The scale-below-1 warning is rendered as a visible warning box on each page."""
    problems = []
    for page in WARNING_PAGES:
        _open(driver, base, page)
        if not driver.execute_script(_VISIBLE_WARNINGS, WARNING_TITLE):
            problems.append(
                Problem("warnings", page, f"no visible warning admonition titled {WARNING_TITLE!r}")
            )
    return problems


_OVERFLOWING_CODE = """
return Array.from(document.querySelectorAll('div.highlight pre, pre.literal-block'))
    .filter(pre => pre.scrollWidth > pre.clientWidth + 1)
    .map(pre => pre.innerText.split('\\n').reduce((a, b) => a.length >= b.length ? a : b));
"""


def check_code_width(driver: WebDriver, base: str) -> list[Problem]:
    """No code block on the reading pages scrolls sideways at the standard window width."""
    problems = []
    for page in CODE_WIDTH_PAGES:
        _open(driver, base, page)
        problems += [
            Problem("code-width", page, f"code block scrolls sideways, longest line: {line!r}")
            for line in driver.execute_script(_OVERFLOWING_CODE)
        ]
    return problems


_THEME = """
const rgb = getComputedStyle(document.body).backgroundColor.match(/\\d+/g).map(Number);
return [document.body.dataset.theme, (rgb[0] * 299 + rgb[1] * 587 + rgb[2] * 114) / 1000];
"""


# Records what reaches the clipboard: the copy button's library (ClipboardJS) copies through a
# hidden textarea, whose value the copy event carries.
_RECORD_COPIES = """
window.ampscaleCopied = null;
document.addEventListener('copy', e => { window.ampscaleCopied =
    e.target && e.target.value !== undefined ? e.target.value : String(window.getSelection()); },
    true);
"""


def _copied_by_button(driver: WebDriver, block: WebElement) -> str | None:
    """Hover a code block and click its copy button as a reader does; what was copied."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", block)
    button = block.find_element(By.XPATH, "following-sibling::button[contains(@class,'copybtn')]")
    driver.execute_script("window.ampscaleCopied = null;")
    ActionChains(driver).move_to_element(block).pause(0.3).click(button).perform()
    return _wait(lambda: driver.execute_script("return window.ampscaleCopied;"), timeout=3)


def _commands(console_text: str) -> list[str]:
    """The commands of a console transcript: its ``$`` lines, without the prompt."""
    return [line[2:] for line in console_text.splitlines() if line.startswith("$ ")]


def check_copy(driver: WebDriver, base: str) -> list[Problem]:
    """A console block's copy button copies its commands: no prompt, none of the output."""
    from selenium.webdriver.common.by import By

    problems = []
    for page in COPY_PAGES:
        _open(driver, base, page)
        # The buttons are added once ClipboardJS has loaded.
        if not _wait(lambda: driver.execute_script("return document.querySelector('.copybtn')")):
            problems.append(Problem("copy", page, "no copy buttons on the page"))
            continue
        driver.execute_script(_RECORD_COPIES)
        for block in driver.find_elements(By.CSS_SELECTOR, "div.highlight-console pre"):
            shown = block.get_attribute("innerText")
            first = shown.splitlines()[0]
            copied = _copied_by_button(driver, block)
            if copied is None:
                problems.append(Problem("copy", page, f"copying {first!r} copied nothing"))
            elif [line for line in copied.splitlines() if line.strip()] != _commands(shown):
                problems.append(Problem("copy", page, f"copying {first!r} gave {copied[:120]!r}"))
    return problems


def _theme_changed(driver: WebDriver, before: str) -> bool:
    return driver.execute_script(_THEME)[0] != before


def _set_scheme(driver: WebDriver, scheme: str) -> tuple[str, float] | None:
    """Click the visible theme toggle until the page is in ``scheme``; (theme, brightness)."""
    from selenium.webdriver.common.by import By

    for _ in range(3):
        theme, brightness = driver.execute_script(_THEME)
        if theme == scheme:
            return theme, brightness
        toggles = [
            b for b in driver.find_elements(By.CSS_SELECTOR, ".theme-toggle") if b.is_displayed()
        ]
        if not toggles:
            return None
        toggles[0].click()
        _wait(functools.partial(_theme_changed, driver, theme), timeout=5)
    theme, brightness = driver.execute_script(_THEME)
    return (theme, brightness) if theme == scheme else None


def check_dark_mode(driver: WebDriver, base: str) -> list[Problem]:
    """The toggle reaches a dark page and a light one, and the background follows."""
    _open(driver, base, "index")
    dark = _set_scheme(driver, "dark")
    light = _set_scheme(driver, "light")
    if dark is None or light is None:
        return [Problem("dark-mode", "index", "the theme toggle does not reach dark and light")]
    if not dark[1] < 80 < 170 < light[1]:
        return [
            Problem(
                "dark-mode",
                "index",
                f"background brightness {dark[1]:.0f} in dark mode, {light[1]:.0f} in light mode",
            )
        ]
    return []


def save_screenshots(driver: WebDriver, base: str, folder: Path) -> list[Problem]:
    """Viewport screenshots of the pages in `SCREENSHOTS`, in the scheme each one names."""
    folder.mkdir(parents=True, exist_ok=True)
    problems = []
    for name, (page, scheme) in SCREENSHOTS.items():
        _open(driver, base, page)
        if _set_scheme(driver, scheme) is None:
            problems.append(Problem("screenshots", page, f"could not switch to {scheme} mode"))
        target = folder / f"{name}.png"
        if name in FULL_PAGE:
            target.write_bytes(_full_page_png(driver))
        else:
            driver.save_screenshot(str(target))
    return problems


def _full_page_png(driver: WebDriver) -> bytes:
    """The whole page at the window's width, through the DevTools protocol (Chromium only)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": WINDOW[0], "height": size["height"], "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    return base64.b64decode(shot["data"])


#: Every check, by the name ``--check`` takes, in the order they run.
CHECKS: dict[str, Callable[..., list[Problem]]] = {
    "search": check_search,
    "pages": check_pages,
    "warnings": check_warnings,
    "code-width": check_code_width,
    "dark-mode": check_dark_mode,
    "copy": check_copy,
}


def site_pages(site: Path) -> list[str]:
    """Document names of every HTML page Sphinx wrote (search and index pages included)."""
    return sorted(
        path.relative_to(site).with_suffix("").as_posix()
        for path in site.rglob("*.html")
        if not {"_static", "_sources", "_images", "plot_directive"} & set(path.parts)
    )


def run(
    site: Path,
    checks: Sequence[str],
    screenshots: Path | None,
    pages: Sequence[str] | None = None,
) -> list[Problem]:
    """Run the named checks against the built site; the problems found, in check order.

    ``pages`` limits the ``pages`` check to those documents (default: every page)."""
    problems: list[Problem] = []
    with serve(site) as base, chromium() as driver:
        for name in checks:
            extra = ((site_pages(site) if pages is None else pages),) if name == "pages" else ()
            problems += CHECKS[name](driver, base, *extra)
        if screenshots is not None:
            problems += save_screenshots(driver, base, screenshots)
    return problems


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python tools/docs_browser.py",
        description="Check a built Sphinx site in headless Chromium (see the module docstring).",
    )
    parser.add_argument("site", type=Path, help="the HTML output folder of sphinx-build")
    parser.add_argument(
        "--check",
        action="append",
        choices=list(CHECKS),
        help="run only this check (repeatable; default: all)",
    )
    parser.add_argument("--screenshots", type=Path, help="save screenshots into this folder")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(
            f"docs_browser: error: {args.site}: no index.html (build the site first)",
            file=sys.stderr,
        )
        return 2
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    if missing:
        print(
            f"docs_browser: error: {', '.join(missing)} not found; install Debian's chromium "
            "and chromium-driver (apt-get install chromium chromium-driver)",
            file=sys.stderr,
        )
        return 2
    if args.screenshots is not None:
        shutil.rmtree(args.screenshots, ignore_errors=True)
    checks = args.check or list(CHECKS)
    problems = run(args.site, checks, args.screenshots)
    for problem in problems:
        print(problem)
    failed = {problem.check for problem in problems}
    for name in checks:
        print(f"{'FAIL' if name in failed else 'ok  '} {name}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
