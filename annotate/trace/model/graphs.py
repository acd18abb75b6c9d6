"""How many compiled Inductor graphs have run: torch's own execution record, read as a counter.

Inductor's graph-execution record (see `annotate.trace.model.internals.graph_record`) makes every call of a compiled
Inductor graph (C++ on CPU, Triton on GPU) append an entry to a list. A `torch.compile`d call that
made that count grow ran its compiled graph; one that did not fell back to the Python body.

The recorder uses the count to run compiled calls with the line tracer set aside, which saves the
cost of tracing Dynamo's and Inductor's Python wrappers (~0.6 ms per 4-layer forward on CPU). It
trusts the count only after checking it against the tracer: each compiled function's first call
runs traced, and the count is used for that function only if it grew on a call that the tracer
saw run compiled. Where this torch has no such record, `GraphCounter.available` is False and every
compiled call runs traced.
"""
from __future__ import annotations

from annotate.trace.model.internals import GraphRecord, graph_record


class GraphCounter:
    """Counts compiled-graph runs between `start()` and `stop()`."""

    def __init__(self) -> None:
        self._record: GraphRecord | None = None
        self.trusted: dict[str, bool] = {}   # per compiled function: did the count prove itself?

    @property
    def available(self) -> bool:
        return self._record is not None

    def start(self) -> None:
        """Turn torch's execution record on (if this torch has one)."""
        self.trusted = {}
        self._record = graph_record()

    def stop(self) -> None:
        """Turn it off again (`trusted` stays: it describes the recording that just ended)."""
        if self._record is not None:
            self._record.close()
        self._record = None

    def count(self) -> int:
        """Compiled graphs run since `start()` (0 when unavailable)."""
        return self._record.runs() if self._record is not None else 0
