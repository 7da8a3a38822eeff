"""Debian's headless Chromium, driven by selenium through Debian's chromium-driver (neither downloads
anything), for the tests that look at the Airflow UI as a person does.

``make env`` installs both when missing (as root; Debian's packages); where they are not installed a
test that needs them skips naming them (under ``CI=true`` as root it fails instead: CI installs them).
Every check saves a screenshot under ``SCREENSHOTS`` (docs/development.md#screenshots).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any, TypeVar

from t9k_provider.testing import wait_for
from t9k_provider.testing.cluster import unavailable

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
#: Where the screenshots go, a folder per Airflow version (``T9K_SCREENSHOTS`` moves it; CI keeps reports/).
SCREENSHOTS = Path(os.environ.get("T9K_SCREENSHOTS") or REPO / "reports" / "screenshots") / (
    "airflow-" + importlib.metadata.version("apache-airflow")
)
WINDOW = (1600, 1600)
#: Chromium's error for a request it aborted because the host's network changed: it watches the host's
#: interfaces and addresses, and a local cluster's kubelet on the same host adds and removes its pods' network
#: interfaces (each pod's, every few seconds where tests run side by side), so a page loading meanwhile loses
#: scripts and stays blank. On a real cluster the nodes are not the browser's host; here the page is loaded
#: again, as a person would.
NETWORK_CHANGED = "net::ERR_NETWORK_CHANGED"
#: At most this many loads again of one page opened.
RELOADS = 5
#: Tries of one screenshot (``Browser.shot``).
SHOT_TRIES = 3


class Browser:
    """One headless Chromium window; ``shots`` is where its screenshots go."""

    def __init__(self, driver: Any, shots: Path) -> None:
        self.driver = driver
        self.shots = shots
        self.errors: list[str] = []  # what the console logged as an error since the page was opened
        self.reloads = 0  # how often the page was loaded again since it was opened (NETWORK_CHANGED)

    def open(self, url: str) -> None:
        self.driver.get_log("browser")  # the previous page's: reading the log empties it
        self.errors, self.reloads = [], 0
        self.driver.get(url)

    def console(self) -> list[str]:
        """The console's errors since the last look (kept in ``errors`` too)."""
        new = [e["message"][:300] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]
        self.errors += new
        return new

    def reloaded(self) -> bool:
        """Loads the page again when the console says a request was aborted for NETWORK_CHANGED since the
        last look (at most RELOADS times); True when it did."""
        aborted = any(NETWORK_CHANGED in message for message in self.console())
        if not aborted or self.reloads >= RELOADS:
            return False
        self.reloads += 1
        self.driver.refresh()
        return True

    def text(self) -> str:
        """What the page shows (the body's rendered text)."""
        from selenium.webdriver.common.by import By

        return str(self.driver.find_element(By.TAG_NAME, "body").text)

    def wait(self, what: str, probe: Callable[[], T], timeout: float = 60) -> T:
        """``probe``'s first truthy result; an element that went away or is not there yet (the page
        renders as it loads) counts as "not yet"; a page that lost requests to NETWORK_CHANGED is loaded
        again. On timeout a screenshot of what the page showed and how far it got."""
        from selenium.common.exceptions import WebDriverException

        def looked() -> T | None:
            try:
                return None if self.reloaded() else probe()
            except WebDriverException:
                return None

        try:
            return wait_for(what, looked, timeout, 0.5)
        except TimeoutError as exc:
            shot = self.shot(f"timeout-{what[:60]}")
            raise TimeoutError(
                f"{exc}\nthe page then: {shot}\n{self.loading()}\n{self.text()[-3000:]}"
            ) from None

    def loading(self) -> str:
        """How far the page got, by the browser's own clock: its load milestones, the slowest of what it
        fetched, and what its console logged as an error (a page that stays blank says why here)."""
        timing = self.driver.execute_script(
            "const n = performance.getEntriesByType('navigation')[0] || {};"
            "const r = performance.getEntriesByType('resource')"
            "  .map(e => [e.name.split('?')[0].split('/').pop(),"
            "    Math.round(e.startTime), Math.round(e.duration)])"
            "  .sort((a, b) => b[2] - a[2]).slice(0, 6);"
            "return {state: document.readyState, now: Math.round(performance.now()),"
            "  response: Math.round(n.responseEnd || 0), dom: Math.round(n.domContentLoadedEventEnd || 0),"
            "  load: Math.round(n.loadEventEnd || 0), resources: r,"
            "  count: performance.getEntriesByType('resource').length};"
        )
        slowest = ", ".join(
            f"{name} at {start} ms took {took} ms" for name, start, took in timing["resources"]
        )
        self.console()
        return (
            f"the page ({timing['state']}, {timing['now']} ms since it was opened): response at"
            f" {timing['response']} ms, DOM ready at {timing['dom']} ms, loaded at {timing['load']} ms;"
            f" {timing['count']} resources, the slowest: {slowest or 'none'};"
            f" loaded again {self.reloads} times for {NETWORK_CHANGED};"
            f" console errors: {self.errors or 'none'}"
        )

    def wait_for_text(self, what: str, found: Callable[[str], Any], timeout: float = 60) -> Any:
        """Until ``found(page text)`` is truthy."""
        return self.wait(what, lambda: found(self.text()), timeout)

    def shot(self, name: str) -> Path:
        """Save the window as ``<shots>/<name>.png``. chromedriver gives the renderer 10 s to draw it; one too
        busy for that (seen on CI, the whole suite on 2 cores beside it) is asked again, SHOT_TRIES times in
        all."""
        from selenium.common.exceptions import TimeoutException

        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{''.join(c if c.isalnum() or c in '-_.' else '_' for c in name)}.png"
        for _ in range(SHOT_TRIES - 1):
            with contextlib.suppress(TimeoutException):
                self.driver.save_screenshot(str(path))
                return path
        self.driver.save_screenshot(str(path))  # the last try: its timeout fails the test
        return path

    def anchors(self, texts: Collection[str]) -> dict[str, Any]:
        """The page's links whose text is one of ``texts``, by text, also those in a shadow root (Airflow
        2's React pages render there)."""
        found = self.driver.execute_script(
            "const found = [];"
            "const visit = root => root.querySelectorAll('*').forEach(e => {"
            "  if (e.tagName === 'A') found.push(e); if (e.shadowRoot) visit(e.shadowRoot); });"
            "visit(document); return found;"
        )
        return {a.text.strip(): a for a in found if a.text.strip() in texts}

    def click_link(self, text: str, timeout: float = 60) -> None:
        """Clicks the page's link ``text`` as the page holds it at the click: the UI redraws what it polls (a
        running task's details), so a link found earlier may be stale by then (seen under a CPU hog, whose
        slower first window left time for a redraw)."""

        def clicked() -> bool:
            anchor = self.anchors([text]).get(text)
            if anchor is None:
                return False
            anchor.click()  # a stale one raises, and ``wait`` looks again
            return True

        self.wait(f"the link {text!r} clicked", clicked, timeout)

    @contextlib.contextmanager
    def new_window(self, opens: Callable[[], None]) -> Iterator[None]:
        """Within: the window (a tab) that ``opens()`` opened, e.g. by clicking a link with a target; then
        it is closed and this one is back."""
        before = set(self.driver.window_handles)
        home = self.driver.current_window_handle
        opens()
        handle = self.wait("a new window", lambda: next(iter(set(self.driver.window_handles) - before), None))
        self.driver.switch_to.window(handle)
        try:
            yield
        finally:
            self.driver.close()
            self.driver.switch_to.window(home)


@contextlib.contextmanager
def chromium(shots: Path = SCREENSHOTS) -> Iterator[Browser]:
    """A started headless Chromium, quit on exit; skips (fails under CI) where it is not installed."""
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        missing = " and ".join(n for n, p in (("chromium", binary), ("chromedriver", driver)) if p is None)
        unavailable("a headless Chromium", f"{missing} not found; as root `make env` installs Debian's")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    # WebGL on the CPU (SwiftShader), as a machine without a GPU has it: TensorBoard draws its charts so
    for argument in (
        "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--use-angle=swiftshader",
        "--enable-unsafe-swiftshader", f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "SEVERE"})  # for Browser.loading's report
    browser = Browser(webdriver.Chrome(options=options, service=Service(driver)), shots)
    try:
        yield browser
    finally:
        browser.driver.quit()
