"""The numerics page (annotate.pages.traces.numerics_page): every number from a trace; float32 hazard; golden."""
from __future__ import annotations

import html
import re

import pytest

from annotate.pages.traces import numerics_page
from annotate.pages.traces.numerics_page import elementwise, rounding_calls
from annotate.pages.base.tracefmt import num
from annotate.pages.base.trace_set import TraceSet, TraceView
import values_fixtures
from goldens import compare_golden
from values_fixtures import href, mini, mini_set

tensor_trace = values_fixtures.tensor_trace  # the session fixture, used by name below


def test_rounding_calls_pair_the_fp32_sum_with_the_rounded_residual() -> None:
    calls = rounding_calls(mini())
    assert calls and {(c.sum_line, c.round_line) for c in calls} == {(35, 36)}
    for c in calls:
        assert abs(c.sum_norm - c.round_norm) / c.sum_norm < 2 ** -7


def test_page_numbers_are_the_traces() -> None:
    page = numerics_page.render(mini_set("bf16", "f32"), href)
    bf, f32 = mini(), mini("f32")
    assert num(bf.summary["final_vs_hf"]["max_abs"]) in page and num(f32.summary["final_vs_hf"]["max_abs"]) in page
    for flag in f32.flags:
        assert flag["message"] in page
    assert "layernorm.py.html#L36" in page and "no 16-bit trace with full tensors" in page
    # the float32 explanation names where each function overwrites the caller's tensor, from the vendored statements
    f32_part = page[page.index("both functions overwrite the caller's tensor"):]
    assert "<code>rms_forward</code>" in f32_part and "<code>add_rms_forward</code>" in f32_part
    assert "x.mul_(" in f32_part and ".add_(" in f32_part
    # no number typed in the prose: every digit run outside tags and links is in one of the traces' texts
    assert "1.37" not in page and "0.0095" not in page
    compare_golden("values/numerics.md", page)


def test_elementwise_from_saved_tensors(tensor_trace) -> None:
    calls = rounding_calls(tensor_trace)
    results = [elementwise(tensor_trace, c) for c in calls]
    assert results and all(r is not None for r in results)
    for differ, ulps, numel in results:
        assert 0 <= differ <= numel and ulps <= 2
    page = numerics_page.render(TraceSet([TraceView("cpu", mini()), TraceView("tiny", tensor_trace)]), href)
    assert re.search(r"<td>\d+ / \d+</td>", page)


def test_in_place_table_links_open_the_panel_at_the_calls_layer_and_trace() -> None:
    page = numerics_page.render(mini_set("bf16", "f32"), href)
    table = page[page.index("### `residual` 逐行"):]
    links = [html.unescape(u) for u in re.findall(r'<a href="([^"]+)">L\d+</a>', table.split("</table>")[0])]
    layer = next(r.layer for r in mini("f32").records if r.function == numerics_page.ADD_RMS and r.kind == "line")
    assert links and all(link.endswith(f"&layer={layer}&trace=cpu-float32") for link in links), links


def _vllm_row(page: str) -> str:
    """The vLLM native row of the vLLM section's table."""
    return next(row for row in page.split("<tr>") if row.startswith("<td>vLLM 原生 native"))


def test_vllm_section_runs_the_snapshots_bytes_of_the_op(tensor_trace, monkeypatch) -> None:
    """The section executes the op file's bytes the build's snapshot holds (what a strict build verified), and
    never reads the file from disk: a snapshot whose bytes differ from the disk copy shows their result."""
    import builtins
    import dataclasses
    from pathlib import Path

    from annotate.trace.identify.vllm_native import OPS_FILE, VENDOR

    files = values_fixtures.repo_files()
    traces = TraceSet([TraceView("cpu", mini()), TraceView("tiny", tensor_trace)])
    page = numerics_page.render(traces, href, files)
    calls = re.search(r"Run on the inputs of (\d+) recorded calls\. \(1\) Against nano-vllm's eager replay \(before γ\): "
                      r"(\d+) bit-identical", _vllm_row(page))
    assert calls and int(calls[1]) > 0 and calls[1] == calls[2]                # the op as vendored: nano-vllm's sum
    # (2) with γ against the compiled outputs: counted, whatever they are (the compiled kernel may round differently)
    compiled = re.search(r"\(2\) With γ, against the compiled calls' outputs .*?residual bit-identical in (\d+) of "
                         r"(\d+) calls; normalised output bit-identical in (\d+) of (\d+), (\d+) of (\d+) elements differ",
                         _vllm_row(page))
    assert compiled and compiled[2] == compiled[4] == calls[1] and int(compiled[5]) <= int(compiled[6])
    assert "vLLM issue #52104</a>" in page and "未验证 not verified here" in page   # a report, linked, not a fact
    # the same file with a wrapper appended that doubles the residual the op returns: only these bytes know it
    doubled = files[OPS_FILE].data + (b"\n\n_real_op = fused_add_rms_norm\n\n\n"
                                      b"def fused_add_rms_norm(x, residual, *args, **kwargs):\n"
                                      b"    out, res = _real_op(x, residual, *args, **kwargs)\n"
                                      b"    return out, res * 2\n")
    changed = {**files, OPS_FILE: dataclasses.replace(files[OPS_FILE], data=doubled)}
    op_path = (values_fixtures.REPO / VENDOR / OPS_FILE).resolve()
    reads: list[str] = []
    read_bytes, read_text, open_ = Path.read_bytes, Path.read_text, builtins.open

    def note(path: object) -> None:
        if isinstance(path, (str, Path)) and Path(path).resolve() == op_path:
            reads.append(str(path))

    monkeypatch.setattr(Path, "read_bytes", lambda self: (note(self), read_bytes(self))[1])
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: (note(self), read_text(self, *a, **k))[1])
    monkeypatch.setattr(builtins, "open", lambda file, *a, **k: (note(file), open_(file, *a, **k))[1])
    page = numerics_page.render(traces, href, changed)
    monkeypatch.undo()
    assert re.search(rf"Run on the inputs of {calls[1]} recorded calls\. \(1\) Against nano-vllm's eager replay "
                     r"\(before γ\): 0 bit-identical", _vllm_row(page)), _vllm_row(page)
    assert reads == []                                                        # no disk read of the op file


