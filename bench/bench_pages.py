"""Page-weight benchmark: what a first visit loads, and a source page with 4- and 28-layer traces.

Default: builds the project's site (strict) into a temp folder and opens, in Debian's headless
Chromium, qwen3.py's page, the lesson and the map, each in a fresh context, from file:// and from a
local http server, counting every response's body (decoded bytes) until `load` and 8 s after it, by kind
(html, script, style, font, image, search index, values). The same pages are measured on a copy of the site
whose Material bundle and search index are put back as Material ships them (the index loaded on
every page, two copies): the ratio is what loading the index on first use saves. Writes
bench/results/pages.json ({"rows": [...]}) for the performance page's tables (python -m annotate.bench_table).
No assertions (the 900 KB bound is a test: tests/test_offline.py).

--depth: the older comparison. Records two traces of the qwen3-0.6b shape with random weights (4 and
28 decoder layers, 8 tokens), builds the site of a scratch copy of the project with each, and reports
for `qwen3.py`: HTML bytes, the values script's bytes (loaded only when a panel opens), DOM nodes, the
time to `load` and to open the L156 panel at the last layer; medians of shuffled rounds, ratios 28/4.

Run: .venv/bin/python bench/bench_pages.py [--site DIR] [--depth [--rounds N] [--layers 4 28]]
"""
from __future__ import annotations

import argparse
import json
import shutil
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from browser_helpers import ARGS, CHROMIUM, Loaded, first_open, serving  # noqa: E402  (the suite's Chromium)
from site_fixtures import copy_project  # noqa: E402

from annotate.cli.site import build_site  # noqa: E402
from annotate.render.offline import SEARCH_SCRIPT_PREFIX  # noqa: E402

PAGE = "source/nanovllm/models/qwen3.py.html"
SCRIPT = "source/nanovllm/models/qwen3.py.values-cpu.js"
FIRST_OPEN = {"qwen3.py": PAGE, "lesson": "lesson.html", "map": "map.html"}
RESULTS = ROOT / "bench" / "results" / "pages.json"
KINDS = (("html", (".html",)), ("script", (".js",)), ("style", (".css",)), ("font", (".woff2", ".woff", ".ttf")),
         ("image", (".png", ".svg", ".ico")))


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


def kind(url: str) -> str:
    """What a loaded URL is: the search index, a values script, else by its suffix (KINDS), else "other"."""
    name = url.split("?")[0].split("#")[0].rsplit("/", 1)[-1]
    if "search_index" in name:
        return "search_index"
    if ".values-" in name:
        return "values"
    return next((k for k, suffixes in KINDS if name.endswith(suffixes)), "other")


def as_material_ships(site: Path, dest: Path) -> Path:
    """A copy of `site` with Material's own bundle and both copies of the index: the eager baseline."""
    import material

    shutil.copytree(site, dest)
    shipped = Path(material.__file__).parent / "templates" / "assets" / "javascripts"
    for bundle in (dest / "assets" / "javascripts").glob("bundle.*.min.js"):
        shutil.copy2(shipped / bundle.name, bundle)
    script = dest / "search" / "search_index.js"
    script.with_suffix(".json").write_text(script.read_text(encoding="utf-8")[len(SEARCH_SCRIPT_PREFIX):], encoding="utf-8")
    return dest


def weight_row(name: str, scheme: str, variant: str, loaded: list[Loaded]) -> dict:
    """One flat record: a page's first open, its bytes in all and by kind."""
    row: dict = {"page": name, "from": scheme, "search index": variant, "requests": len(loaded),
                 "bytes": sum(r.size for r in loaded)}
    for k in ["search_index", "values"] + [k for k, _ in KINDS] + ["other"]:
        row[k] = sum(r.size for r in loaded if kind(r.url) == k)
    return row


def first_open_rows(site: Path, eager: Path) -> list[dict]:
    """Every page of FIRST_OPEN, from disk and over http, lazy and as Material ships it."""
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as p, serving(site) as lazy_base, serving(eager) as eager_base:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for variant, folder, base in (("on first use", site, lazy_base), ("every page (Material)", eager, eager_base)):
            for name, path in FIRST_OPEN.items():
                rows.append(weight_row(name, "file://", variant, first_open(browser, (folder / path).as_uri())))
                rows.append(weight_row(name, "http", variant, first_open(browser, base + path)))
        browser.close()
    return rows


def first_open_main(site_arg: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="annotate-bench-pages-") as tmp:
        site = site_arg
        if site is None:
            site = Path(tmp) / "site"
            build_site(ROOT, site, strict=True)
        rows = first_open_rows(site, as_material_ships(site, Path(tmp) / "eager"))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"first open (decoded bytes of every response until `load` + SETTLE_MS) -> {RESULTS.relative_to(ROOT)}")
    print(f"{'page':10}{'from':9}{'search index':24}{'requests':>9}{'bytes':>11}{'index':>11}")
    for r in rows:
        print(f"{r['page']:10}{r['from']:9}{r['search index']:24}{r['requests']:>9}{r['bytes']:>11,}{r['search_index']:>11,}")
    for name in FIRST_OPEN:
        for scheme in ("file://", "http"):
            lazy, eager = (next(r["bytes"] for r in rows if r["page"] == name and r["from"] == scheme
                                and r["search index"] == v) for v in ("on first use", "every page (Material)"))
            print(f"{name} from {scheme}: {lazy / eager:.2f} of Material's eager load")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, help="a built site to measure (default: build one into a temp folder)")
    parser.add_argument("--depth", action="store_true", help="the 4- vs 28-layer comparison instead (records two traces)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--layers", type=int, nargs=2, default=[4, 28])
    parser.add_argument("--tokens", type=int, default=8)
    args = parser.parse_args()
    if args.depth:
        depth_main(args)
    else:
        first_open_main(args.site)


def depth_main(args: argparse.Namespace) -> None:
    """The 4- vs 28-layer comparison (see the module's docstring)."""
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
