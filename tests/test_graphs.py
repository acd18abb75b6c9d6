"""annotate.trace.graphs: Inductor's own record of graph runs, read as a counter — and the recorder
catching an eager fallback by it once the count has proved itself against the tracer."""
from __future__ import annotations

import pytest
import torch

from annotate.trace.graphs import GraphCounter
from conftest import ROOT, _need_vendor

pytestmark = pytest.mark.slow


def test_counts_each_run_of_a_compiled_graph_and_nothing_eager() -> None:
    f = torch.compile(lambda x: x * 2 + 1)
    x = torch.arange(6.0)
    f(x)                                   # compile outside the count
    g = GraphCounter()
    g.start()
    try:
        assert g.available and g.count() == 0
        f(x)
        f(x)
        assert g.count() == 2
        with torch.compiler.set_stance("force_eager"):
            f(x)                           # the Python body: no graph runs
        assert g.count() == 2
    finally:
        g.stop()
    assert g.count() == 0 and not g.available


def test_an_eager_fallback_after_the_count_is_trusted_is_an_escape() -> None:
    """Compiled calls run untraced once the count has proved itself; forcing eager after that
    must still be caught — by the count, since no tracer watches those calls."""
    _need_vendor()
    from annotate.trace import runtime
    from annotate.trace.recorder import Recorder

    rt = runtime.build_runtime(runtime.TraceOptions(preset="tiny", layers=2, root=ROOT))
    try:
        runtime.run_prefill(rt)            # compile
        rec = Recorder(rt.model, runtime.import_vendored(ROOT, "cpu"), runtime.vendor_root(ROOT))
        with rec.recording():
            runtime.run_prefill(rt)
            assert rec.escapes == {} and all(rec.graphs.trusted.values()) and len(rec.graphs.trusted) == 4
            with torch.compiler.set_stance("force_eager"):
                runtime.run_prefill(rt)
        rec.uninstall()
    finally:
        rt.close()
    assert rec.escapes.get("RMSNorm.add_rms_forward", 0) > 0 and not rec.ran_compiled()


def test_a_count_that_never_grows_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """If this torch's record did not see graph runs, the recorder keeps tracing compiled calls
    (and still finds that they ran compiled) instead of calling every call an escape."""
    _need_vendor()
    from annotate.trace import runtime
    from annotate.trace.recorder import Recorder

    monkeypatch.setattr(GraphCounter, "count", lambda self: 0)
    rt = runtime.build_runtime(runtime.TraceOptions(preset="tiny", layers=2, root=ROOT))
    try:
        runtime.run_prefill(rt)
        rec = Recorder(rt.model, runtime.import_vendored(ROOT, "cpu"), runtime.vendor_root(ROOT))
        with rec.recording():
            runtime.run_prefill(rt)
            trusted = dict(rec.graphs.trusted)
        rec.uninstall()
    finally:
        rt.close()
    assert trusted and not any(trusted.values())
    assert rec.ran_compiled() and rec.escapes == {}
