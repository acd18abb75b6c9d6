"""What every browser test shares: Debian's Chromium, its flags, viewports, and a recorded visit."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
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


#: how long a first visit is watched after `load`
SETTLE_MS = 8000


@dataclass(frozen=True)
class Loaded:
    """One response a page received while it opened: its URL and its body's bytes (decoded)."""

    url: str
    size: int


def first_open(browser, url: str, viewport: dict = DESKTOP) -> list[Loaded]:
    """Every response a fresh context receives opening `url` (file:// or http://) until `load` and
    SETTLE_MS after it: what a first visit costs, each body counted as decoded bytes."""
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    responses: list = []
    page.on("response", lambda response: responses.append(response))
    page.goto(url, timeout=120_000)                # a loaded shared machine is slow
    page.wait_for_load_state("load", timeout=120_000)
    page.wait_for_timeout(SETTLE_MS)               # what scripts start right after `load` (the search worker)
    loaded = [Loaded(r.url, len(r.body())) for r in responses if not r.url.startswith("data:")]
    context.close()
    return loaded


@contextlib.contextmanager
def serving(folder: Path) -> Iterator[str]:
    """`folder` on a local http server (a thread, a free port) for the block; yields its base URL."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:   # no request lines in the test output
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
