"""annotate.trace.model.graphs: Inductor's own record of graph runs, read as a counter — and the recorder
catching an eager fallback by it once the count has proved itself against the tracer.

Tests that compile the tiny model in this process ask for the `tiny_trace` session fixture first:
that trace must be the first to compile it, or it would find its kernels already built and report
none as compiled in its run."""
from __future__ import annotations

import pytest
import torch

from annotate.trace.model.graphs import GraphCounter
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


def test_an_eager_fallback_after_the_count_is_trusted_is_an_escape(tiny_trace) -> None:
    """Compiled calls run untraced once the count has proved itself; forcing eager after that
    must still be caught — by the count, since no tracer watches those calls (on 3.12+, where the
    count is never trusted, by the tracer: the same escape either way)."""
    _need_vendor()
    import annotate.trace.record.recorder as recorder_mod
    from annotate.trace.model import runtime
    from annotate.trace.record.recorder import Recorder

    rt = runtime.build_runtime(runtime.TraceOptions(preset="tiny", layers=2, root=ROOT))
    try:
        runtime.run_prefill(rt)            # compile
        rec = Recorder(rt.model, runtime.import_vendored(ROOT, "cpu"), runtime.vendor_root(ROOT))
        with rec.recording():
            runtime.run_prefill(rt)
            assert rec.escapes == {}
            if recorder_mod._SUSPEND:      # Python <= 3.11: the count proved itself for all four
                assert all(rec.graphs.trusted.values()) and len(rec.graphs.trusted) == 4
            else:                          # 3.12+: the count is never judged; the tracer watches every call
                assert rec.graphs.trusted == {}
            with torch.compiler.set_stance("force_eager"):
                runtime.run_prefill(rt)
        rec.uninstall()
    finally:
        rt.close()
    assert rec.escapes.get("RMSNorm.add_rms_forward", 0) > 0 and not rec.ran_compiled()


def test_a_count_that_never_grows_is_not_trusted(monkeypatch: pytest.MonkeyPatch, tiny_trace) -> None:
    """If this torch's record did not see graph runs, the recorder keeps tracing compiled calls
    (and still finds that they ran compiled) instead of calling every call an escape."""
    _need_vendor()
    import annotate.trace.record.recorder as recorder_mod
    from annotate.trace.model import runtime
    from annotate.trace.record.recorder import Recorder

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
    # judged and refused on <= 3.11; on 3.12+ never judged (the tracer stays on regardless)
    assert bool(trusted) == recorder_mod._SUSPEND and not any(trusted.values())
    assert rec.ran_compiled() and rec.escapes == {}


def test_the_312_path_keeps_compiled_calls_traced_and_records_the_same(monkeypatch: pytest.MonkeyPatch,
                                                                        tiny_trace) -> None:
    """From Python 3.12 on (the GPU image), the recorder never sets the tracer aside. Simulated here:
    the records are the same values as with the 3.11 shortcuts, and an eager fallback is still caught
    (by the tracer, since no call runs untraced)."""
    _need_vendor()
    import annotate.trace.record.recorder as recorder_mod
    from annotate.trace.model import runtime
    from annotate.trace.record.recorder import Recorder

    rt = runtime.build_runtime(runtime.TraceOptions(preset="tiny", layers=2, root=ROOT))
    try:
        runtime.run_prefill(rt)
        mods = runtime.import_vendored(ROOT, "cpu")
        runs = {}
        for suspend in (True, False):
            monkeypatch.setattr(recorder_mod, "_SUSPEND", suspend)
            rec = Recorder(rt.model, mods, runtime.vendor_root(ROOT))
            with rec.recording():
                runtime.run_prefill(rt)
            rec.uninstall()
            runs[suspend] = rec
        eager = Recorder(rt.model, mods, runtime.vendor_root(ROOT))
        with torch.compiler.set_stance("force_eager"), eager.recording():
            runtime.run_prefill(rt)                      # still the simulated 3.12 path
        eager.uninstall()
    finally:
        rt.close()
    a, b = runs[True].records, runs[False].records
    assert [(r.function, r.line, r.layer) for r in a] == [(r.function, r.line, r.layer) for r in b]
    assert all(torch.equal(x.tensor, y.tensor) for ra, rb in zip(a, b) for x, y in zip(ra.vars, rb.vars))
    assert runs[False].ran_compiled() and not any(runs[False].graph_count_trusted().values())
    assert eager.escapes.get("RMSNorm.rms_forward", 0) > 0
