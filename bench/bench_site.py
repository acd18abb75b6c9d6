"""Site benchmark: the build's snapshot, page generator time for the three annotated files, and a full `mkdocs build`.

Prints medians (no assertions). Targets from issue 3: generator < 0.3 s, build < 5 s.
Run: .venv/bin/python bench/bench_site.py [--runs N]

--held (issue 37): strict builds with the generated pages' big HTML held back from Markdown and passed through it,
interleaved in one run; rows to bench/results/site-held.json.

--plots (issue 37): strict builds in one process, interleaved, with the plots drawn before remembered (a
rebuild: what `annotate serve` does after an edit; annotate/pages/base/plots.py `drawn_once`) and forgotten before each
build (every plot drawn again, as before); rows to bench/results/site-plots.json.

--make-site (issue 24): times every `--if-stale` step of `make site` (the Makefile's trace and
experiment commands, each in a fresh process, and whether it imported torch), then `make site` twice
in a row; the first run is a full one when the traces were stale (after a change under
annotate/trace/, every trace and experiment is re-recorded), the second does no trace work. Rows go to
bench/results/site.json ({"rows": [...]}) for the performance page's tables; the ratio no-op / full is printed.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import statistics
import tempfile
import time
from pathlib import Path

from annotate.cli.site import build_site
from annotate.pages.base.snapshot import build_snapshot
from annotate.pages.base import extras
from annotate.pages.source.generate import generate
from annotate.render.katex import Katex

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "site.json"
HELD_RESULTS = ROOT / "bench" / "results" / "site-held.json"
PLOTS_RESULTS = ROOT / "bench" / "results" / "site-plots.json"
_PROBE = ("import sys, time; from annotate.cli import main; rc = main(sys.argv[1:]); "
          "print('torch' in sys.modules); sys.exit(rc)")
THREE = ["nanovllm/layers/layernorm.py", "nanovllm/layers/activation.py", "nanovllm/models/qwen3.py"]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def snapshot_times(runs: int) -> list[float]:
    """The build's facts for the whole project: every vendored file read, parsed and diffed, the notes and
    references resolved, every trace under traces/ loaded, validated and placed (once per build)."""
    return [timed(lambda: build_snapshot(ROOT)) for _ in range(runs)]


def generator_times(runs: int, fresh_katex: bool, panels: bool = False) -> list[float]:
    """Render the three pages from one snapshot; KaTeX cold (new node process) or warm (cached).

    ``panels`` adds the values panels of every trace under traces/.
    """
    katex = Katex(ROOT)
    katex.render("x")  # start node once so "warm" measures rendering, not process start-up
    facts = build_snapshot(ROOT)

    def once() -> None:
        k = Katex(ROOT) if fresh_katex else katex
        providers = extras.providers(facts.traces, facts.files) if panels else ()
        generate(facts, k.render, k.check, providers, only=THREE, prefetch=k.prefetch)
        if fresh_katex:
            k.close()

    return [timed(once) for _ in range(runs)]


def build_times(runs: int) -> list[float]:
    """`annotate build` (mkdocs build --strict with the plugin) into a temp folder, in this process."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            out.append(timed(lambda i=i: build_site(ROOT, Path(tmp) / f"site{i}", strict=True)))
    return out


