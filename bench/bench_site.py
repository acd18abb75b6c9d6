"""Site benchmark: page generator time for the three annotated files, and a full `mkdocs build`.

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
from annotate.links import Links
from annotate.pages.generate import generate
from annotate.render.katex import Katex

ROOT = Path(__file__).resolve().parents[1]
THREE = ["nanovllm/layers/layernorm.py", "nanovllm/layers/activation.py", "nanovllm/models/qwen3.py"]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def generator_times(runs: int, fresh_katex: bool) -> list[float]:
    """Load notes, resolve, render the three pages; KaTeX cold (new node process) or warm (cached)."""
    katex = Katex(ROOT)
    katex.render("x")  # start node once so "warm" measures rendering, not process start-up

    def once() -> None:
        k = Katex(ROOT) if fresh_katex else katex
        generate(ROOT, k.render, k.check, only=THREE, links=Links(ROOT), prefetch=k.prefetch)
        if fresh_katex:
            k.close()

    return [timed(once) for _ in range(runs)]


def build_times(runs: int) -> list[float]:
    """`annotate build` (mkdocs build --strict with the plugin) into a temp folder, in this process."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            out.append(timed(lambda: build_site(ROOT, Path(tmp) / f"site{i}", strict=True)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cold = generator_times(args.runs, fresh_katex=True)
    warm = generator_times(args.runs, fresh_katex=False)
    builds = build_times(args.runs)
    print(f"generator, 3 files, KaTeX cold (new node process): median {statistics.median(cold):.3f} s  (target < 0.3 s)")
    print(f"generator, 3 files, KaTeX warm (formulas cached):  median {statistics.median(warm):.3f} s")
    print(f"full build (mkdocs build --strict, all pages):      median {statistics.median(builds):.3f} s  (target < 5 s)")
    print(f"runs: {args.runs}; first build includes imports: {builds[0]:.3f} s")


if __name__ == "__main__":
    main()
