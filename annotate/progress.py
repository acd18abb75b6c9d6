"""Progress lines for slow steps, on stderr, so stdout stays machine-readable (e.g. --json)."""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator


@dataclass
class Progress:
    """Prints `[step] ...` / `[step] done in 1.2 s` and keeps a time breakdown."""

    quiet: bool = False
    timings: dict[str, float] = field(default_factory=dict)

    def say(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)

    @contextmanager
    def step(self, name: str, what: str = "") -> Iterator[None]:
        self.say(f"[{name}] {what or name}…")
        start = time.perf_counter()
        yield  # on an exception nothing more is printed: the error line says what went wrong
        took = time.perf_counter() - start
        self.timings[name] = self.timings.get(name, 0.0) + took
        self.say(f"[{name}] done in {took:.2f} s")

    def breakdown(self) -> str:
        total = sum(self.timings.values()) or 1.0
        rows = [f"  {k:<12} {v:8.2f} s  {100 * v / total:5.1f} %" for k, v in self.timings.items()]
        return "time breakdown:\n" + "\n".join(rows) + f"\n  {'total':<12} {total:8.2f} s"
