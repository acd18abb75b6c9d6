"""annotate.trace.format.store: format, validation, atomic write, query API; provenance facts."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from annotate import atomic
from annotate.errors import UserError
from annotate.trace.format import provenance, store
from annotate.vendoring.sources import sha256_file
from annotate.vendoring.lock import LOCK_NAME, Lock, Source, Upstream, write_lock


def _payload() -> dict:
    var = {"name": "residual", "role": "assigned", "shape": [2, 4], "dtype": "bfloat16", "norm": 1.0, "mean": 0.0,
           "absmax": 1.0, "head": [0.5], "tensor": None, "identity": {"status": "match", "matches": [
               {"key": "x1", "layer": 0, "label": "x₁⁽0⁾", "latex": "x_1^{(0)}", "max_abs": 0.0, "max_ulps": 0,
                "scale_ulps": 0.0, "rel": 0.0, "dtype": "bfloat16"}]}, "aliases": [], "same_memory": []}
    rec = {"id": 0, "function": "Qwen3DecoderLayer.forward", "file": "nanovllm/models/qwen3.py", "line": 156,
           "end_line": 156, "kind": "line", "source": "traced", "layer": 0, "module": "model.layers.0", "call": 0,
           "hit": 0, "order": 0, "text": "hidden_states, residual = …", "vars": [var], "aliases": []}
    meta = {"device": "cpu", "device_name": "CPU", "dtype": "bfloat16", "model": {"name": "tiny", "layers": 1},
            "input": {"tokens": 2}, "versions": {"torch": "2.13.0"}, "attention": "sdpa-shim", "created": "2026-01-01T00:00:00",
            "inputs_key": {"a": 1}}
    return {"meta": meta, "vendor": {}, "records": [rec], "math": []}


def test_round_trip_and_queries(tmp_path: Path) -> None:
    out = store.write_trace(tmp_path / "t", _payload(), None, force=False)
    t = store.load_trace(out)
    assert t.files() == ["nanovllm/models/qwen3.py"] and t.lines("nanovllm/models/qwen3.py") == [156]
    v = t.at("nanovllm/models/qwen3.py", 156, layer=0)[0].var("residual")
    assert v.matched["key"] == "x1" and v.label == "x₁⁽0⁾"
    assert t.at("nanovllm/models/qwen3.py", 156, layer=1) == [] and {r.layer for r in t.at("nanovllm/models/qwen3.py", 156)} == {0}
    assert "sdpa-shim" in t.provenance() and t.layers() == [0]
    assert store.load_trace(out / "trace.json").records[0].line == 156
    with pytest.raises(KeyError):
        t.tensor("r0/residual")
    assert store.find_traces(tmp_path) == [] and not list(tmp_path.glob("*.tmp*"))


def test_existing_out_needs_force_and_is_replaced_whole(tmp_path: Path) -> None:
    out = store.write_trace(tmp_path / "t", _payload(), None, force=False)
    (out / "stale.txt").write_text("old")
    with pytest.raises(UserError, match="already exists; pass --force"):
        store.write_trace(out, _payload(), None, force=False)
    store.write_trace(out, _payload(), None, force=True)
    assert not (out / "stale.txt").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_refuses_to_replace_something_that_is_not_a_trace(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("x")
    with pytest.raises(UserError, match="not a trace directory"):
        store.write_trace(tmp_path / "docs", _payload(), None, force=True)


def test_unwritable_out(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match="cannot write"):
        store.check_out(tmp_path / "file" / "trace", force=False)


@pytest.mark.parametrize("content, needle", [
    ('{"format": "annotate-trace", "version": 1, "meta"', "invalid JSON"),
    ('{"format": "annotate-trace", "version": 99}', "version 99"),
    ('{"format": "something-else", "version": 1}', "not an annotate trace"),
    ('{"format": "annotate-trace", "version": 1, "meta": {}}', "incomplete trace"),
])
def test_bad_files_give_one_line_errors(tmp_path: Path, content: str, needle: str) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "trace.json").write_text(content)
    with pytest.raises(UserError, match=needle) as exc:
        store.load_trace(tmp_path / "t")
    assert "\n" not in str(exc.value)
    with pytest.raises(UserError, match="no trace here"):
        store.load_trace(tmp_path / "missing")


def test_staleness_compares_the_inputs_key(tmp_path: Path) -> None:
    out = store.write_trace(tmp_path / "t", _payload(), None, force=False)
    assert store.payload_matches(out, {"a": 1}) is None
    assert "made with other inputs (a)" in store.payload_matches(out, {"a": 2})


def test_vendor_facts_with_and_without_lock(tmp_path: Path) -> None:
    f = tmp_path / "vendor" / "nano-vllm" / "nanovllm" / "x.py"
    f.parent.mkdir(parents=True)
    f.write_text("a = 1\n")
    facts = provenance.vendor_facts(tmp_path)
    assert facts["lock"] is None and facts["files"] == {"nanovllm/x.py": sha256_file(f)}
    lock = Lock(Upstream("https://example.org/r", "c" * 40, "", "", {}),
                Source("wheel", "w", "1", "a" * 64, files={"nanovllm/x.py": "0" * 64}))
    write_lock(tmp_path / LOCK_NAME, lock)
    facts = provenance.vendor_facts(tmp_path)
    assert facts["upstream"]["commit"] == "c" * 40 and facts["mismatched"] == ["nanovllm/x.py"]
    assert facts["lock"] == LOCK_NAME and facts["source"] == {"kind": "wheel", "name": "w", "version": "1", "sha256": "a" * 64}
    (tmp_path / LOCK_NAME).write_text('{"upstream"')
    facts = provenance.vendor_facts(tmp_path)
    assert facts["lock"].startswith("unreadable: ") and facts["upstream"] is None


@pytest.mark.slow
def test_real_trace_metadata(tiny_trace) -> None:
    t = tiny_trace.trace
    m = t.meta
    assert m["versions"]["torch"] and m["versions"]["transformers"].startswith("4.")
    assert m["dtype"] == "bfloat16" and m["model"]["name"] == "tiny" and m["seed"] == 0
    assert m["attention"].startswith("sdpa-shim") and m["compiled"]["ran_compiled"]
    assert set(m["timings"]) >= {"build", "compile", "record", "reference", "identify"}
    assert t.vendor["files"]["nanovllm/models/qwen3.py"] == sha256_file(
        Path(__file__).resolve().parents[1] / "vendor" / "nano-vllm" / "nanovllm" / "models" / "qwen3.py")
    assert m["tensors_saved"] and (t.path / "tensors.safetensors").is_file()


def test_vendor_mismatch_names_changed_files(tmp_path: Path) -> None:
    f = tmp_path / "vendor" / "nano-vllm" / "nanovllm" / "x.py"
    f.parent.mkdir(parents=True)
    f.write_text("a = 1\n")
    payload = _payload()
    payload["vendor"] = provenance.vendor_facts(tmp_path)
    t = store.load_trace(store.write_trace(tmp_path / "t", payload, None, force=False))
    assert t.vendor_mismatch(tmp_path) == []
    f.write_text("a = 2\n")
    assert t.vendor_mismatch(tmp_path) == ["nanovllm/x.py"]


def test_find_traces_skips_leftover_staging_folders(tmp_path: Path) -> None:
    """A killed `annotate trace` leaves hidden staging / swap-aside folders (or, before, `<name>.tmp-<pid>`)."""
    good = store.write_trace(tmp_path / "traces" / "cpu", _payload(), None, force=False)
    staged = tmp_path / "traces" / ".cpu.tmp-1"
    staged.mkdir()
    (staged / "trace.json").write_text('{"format": "annotate-trace", "version": 1, "meta"')   # truncated
    shutil.copytree(good, tmp_path / "traces" / ".cpu.old-2")
    shutil.copytree(good, tmp_path / "traces" / "cpu.tmp-12345")
    assert store.find_traces(tmp_path) == [good]
    assert [t.path for t in map(store.load_trace, store.find_traces(tmp_path))] == [good]


def test_write_trace_stages_in_a_hidden_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    real = atomic.swap_dir

    def spy(staged: Path, target: Path, then=None) -> None:
        seen.append((staged.name, staged.parent, sorted(p.name for p in staged.iterdir())))
        real(staged, target, then)

    monkeypatch.setattr(atomic, "swap_dir", spy)
    out = store.write_trace(tmp_path / "t", _payload(), None, force=False)
    assert seen and seen[0][0].startswith(".t.new-") and seen[0][1] == tmp_path and seen[0][2] == ["trace.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"] and (out.stat().st_mode & 0o777) == 0o755


def test_a_failed_swap_keeps_the_previous_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = store.write_trace(tmp_path / "t", _payload(), None, force=False)
    before = (out / "trace.json").read_bytes()
    real = os.replace

    def fail_putting_the_new_one_in(src, dst) -> None:
        if Path(src).name.startswith(".t.new-"):       # the old trace was already moved aside
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", fail_putting_the_new_one_in)
    new = _payload()
    new["meta"]["inputs_key"] = {"a": 2}
    with pytest.raises(OSError, match="No space left"):
        store.write_trace(out, new, None, force=True)
    monkeypatch.undo()
    assert (out / "trace.json").read_bytes() == before and store.payload_matches(out, {"a": 1}) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_a_failed_write_keeps_the_previous_trace(tmp_path: Path) -> None:
    out = store.write_trace(tmp_path / "t", _payload(), None, force=False)
    before = (out / "trace.json").read_bytes()
    bad = _payload()
    bad["meta"]["not_json"] = object()
    with pytest.raises(TypeError):
        store.write_trace(out, bad, None, force=True)
    assert (out / "trace.json").read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["t"]
