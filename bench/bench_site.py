"""Site benchmark: the build's snapshot, page generator time for the three annotated files, and a full `mkdocs build`.

Prints medians (no assertions). Targets from issue 3: generator < 0.3 s, build < 5 s.
Run: .venv/bin/python bench/bench_site.py [--runs N]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from annotate.cli.site import build_site
from annotate.pages.snapshot import build_snapshot
from annotate.pages import extras
from annotate.pages.generate import generate
from annotate.render.katex import Katex

ROOT = Path(__file__).resolve().parents[1]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
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
