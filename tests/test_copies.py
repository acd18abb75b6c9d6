"""annotate.trace.record.copies: a copy is reused only while its tensor provably has not changed.

Unit tests drive the event rules directly; the integration tests record the real compiled tiny
model twice (copies shared, and every copy fresh) and require every recorded value to be the same
bytes — in bfloat16 and in float32, where nano-vllm's compiled add_rms_forward writes into its
input. A negative control shows that comparison would catch a stale shared copy. (Those tests ask for
the session traces first, so that the traces are the first to compile the tiny model in this process.)
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from annotate.trace.record.copies import CopyCache, clone, reads_only
from annotate.source import parse
from annotate.trace.record.sourcemap import TracedStatement
from conftest import ROOT, _need_vendor


def stmt(effect: str) -> TracedStatement:
    return TracedStatement(parse("x = f(y)\n").statements[0], effect)


@dataclass
class Frame:
    """Stands in for the recorder's per-frame state: only `current` is read."""

    current: TracedStatement | None = None


def test_a_copy_is_reused_across_a_statement_without_calls() -> None:
    c, f, t = CopyCache(), Frame(), torch.arange(4.0)
    c.entered(f, None, False)
    c.line(f, None)
    first = c.take(t)
    f.current = stmt("pure")
    c.line(f, f.current)
    assert c.take(t) is first and (c.taken, c.reused) == (1, 1)


def test_a_call_the_recorder_did_not_see_forgets_every_copy() -> None:
    c, f, t = CopyCache(), Frame(), torch.arange(4.0)
    c.entered(f, None, False)
    c.line(f, None)
    first = c.take(t)
    f.current = stmt("one-call")        # its call went to code nobody recorded
    c.line(f, f.current)
    again = c.take(t)
    assert again is not first and torch.equal(again, first)


def test_a_direct_callee_passes_its_copies_back_to_the_caller() -> None:
    c, caller, callee, t = CopyCache(), Frame(), Frame(), torch.arange(4.0)
    c.entered(caller, None, False)
    c.line(caller, None)
    caller.current = stmt("one-call")
    c.entered(callee, caller, direct=True)
    c.line(callee, None)
    returned = c.take(t)                 # the callee's return value
    c.returned(caller, direct=True)
    c.line(caller, caller.current)       # the caller's statement ends: only its tail ran
    assert c.take(t) is returned


@pytest.mark.parametrize("direct, effect", [(False, "one-call"), (True, "other")])
def test_no_reuse_through_an_indirect_call_or_a_statement_with_more_calls(direct: bool, effect: str) -> None:
    c, caller, callee, t = CopyCache(), Frame(), Frame(), torch.arange(4.0)
    c.entered(caller, None, False)
    c.line(caller, None)
    before = c.take(t)
    caller.current = stmt(effect)
    c.entered(callee, caller, direct=direct)
    assert c.take(t) is not before
    returned = c.take(t)
    c.returned(caller, direct=direct)
    c.line(caller, caller.current)
    assert c.take(t) is not returned


def test_forget_and_a_disabled_cache_never_reuse() -> None:
    c, f, t = CopyCache(), Frame(), torch.arange(4.0)
    c.entered(f, None, False)
    c.line(f, None)
    first = c.take(t)
    c.forget()
    assert c.take(t) is not first
    off = CopyCache(share=False)
    assert off.take(t) is not off.take(t) and off.reused == 0


def test_a_read_only_tensor_method_keeps_the_copies() -> None:
    c, f, t = CopyCache(), Frame(), torch.arange(4.0)
    c.entered(f, None, False)
    c.line(f, None)
    first = c.take(t)
    f.current = stmt("one-call")
    c.line(f, f.current, read_only_call=True)     # e.g. `q = q.view(…)`, checked at its start
    assert c.take(t) is first


def test_reads_only_is_torchs_naming_contract_on_plain_tensors() -> None:
    t = torch.zeros(2)
    assert reads_only(t, "view") and reads_only(t, "split")
    assert not reads_only(t, "add_") and not reads_only(t, "copy_") and not reads_only(t, "add")
    assert not reads_only(torch.nn.Parameter(t), "view")      # a subclass may override it
    assert not reads_only(object(), "view")


def test_a_view_of_a_copied_tensor_is_a_view_of_its_copy() -> None:
    c, f = CopyCache(), Frame()
    qkv = torch.arange(24.0).reshape(4, 6)
    c.entered(f, None, False)
    c.line(f, None)
    copy = c.take(qkv)
    q, k = qkv.split([4, 2], dim=-1)
    kq = c.take(k)
    assert c.derived == 1 and c.taken == 1
    assert torch.equal(kq, k) and kq.untyped_storage().data_ptr() == copy.untyped_storage().data_ptr()
    assert kq.stride() == k.stride()
    assert torch.equal(c.take(q.view(4, 2, 2)), q.view(4, 2, 2)) and c.derived == 2
    other = c.take(qkv.view(torch.int32))                   # another dtype: its own copy
    assert c.taken == 2 and torch.equal(other, qkv.view(torch.int32))
    c.forget()
    c.take(k)
    assert c.taken == 3                                    # after a possible write: copied again


def test_clone_is_a_copy_and_detaches() -> None:
    t = torch.ones(3, requires_grad=True)
    c = clone(t)
    assert not c.requires_grad and c.data_ptr() != t.data_ptr() and torch.equal(c, t.detach())


# ------------------------------------------------------------ on the real compiled model


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.contiguous()
    return t.view(torch.int16) if t.element_size() == 2 else t.view(torch.int32) if t.element_size() == 4 else t


def _record(dtype: str, share: bool, forget: bool = True):
    from annotate.trace.model import runtime
    from annotate.trace.record.recorder import Recorder

    rt = runtime.build_runtime(runtime.TraceOptions(preset="tiny", layers=2, dtype=dtype, root=ROOT))
    try:
        rec = Recorder(rt.model, runtime.import_vendored(ROOT, "cpu"), runtime.vendor_root(ROOT))
        rec.copies.share = share
        if not forget:
            rec.copies.keep_across_writes = True
        with rec.recording():
            runtime.run_prefill(rt)
        rec.uninstall()
        return rec
    finally:
        rt.close()


def _stale(a, b) -> list[tuple[str, int, str]]:
    """(function, line, var) wherever two recordings of the same forward disagree in any bit."""
    assert [(r.function, r.line, [v.name for v in r.vars]) for r in a.records] == \
           [(r.function, r.line, [v.name for v in r.vars]) for r in b.records]
    return [(ra.function, ra.line, va.name) for ra, rb in zip(a.records, b.records)
            for va, vb in zip(ra.vars, rb.vars) if not torch.equal(_bits(va.tensor), _bits(vb.tensor))]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_shared_copies_hold_exactly_what_fresh_copies_hold(dtype: str, tiny_trace, tiny_trace_f32) -> None:
    _need_vendor()
    shared, fresh = _record(dtype, share=True), _record(dtype, share=False)
    assert _stale(shared, fresh) == []
    assert fresh.copies.reused == 0 and shared.copies.reused > 0
    assert shared.copies.taken < fresh.copies.taken


@pytest.mark.slow
def test_a_copy_kept_across_a_compiled_call_would_be_caught(tiny_trace, tiny_trace_f32) -> None:
    """Negative control: if copies were kept across compiled calls (and replays), float32 records
    would show stale values, because the compiled add_rms_forward writes the sum into its input x."""
    _need_vendor()
    stale = _stale(_record("float32", share=True, forget=False), _record("float32", share=False))
    assert stale and any(fn == "RMSNorm.forward" for fn, _, _ in stale), stale