def test_rounding_norms_are_float64_from_the_saved_tensors(tensor_trace) -> None:
    """The table's relative differences are of norms summed in float64 (float32 sums of squares round by as
    much as the difference itself)."""
    import torch

    from annotate.pages.traces.numerics_page import norms64

    calls = rounding_calls(tensor_trace)
    page = numerics_page.render(TraceSet([TraceView("tiny", tensor_trace)]), href)
    table = page[page.index("### 舍入改变了多少 RMS"):].split("</table>")[0]
    assert "Norms computed in float64 from the saved tensors." in page
    for c in calls:
        s, r = norms64(tensor_trace, c)
        assert s == float(torch.linalg.vector_norm(tensor_trace.tensor(c.sum_tensor).double()))
        assert f"<td>{num(abs(s - r) / s, 3)}</td>" in table
    assert norms64(mini(), rounding_calls(mini())[0]) is None          # no tensors saved: recorded norms, said so
    assert "This trace saved no tensors" in numerics_page.render(mini_set("bf16"), href)


def test_bandwidth_plot_names_the_device_it_was_measured_on(tmp_path) -> None:
    """A trace with a GPU check's bandwidth.json beside it: the plot (one per scheme), the device, the day."""
    import json
    import shutil

    from annotate.trace.format.store import load_trace
    from values_fixtures import mini_dir

    assert numerics_page.plot_files(mini_set("bf16")) == {}
    assert "no trace here carries a GPU check's `bandwidth.json`" in numerics_page.render(mini_set("bf16"), href)
    gpu = tmp_path / "gpu"
    shutil.copytree(mini_dir("bf16"), gpu)
    bw = {"device": "cuda", "device_name": "NVIDIA <H200>", "dtype": "bfloat16", "tokens": 64, "hidden": 32,
          "method": {"timer": "CUDA events", "warmup_calls": 1, "calls_per_repeat": 5, "repeats": 3},
          "bytes_moved": 16448, "median_s": {"fused": 2e-6, "eager": 8e-6, "copy": 2.5e-6},
          "bandwidth_GBps": {"fused": 8.224, "eager": 2.056, "copy": 6.5792},
          "fraction_of_copy": {"fused": 1.25, "eager": 0.3125}, "fused_speedup_vs_eager": 4.0}
    (gpu / "bandwidth.json").write_text(json.dumps(bw), encoding="utf-8")
    traces = TraceSet([TraceView("cpu", mini()), TraceView("gpu", load_trace(gpu))])
    files = numerics_page.plot_files(traces)
    assert sorted(files) == ["trace/bandwidth-dark.svg", "trace/bandwidth.svg"]
    page = numerics_page.render(traces, href)
    part = page[page.index("{#bandwidth}"):]
    created = load_trace(gpu).meta["created"][:10]
    assert "Measured on: **NVIDIA &lt;H200&gt;**" in part and f"trace recorded {created}" in part
    assert "125%" in part and "31%" in part and "×4" in part and 'src="bandwidth.svg"' in part
    title = part[part.index('<figcaption class="an-plot-title">'):part.index("</figcaption>")]
    assert title.index("融合内核") < title.index("achieved bandwidth") and "NVIDIA &lt;H200&gt;" in title


LESSON = values_fixtures.REPO / "docs" / "lesson.md"
BANDWIDTH = values_fixtures.REPO / "traces" / "cuda" / "bandwidth.json"


@pytest.mark.skipif(not BANDWIDTH.is_file(), reason="traces/cuda (the H200 trace) is not in this checkout")
def test_the_lessons_fused_kernel_numbers_are_the_h200_measurement() -> None:
    """docs/lesson.md cites the H200 timing of add_rms_forward: its numbers are bandwidth.json's, in both languages."""
    import json

    bw = json.loads(BANDWIDTH.read_text(encoding="utf-8"))
    text = LESSON.read_text(encoding="utf-8")
    fused, eager = f"{bw['median_s']['fused'] * 1e6:.1f} µs", f"{bw['median_s']['eager'] * 1e6:.1f} µs"
    share, times = f"{bw['fraction_of_copy']['fused']:.0%}".replace("%", " %"), f"{bw['fused_speedup_vs_eager']:.1f}"
    zh = next(ln for ln in text.splitlines() if "traces/cuda/bandwidth.json" in ln and "实测" in ln)
    en = next(ln for ln in text.splitlines() if "traces/cuda/bandwidth.json" in ln and "Measured on" in ln)
    for line in (zh, en):
        assert bw["device_name"] in line and fused in line and eager in line and share in line and times in line
    assert "one pass over the activations instead of two" not in text
