"""Ctrl-C that no library can swallow: remember every SIGINT and re-raise it between steps.

Inductor's compile step once caught the KeyboardInterrupt of a Ctrl-C (its worker pool died and it
carried on), so `annotate trace` went on to replace the trace and exit 0. Inside :func:`watched`
every SIGINT is recorded before it raises, and ``check()`` raises it again at the next step
boundary, so the run still ends with exit 130 and nothing half-written.
"""
from __future__ import annotations

import contextlib
import signal
from typing import Callable, Iterator


@contextlib.contextmanager
def watched() -> Iterator[Callable[[], None]]:
    """Install a SIGINT handler that records the signal and raises; yield ``check()`` that re-raises it."""
    hits: list[int] = []

    def on_interrupt(signum: int, frame: object) -> None:
        hits.append(signum)
        raise KeyboardInterrupt

    def check() -> None:
        if hits:
            raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, on_interrupt)
    except ValueError:  # not the main thread: signals go elsewhere, nothing to watch
        yield check
        return
    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, previous)
