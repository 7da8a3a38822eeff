"""The UI tests' browser helper against a page that redraws its link as the Airflow UI redraws what it polls
(a running task's details): a link found earlier goes stale, ``Browser.click_link`` clicks the one there."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deployment.browser import Browser, chromium

pytestmark = [pytest.mark.deployment, pytest.mark.timeout(120)]

#: A link replaced by a new element every 0.5 s, opening ``opened.html`` beside it in a new window.
REDRAWN = """<!doctype html><html><body><div id="links"></div><script>
const draw = () => { document.getElementById("links").innerHTML =
  '<a href="opened.html" target="_blank">T9k Job</a>'; };
draw(); setInterval(draw, 500);
</script></body></html>"""


def redrawn_page(directory: Path) -> str:
    (directory / "opened.html").write_text("<!doctype html><p>opened</p>")
    page = directory / "redrawn.html"
    page.write_text(REDRAWN)
    return page.as_uri()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with chromium(tmp_path_factory.mktemp("shots")) as started:
        yield started


def test_a_link_found_before_a_redraw_is_stale(browser: Browser, tmp_path: Path) -> None:
    """What the extra-links test did before: the anchor looked up, then clicked after a while."""
    from selenium.common.exceptions import StaleElementReferenceException

    browser.open(redrawn_page(tmp_path))
    anchor = browser.wait("the link", lambda: browser.anchors(["T9k Job"]).get("T9k Job"))
    time.sleep(1.0)  # two redraws
    with pytest.raises(StaleElementReferenceException):
        anchor.click()


def test_click_link_opens_the_link_the_page_holds_at_the_click(browser: Browser, tmp_path: Path) -> None:
    browser.open(redrawn_page(tmp_path))
    for _ in range(5):
        with browser.new_window(lambda: browser.click_link("T9k Job")):
            browser.wait_for_text("the opened page", lambda text: "opened" in text, 30)
