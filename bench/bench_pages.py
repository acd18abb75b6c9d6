"""Page-weight benchmark: a source page with 4-layer and 28-layer traces, side by side, in one run.

Records two traces of the qwen3-0.6b shape with random weights (4 and 28 decoder layers, 8 tokens:
the same code, only deeper; 28 is the real model's depth), builds the site
of a scratch copy of the project with each, and reports for `qwen3.py`: the HTML bytes, the bytes of
its values script (loaded only when a panel opens), DOM nodes, and in Debian's headless Chromium
(from file://) the time to the `load` event and the time to open the L156 panel at the last layer.
Medians of shuffled rounds; prints ratios 28/4. No assertions (the 400 KB bound is a test:
tests/test_browser_reader.py).

Run: .venv/bin/python bench/bench_pages.py [--rounds N] [--layers 4 28]
"""
from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from browser_helpers import ARGS, CHROMIUM  # noqa: E402  (the suite's Chromium and flags)
from site_fixtures import copy_project  # noqa: E402

from annotate.cli.site import build_site  # noqa: E402

PAGE = "source/nanovllm/models/qwen3.py.html"
SCRIPT = "source/nanovllm/models/qwen3.py.values-cpu.js"


def traced_site(tmp: Path, layers: int, tokens: int) -> Path:
    """A scratch project whose only trace is a `layers`-deep qwen3-0.6b-shaped run, built (strict)."""
    project = copy_project(tmp / f"project-{layers}")
    out = project / "traces" / "cpu"
    subprocess.run([str(ROOT / ".venv" / "bin" / "annotate"), "trace", "--layers", str(layers),
                    "--tokens", str(tokens), "--out", str(out), "--quiet"], cwd=project, check=True)
    build_site(project, project / "site", strict=True)
    return project / "site"


def browser_times(browser, site: Path, layer: int) -> tuple[float, float, int]:
    """(seconds to `load`, seconds to the L156 panel filled at `layer`, DOM nodes) in a fresh context."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    start = time.perf_counter()
    page.goto((site / PAGE).as_uri())
    page.wait_for_load_state("load")
    loaded = time.perf_counter() - start
    nodes = page.evaluate("document.getElementsByTagName('*').length")
    start = time.perf_counter()
    page.evaluate(f"location.hash = '#L156&layer={layer}'")
    page.wait_for_selector(f"#values-L156[open][data-shown='cpu/{layer}']")
    panel = time.perf_counter() - start
    context.close()
    return loaded, panel, nodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--layers", type=int, nargs=2, default=[4, 28])
    parser.add_argument("--tokens", type=int, default=8)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="annotate-bench-pages-") as tmp:
        sites = {n: traced_site(Path(tmp), n, args.tokens) for n in args.layers}
        rows = {n: {"html": (s / PAGE).stat().st_size, "script": (s / SCRIPT).stat().st_size} for n, s in sites.items()}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            times: dict[int, list[tuple[float, float, int]]] = {n: [] for n in args.layers}
            order = [n for n in args.layers for _ in range(args.rounds)]
            random.shuffle(order)
            for n in args.layers:               # warm-up, not counted
                browser_times(browser, sites[n], n - 1)
            for n in order:
                times[n].append(browser_times(browser, sites[n], n - 1))
            browser.close()
        for n in args.layers:
            rows[n]["load"] = statistics.median(t[0] for t in times[n])
            rows[n]["panel"] = statistics.median(t[1] for t in times[n])
            rows[n]["nodes"] = times[n][0][2]
    a, b = args.layers
    print(f"qwen3.py page, qwen3-0.6b shape, {args.tokens} tokens, {args.rounds} shuffled rounds (medians)")
    print(f"{'':28}{a:>10} layers{b:>10} layers{'ratio':>10}")
    for key, label, fmt in (("html", "HTML bytes", "{:>17,}"), ("script", "values script bytes", "{:>17,}"),
                            ("nodes", "DOM nodes at load", "{:>17,}"), ("load", "load event (s)", "{:>17.3f}"),
                            ("panel", "open L156 panel (s)", "{:>17.3f}")):
        print(f"{label:28}" + fmt.format(rows[a][key]) + fmt.format(rows[b][key]) + f"{rows[b][key] / rows[a][key]:>10.2f}")


if __name__ == "__main__":
    main()
