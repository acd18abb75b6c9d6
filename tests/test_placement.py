"""annotate.trace.format.placement: a trace recorded at another pin, placed on today's vendored lines.

The fixture is built here from the committed mini trace (real recorded values; no source text): it
becomes a format-2 GPU trace "recorded at" another upstream commit whose qwen3.py had two more
lines at the top and one statement that has changed since. Nothing in it is upstream text.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from annotate.pages.base.trace_set import load_traces
from annotate.trace.format import placement
from annotate.trace.format.store import VERSION, load_trace
from annotate.vendoring.linemap import match_lines
from annotate.vendoring.lock import VENDOR_DIR, line_hashes
from conftest import ROOT, _need_vendor
from values_fixtures import MINI

QWEN3 = "nanovllm/models/qwen3.py"
OTHER_PIN = "0123456789abcdef0123456789abcdef01234567"
SHIFT = 2            # the older qwen3.py had two more lines above everything
CHANGED = 156        # today's line whose statement differs from the recorded one


def _strip_text(payload: dict) -> None:
    for r in payload["records"]:
        r.pop("text", None)
    for f in payload["functions"]:
        for st in f["statements"]:
            st.pop("text", None)
    for row in payload["summary"].get("flow", []):
        row.pop("text", None)


def other_pin_trace(dest: Path, device: str = "cuda") -> Path:
    """A format-2 trace of `device` recorded at OTHER_PIN, where qwen3.py was SHIFT lines longer on top."""
    payload = json.loads((MINI / "bf16" / "trace.json").read_text(encoding="utf-8"))
    _strip_text(payload)
    vendor = ROOT / VENDOR_DIR
    hashes = {rel: line_hashes((vendor / rel).read_bytes()) for rel in payload["vendor"]["files"] if rel.endswith(".py")}
    old = hashes[QWEN3]
    old[CHANGED - 1] = "f" * 16                                     # that statement read differently then
    hashes[QWEN3] = ["a" * 16, "b" * 16] + old                      # two lines that are gone today
    payload["vendor"].update(line_hashes=hashes, upstream=dict(payload["vendor"]["upstream"], commit=OTHER_PIN))
    payload["vendor"]["files"][QWEN3] = "0" * 64                     # other bytes
    for r in payload["records"]:
        if r["file"] == QWEN3:
            r["line"] += SHIFT
            r["end_line"] += SHIFT
    for f in payload["functions"]:
        if f["file"] == QWEN3:
            f["def_line"] += SHIFT
            for st in f["statements"]:
                st["line"] += SHIFT
                st["end_line"] += SHIFT
    for row in payload["summary"].get("flow", []):
        if row["file"] == QWEN3:
            row["line"] += SHIFT
    payload["version"] = VERSION
    payload["meta"].update(device=device, device_name="NVIDIA H200" if device == "cuda" else payload["meta"]["device_name"])
    dest.mkdir(parents=True)
    (dest / "trace.json").write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
    return dest


def test_line_map_follows_inserted_and_changed_lines() -> None:
    then, now = ["a", "b", "x", "y", "z"], ["x", "Y", "z"]
    assert match_lines(then, now) == {3: 1, 5: 3}
    assert match_lines(now, now) == {1: 1, 2: 2, 3: 3}


def test_a_trace_from_another_pin_is_placed_on_todays_lines(tmp_path: Path) -> None:
    _need_vendor()
    today = load_trace(MINI / "bf16", ROOT)
    moved = load_trace(other_pin_trace(tmp_path / "cuda"), ROOT)
    lines_today = set(today.lines(QWEN3))
    assert CHANGED in lines_today
    assert set(moved.lines(QWEN3)) == lines_today - {CHANGED}       # placed back, the changed line left off
    assert moved.placement.gone() == {QWEN3: [CHANGED + SHIFT]}
    assert sorted(f for f, p in moved.placement.files.items() if p.moved) == [QWEN3]
    gone = [r for r in moved.records if not r.placed]
    assert gone and all(r.recorded_line == CHANGED + SHIFT and r.text == "" for r in gone)
    vendored = (ROOT / VENDOR_DIR / QWEN3).read_text(encoding="utf-8").splitlines()
    for r in moved.at(QWEN3, 155):
        assert r.recorded_line == 155 + SHIFT and r.text == placement.statement_text(vendored, 155, r.end_line)
        twin = next(t for t in today.at(QWEN3, 155) if t.id == r.id)
        assert [v.norm for v in r.vars] == [v.norm for v in twin.vars]   # the same recorded values
    flow = [row for row in moved.summary["flow"] if row["file"] == QWEN3 and row["placed"]]
    assert flow and all(row["line"] == row["recorded_line"] - SHIFT for row in flow)


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "vendor").mkdir(parents=True)
    (project / VENDOR_DIR).symlink_to(ROOT / VENDOR_DIR)
    return project


def test_a_committed_device_trace_from_another_pin_is_a_notice_not_a_refusal(tmp_path: Path) -> None:
    _need_vendor()
    project = _project(tmp_path)
    other_pin_trace(project / "traces" / "cuda")
    pin_today = json.loads((MINI / "bf16" / "trace.json").read_text(encoding="utf-8"))["vendor"]["upstream"]["commit"]
    traces = load_traces(project, pin_today)
    (view,) = traces.views
    assert view.placed and view.pin_moved and view.fresh_for(QWEN3)
    assert traces.refusals() == []                                   # the strict build goes on …
    (notice,) = traces.notices()                                     # … and says why, in one line
    assert f"recorded at {OTHER_PIN[:12]}" in notice and f"{QWEN3}: line(s) {CHANGED + SHIFT}" in notice
    assert "cannot be recorded again here" in notice
    status = view.status()
    assert status.startswith(f"记录于 {OTHER_PIN[:10]}") and f"recorded at {OTHER_PIN[:10]}" in status
    assert "1 recorded line(s) no longer exist" in status
    notice = view.file_notice(QWEN3)
    assert notice.startswith("traces/cuda（H200 · CUDA · bfloat16）记录于") and f"L{CHANGED + SHIFT}" in notice
    from annotate.pages.source.values import ValuesPanel

    banner = ValuesPanel(traces).banner_html(QWEN3)
    assert "记录于另一版本 Recorded at another pin" in banner and f"recorded L{CHANGED + SHIFT} no longer exist" in banner
    same = view.file_notice("nanovllm/layers/activation.py")             # same lines, but another pin
    assert f"recorded at {OTHER_PIN[:10]}" in same and "no longer exist" not in same


def test_a_cpu_trace_from_another_pin_is_still_refused_by_the_strict_build(tmp_path: Path) -> None:
    _need_vendor()
    project = _project(tmp_path)
    other_pin_trace(project / "traces" / "cpu", device="cpu")
    traces = load_traces(project, None)
    assert traces.notices() == [] and len(traces.refusals()) == 1
    assert "rerun `annotate trace --out traces/cpu --force`" in traces.refusals()[0]


@pytest.mark.slow
def test_a_recorded_trace_holds_no_source_text(tiny_trace) -> None:
    """The real writer: no `text` in records, statements or flow rows; line hashes of every traced file."""
    payload = json.loads((tiny_trace.out / "trace.json").read_text(encoding="utf-8"))
    assert payload["version"] == VERSION == 3
    assert all("text" not in r for r in payload["records"])
    assert all("text" not in st for f in payload["functions"] for st in f["statements"])
    assert all("text" not in row for row in payload["summary"]["flow"])
    traced = {r["file"] for r in payload["records"]}
    assert traced <= set(payload["vendor"]["line_hashes"])
    t = tiny_trace.trace
    assert all(r.placed for r in t.records)
    assert any(r.text.startswith("hidden_states, residual =") for r in t.records)   # read from the vendored file
    from test_no_upstream_text import findings, upstream_windows

    assert findings(tiny_trace.out / "trace.json", upstream_windows(), tiny_trace.out) == []


@pytest.mark.slow
def test_the_strict_build_takes_a_committed_gpu_trace_from_another_pin_and_labels_it(tmp_path: Path) -> None:
    """Done-when of issue 11: the real strict MkDocs build, a CPU trace of today plus a GPU trace
    recorded at another pin; it builds, the pages say where the GPU values come from."""
    _need_vendor()
    import shutil

    from annotate.cli.site import build_site
    from site_fixtures import copy_project

    project = copy_project(tmp_path / "project")
    shutil.copytree(MINI / "bf16", project / "traces" / "cpu")
    other_pin_trace(project / "traces" / "cuda")
    build_site(project, project / "site", strict=True)
    source = (project / "site" / "source" / f"{QWEN3}.html").read_text(encoding="utf-8")
    assert "记录于另一版本 Recorded at another pin" in source and f"recorded L{CHANGED + SHIFT} no longer exist" in source
    overview = html.unescape((project / "site" / "trace" / "index.html").read_text(encoding="utf-8"))
    assert f"记录于 {OTHER_PIN[:10]}，已按行映射放到今天的行上；1 行已不存在 — recorded at {OTHER_PIN[:10]}, placed on " \
           "today's lines through the line map; 1 recorded line(s) no longer exist" in overview
