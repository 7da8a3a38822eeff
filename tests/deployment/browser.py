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


class Browser:
    """One headless Chromium window; ``shots`` is where its screenshots go."""

    def __init__(self, driver: Any, shots: Path) -> None:
        self.driver = driver
        self.shots = shots

    def open(self, url: str) -> None:
        self.driver.get(url)

    def text(self) -> str:
        """What the page shows (the body's rendered text)."""
        from selenium.webdriver.common.by import By

        return str(self.driver.find_element(By.TAG_NAME, "body").text)

    def wait(self, what: str, probe: Callable[[], T], timeout: float = 60) -> T:
        """``probe``'s first truthy result; an element that went away or is not there yet (the page
        renders as it loads) counts as "not yet". On timeout a screenshot of what the page showed."""
        from selenium.common.exceptions import WebDriverException

        def looked() -> T | None:
            try:
                return probe()
            except WebDriverException:
                return None

        try:
            return wait_for(what, looked, timeout, 0.5)
        except TimeoutError as exc:
            shot = self.shot(f"timeout-{what[:60]}")
            raise TimeoutError(f"{exc}\nthe page then: {shot}\n{self.text()[-3000:]}") from None

    def wait_for_text(self, what: str, found: Callable[[str], Any], timeout: float = 60) -> Any:
        """Until ``found(page text)`` is truthy."""
        return self.wait(what, lambda: found(self.text()), timeout)

    def shot(self, name: str) -> Path:
        """Save the window as ``<shots>/<name>.png``."""
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{''.join(c if c.isalnum() or c in '-_.' else '_' for c in name)}.png"
        self.driver.save_screenshot(str(path))
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

    def hover(self, element: Any) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        ActionChains(self.driver).move_to_element(element).perform()

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
    browser = Browser(webdriver.Chrome(options=options, service=Service(driver)), shots)
    try:
        yield browser
    finally:
        browser.driver.quit()