def stale_steps() -> list[list[str]]:
    """The `--if-stale` commands `make site` runs, read from the Makefile (annotate's arguments)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8").replace("$(TRACE)", "traces/cpu")
    steps = [line.split("$(BIN)/annotate", 1)[1].split() for line in makefile.splitlines()
             if "$(BIN)/annotate trace" in line and "--if-stale" in line]
    names = sorted(p.stem for p in (ROOT / "experiments").glob("*.yml"))
    return steps + [["experiment", name, "--if-stale"] for name in names]


def check_rows() -> list[dict]:
    """Each `--if-stale` step in a fresh process: seconds, whether it was up to date, whether torch was imported."""
    rows = []
    for argv in stale_steps():
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _PROBE, "--root", str(ROOT), *argv], capture_output=True,
                              text=True, cwd=ROOT)
        rows.append({"step": "annotate " + " ".join(argv), "seconds": round(time.perf_counter() - start, 2),
                     "up to date": "up to date" in done.stderr, "torch imported": done.stdout.strip().endswith("True")})
    return rows


def make_site_rows(runs: int) -> list[dict]:
    """`make site` `runs` times in a row: seconds, and how many trace/experiment steps re-recorded."""
    rows = []
    for i in range(runs):
        start = time.perf_counter()
        done = subprocess.run(["make", "site"], capture_output=True, text=True, cwd=ROOT)
        took = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"make site failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
        recorded = len(re.findall(r"\] wrote |; regenerating", done.stdout + done.stderr))
        rows.append({"step": f"make site, run {i + 1}", "seconds": round(took, 1),
                     "up to date": recorded == 0, "re-recorded": recorded})
    return rows


def make_site_main(runs: int) -> None:
    rows = check_rows() + make_site_rows(runs)
    for r in rows:
        print(f"{r['step']:72}{r['seconds']:>9.2f} s  up to date: {r['up to date']}")
    full = [r["seconds"] for r in rows if r["step"].startswith("make site") and not r["up to date"]]
    noop = [r["seconds"] for r in rows if r["step"].startswith("make site") and r["up to date"]]
    if full and noop:
        rows.append({"step": "make site: nothing changed / full", "ratio": round(min(noop) / max(full), 3)})
        print(f"make site with nothing changed / full: {rows[-1]['ratio']}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def held_rows(runs: int) -> list[dict]:
    """Full strict builds of this project in one process, interleaved: the generated pages' big HTML blocks held
    back from Markdown (annotate/render/held.py, as built) and passed through it (as before): whole build and
    Markdown's conversion of every page (`Page.render`), medians and the per-round ratio held / passed."""
    import mkdocs.structure.pages as pages
    import annotate.plugin as plugin
    from annotate.render.held import HeldBlocks, unheld

    rendering = [0.0]
    render = pages.Page.render

    def timed_render(self, config, files):   # Markdown's conversion of one page, timed
        start = time.perf_counter()
        render(self, config, files)
        rendering[0] += time.perf_counter() - start

    held = plugin.set_aside
    passed = lambda markdown, nonce=None: (unheld(markdown), HeldBlocks(nonce or "off"))  # noqa: E731
    out: dict[str, list[tuple[float, float]]] = {"held": [], "passed through": []}
    pages.Page.render = timed_render
    try:
        with tempfile.TemporaryDirectory() as tmp:
            build_site(ROOT, Path(tmp) / "warm", strict=True)   # imports, KaTeX's process, caches
            for i in range(runs):
                for mode, fn in (("held", held), ("passed through", passed)) if i % 2 == 0 else \
                        (("passed through", passed), ("held", held)):
                    plugin.set_aside = fn
                    rendering[0] = 0.0
                    target = Path(tmp) / f"site-{i}-{len(out[mode])}"
                    took = timed(lambda target=target: build_site(ROOT, target, strict=True))
                    out[mode].append((took, rendering[0]))
    finally:
        pages.Page.render, plugin.set_aside = render, held
    rows = []
    for mode, got in out.items():
        rows.append({"step": f"strict build, big blocks {mode}", "seconds": round(statistics.median(b for b, _ in got), 2),
                     "markdown seconds": round(statistics.median(m for _, m in got), 2)})
    ratios = [h[0] / p[0] for h, p in zip(out["held"], out["passed through"])]
    rows.append({"step": "strict build: held / passed through", "ratio": round(statistics.median(ratios), 3)})
    return rows


def plots_rows(runs: int) -> list[dict]:
    """Full strict builds of this project in one process, interleaved: the plots remembered from the build
    before (`plots.drawn_once`) and forgotten before each build; medians and the per-round ratio."""
    from annotate.pages.base import plots

    out: dict[str, list[float]] = {"remembered": [], "drawn again": []}
    with tempfile.TemporaryDirectory() as tmp:
        build_site(ROOT, Path(tmp) / "warm", strict=True)   # imports, KaTeX's process, caches; plots drawn
        for i in range(runs):
            for mode in ("remembered", "drawn again") if i % 2 == 0 else ("drawn again", "remembered"):
                if mode == "drawn again":
                    plots._DRAWN.clear()
                target = Path(tmp) / f"site-{i}-{mode.replace(' ', '-')}"
                out[mode].append(timed(lambda target=target: build_site(ROOT, target, strict=True)))
    rows: list[dict] = [{"step": f"strict build, plots {mode}", "seconds": round(statistics.median(got), 2)}
                        for mode, got in out.items()]
    ratios = [r / d for r, d in zip(out["remembered"], out["drawn again"])]
    rows.append({"step": "strict build: plots remembered / drawn again", "ratio": round(statistics.median(ratios), 3)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--make-site", action="store_true", help="time the --if-stale steps and `make site` (issue 24)")
    parser.add_argument("--held", action="store_true",
                        help="strict builds with the generated HTML held back from Markdown and passed through it")
    parser.add_argument("--plots", action="store_true",
                        help="strict builds with the plots of the build before remembered and drawn again")
    args = parser.parse_args()
    if args.make_site:
        make_site_main(2)
        return
    for asked, rows_of, results in ((args.held, held_rows, HELD_RESULTS), (args.plots, plots_rows, PLOTS_RESULTS)):
        if asked:
            rows = rows_of(args.runs)
            for r in rows:
                print(r)
            results.write_text(json.dumps({"rows": rows}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            return
    snapshots = snapshot_times(args.runs)
    cold = generator_times(args.runs, fresh_katex=True)
    warm = generator_times(args.runs, fresh_katex=False)
    with_panels = generator_times(args.runs, fresh_katex=False, panels=True)
    builds = build_times(args.runs)
    print(f"snapshot, whole project (25 files, notes, traces): median {statistics.median(snapshots):.3f} s"
          "  (once per build; not part of issue 3's generator target)")
    print(f"generator, 3 files, KaTeX cold (new node process): median {statistics.median(cold):.3f} s  (target < 0.3 s)")
    print(f"generator, 3 files, KaTeX warm (formulas cached):  median {statistics.median(warm):.3f} s")
    print(f"generator, 3 files, KaTeX warm, with values panels: median {statistics.median(with_panels):.3f} s"
          f"  ({statistics.median(with_panels) / statistics.median(warm):.2f}x warm)")
    print(f"full build (mkdocs build --strict, all pages):      median {statistics.median(builds):.3f} s  (target < 5 s)")
    print(f"runs: {args.runs}; first build includes imports: {builds[0]:.3f} s")


if __name__ == "__main__":
    main()
