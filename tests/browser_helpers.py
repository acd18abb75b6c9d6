"""What every browser test shares: Debian's Chromium, its flags, viewports, and a recorded visit."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

CHROMIUM = "/usr/bin/chromium"
# tools that download their own browser fail here; these flags keep Chromium off the network
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


class Visit:
    """A page of a built site opened from disk (file://), recording every request it makes."""

    def __init__(self, browser, site: Path, viewport: dict, scheme: str = "light", clipboard: bool = False) -> None:
        """In a browser context of its own: viewport, colour scheme, clipboard permissions when asked."""
        self.site = site
        self.context = browser.new_context(viewport=viewport, color_scheme=scheme,
                                           permissions=["clipboard-read", "clipboard-write"] if clipboard else [])
        self.page = self.context.new_page()
        self.requests: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))

    def close(self) -> None:
        self.context.close()

    def open(self, path: str, anchor: str = "") -> None:
        self.page.goto((self.site / path).as_uri() + anchor)
        self.page.wait_for_load_state("load")

    def non_local(self) -> list[str]:
        """Requests to anything but the local disk or in-page data."""
        return [u for u in self.requests if not u.startswith(("file://", "data:", "blob:"))]

    def in_viewport(self, selector: str) -> bool:
        return self.page.eval_on_selector(selector, """el => { const r = el.getBoundingClientRect();
            return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0; }""")

    def shot(self, artifacts: Path, name: str) -> None:
        self.page.screenshot(path=str(artifacts / f"{name}.png"))


@contextlib.contextmanager
def visiting(browser, site: Path, viewport: dict, scheme: str = "light", clipboard: bool = False) -> Iterator[Visit]:
    """A :class:`Visit`, closed after the block."""
    v = Visit(browser, site, viewport, scheme, clipboard)
    try:
        yield v
    finally:
        v.close()
