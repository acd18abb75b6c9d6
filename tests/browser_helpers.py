"""What every browser test shares: Debian's Chromium, its flags, viewports, and a recorded visit."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

CHROMIUM = "/usr/bin/chromium"
# tools that download their own browser fail here; these flags keep Chromium off the network
#: the flags the developers' guide gives, and one process per renderer rather than per site: the pages are
#: file:// with no frames of other origins, and without site isolation a tour of sixty pages took ~9 % less CPU
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-features=site-per-process"]
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


# Whether the page's own font stack draws Chinese with a real CJK font: two different characters drawn
# pixel for pixel alike are both the "missing glyph" box (a machine without fonts-noto-cjk), and a real
# CJK glyph is full width (about 1 em). Layout measured with boxes of another width would be a page no
# reader sees.
CJK_FONT_JS = """() => {
  const family = getComputedStyle(document.body).fontFamily, size = 40;
  const canvas = document.createElement('canvas'); canvas.width = canvas.height = 64;
  const g = canvas.getContext('2d');
  const draw = ch => { g.clearRect(0, 0, 64, 64); g.font = size + 'px ' + family; g.textBaseline = 'top';
    g.fillText(ch, 4, 4); return [g.measureText(ch).width / size, g.getImageData(0, 0, 64, 64).data.join()]; };
  const [zhong, a] = draw('中'), [guo, b] = draw('国');
  return {family, em: [zhong, guo], distinct: a !== b};
}"""


def assert_cjk_font(page) -> None:
    """Fail unless Chinese text on ``page`` is drawn with a real CJK font (run `make browser`)."""
    found = page.evaluate(CJK_FONT_JS)
    ok = found["distinct"] and all(0.85 <= w <= 1.15 for w in found["em"])
    assert ok, f"no CJK font draws Chinese here ({found}): run `make browser` (installs fonts-noto-cjk)"


# WCAG contrast of a text element against what is painted behind it (alpha layers composited)
CONTRAST_JS = """el => {
  const rgba = s => { const m = s.match(/[\\d.]+/g).map(Number); return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1]; };
  const over = (top, bottom) => [0, 1, 2].map(i => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
  const layers = [];
  for (let e = el; e; e = e.parentElement) {
    const c = rgba(getComputedStyle(e).backgroundColor);
    if (c[3] > 0) layers.push(c);
    if (c[3] >= 1) break;
  }
  let bg = [255, 255, 255, 1];
  for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
  const fg = over(rgba(getComputedStyle(el).color), bg);
  const lum = c => { const v = c.slice(0, 3).map(x => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
                     return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  const a = lum(fg), b = lum(bg);
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""

# Every visible element of the article that holds text of its own, with its WCAG contrast and whether
# it is code (a token of a source line or code block) or a ≡ identity (both need 7:1), else 4.5:1.
CONTRAST_SWEEP_JS = """() => {
  const contrast = """ + CONTRAST_JS + """;
  const root = document.querySelector('article') || document.body, out = [];
  for (const el of root.querySelectorAll('*')) {
    if (el.closest('.katex-mathml, svg, [aria-hidden="true"]') || !el.getClientRects().length) continue;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const st = getComputedStyle(el);
    if (st.visibility === 'hidden' || +st.opacity === 0) continue;
    const code = !!el.closest('.an-code, pre code, .an-id');
    const cls = typeof el.className === 'string' && el.className.trim() ? '.' + el.className.trim().split(/\\s+/).join('.') : '';
    out.push({what: el.tagName.toLowerCase() + cls,
              text: el.textContent.trim().slice(0, 30), ratio: Math.round(contrast(el) * 100) / 100, need: code ? 7 : 4.5});
  }
  return out;
}"""
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
