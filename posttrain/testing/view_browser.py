"""The viewer driven in a real headless Chromium (Playwright, Debian's /usr/bin/chromium): the
steps the browser test checks and the benchmark times.

    with chromium_page() as (page, errors):     # errors: console errors and page exceptions
        ms = open_viewer(page, url)             # first load until the curves are drawn
        ms = filter_trajectories(page, "code")  # filter submitted -> table redrawn

Times are wall-clock milliseconds measured in the page (performance.now()); they are
reported by the test and recorded by benchmarks/view_bench.py, never asserted.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from typing import Any, Iterator

CHROMIUM = os.environ.get("POSTTRAIN_CHROMIUM", "/usr/bin/chromium")


def chromium_missing() -> str | None:
    """Why the browser cannot run here, or None."""
    if not (os.path.isfile(CHROMIUM) or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set POSTTRAIN_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; no browser download needed)"
    return None


@contextmanager
def chromium_page(width: int = 1400, height: int = 1000) -> Iterator[tuple[Any, list[str]]]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
            yield page, errors
        finally:
            browser.close()


def open_viewer(page: Any, url: str) -> float:
    """Load the viewer; ms from navigation start until the curves tab has drawn."""
    page.goto(url)
    page.wait_for_selector("body[data-ready='curves']", timeout=15000)
    return float(page.evaluate("performance.now()"))


def open_tab(page: Any, name: str) -> None:
    page.evaluate("document.body.dataset.ready = ''")
    page.click(f"#tabs button[data-tab='{name}']")
    page.wait_for_selector(f"body[data-ready='{name}']", timeout=15000)


def filter_trajectories(page: Any, domain: str, **fields: str) -> float:
    """Pick `domain` (and fill any other filter fields), submit; ms until the table is redrawn."""
    page.select_option("#f-domain", domain)
    for name, value in fields.items():
        page.fill(f"#filters [name='{name}']", value)
    page.evaluate("delete document.body.dataset.filterMs")
    page.click("#apply")
    page.wait_for_function("document.body.dataset.filterMs !== undefined", timeout=15000)
    return float(page.evaluate("+document.body.dataset.filterMs"))
