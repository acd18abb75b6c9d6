"""The fused kernel page (annotate.pages.traces.kernels_page): bytes from the trace's shapes, body beside kernel, golden."""
from __future__ import annotations

from annotate.pages.traces import kernels_page
from pathlib import Path

import pytest

from annotate.pages.traces.kernels_page import body_source, compile_evidence, traffic
from annotate.render.offline import read_search_index
from annotate.source import parse
from goldens import compare_golden
from values_fixtures import href, mini, mini_set, repo_sources

pytest_plugins = ["site_fixtures"]
REPO = Path(__file__).resolve().parents[1]


def test_bytes_come_from_the_recorded_shapes() -> None:
    trace = mini()
    t = traffic(trace, "RMSNorm.add_rms_forward")
    entry = next(r for r in trace.records if r.function == "RMSNorm.add_rms_forward" and r.kind == "entry")
    x = entry.var("x")
    n, width, size = x.shape[0] * x.shape[1], x.shape[1], 2      # bfloat16
    assert t.fused == (4 * n + width) * size                     # read x, residual, γ; write x and residual
    assert t.eager > t.fused                                     # the eager body writes fp32 intermediates
    silu = traffic(trace, "SiluAndMul.forward")
    assert [b for _, b in silu.reads] == [n // width * silu_width(trace) * size] and len(silu.writes) == 1


def silu_width(trace) -> int:
    rec = next(r for r in trace.records if r.function == "SiluAndMul.forward" and r.kind == "entry")
    return rec.var("x").shape[-1]


def test_body_is_the_vendored_function() -> None:
    text, a, b = body_source(repo_sources(), mini(), "RMSNorm.add_rms_forward")
    assert text.splitlines()[0].strip() == "@torch.compile" and "return x, residual" in text.splitlines()[-1]
    assert b - a + 1 == len(text.splitlines())


def test_page_golden() -> None:
    page = kernels_page.render(repo_sources(), mini_set("bf16"), href)
    assert page.count("<h2") == 0 and page.count("## `") == len(kernels_page.FUNCTIONS) == 4 and "Inductor C++" in page
    assert "`RotaryEmbedding.forward`" in page
    assert "\n\n" not in page.split('<div class="an-kernel-grid">')[1].split("</div></div>")[0]   # one HTML block
    compare_golden("values/kernels.md", page)


def test_closed_kernels_load_their_code_when_opened() -> None:
    """Built for the site (``files``): a kernel shown open keeps its code inline; each one shown closed (the other
    compiles, the whole generated modules) says its code loads when opened, and that code, the same markup the inline
    page holds, sits in a script of its own that docs/js/kernels.js loads; the page names that script."""
    import json
    import re

    traces = mini_set("bf16")
    inline = kernels_page.render(repo_sources(), traces, href)
    files: dict[str, str] = {}
    page = kernels_page.render(repo_sources(), traces, href, files)
    notes = re.findall(r'<p class="an-kernel-lazy" data-an-code="(\w+)" data-an-src="kernels/(\w+)\.js">', page)
    assert notes and all(a == b for a, b in notes) and len(files) == len({a for a, _ in notes})
    assert page.count("<details class=\"an-kernel\" open>") == inline.count("<details class=\"an-kernel\" open>") > 0
    assert '<script src="../js/kernels.js"></script>' in page and "kernels.js" not in inline
    for key, _ in notes:
        text = files[f"{kernels_page.KERNEL_CODE_DIR}/{key}.js"]
        head = f'(window.anKernelCode = window.anKernelCode || {{}})["{key}"] = '
        assert text.startswith(head) and text.endswith(";\n")
        code = json.loads(text[len(head):-2])
        assert code.startswith('<div class="highlight"><pre><code>') and code in inline
    block = '<div class="highlight"><pre><code>'
    assert page.count(block) + len(notes) == inline.count(block)   # each closed one's code left the page


def test_a_gpu_trace_adds_its_triton_kernel_and_bandwidth(tmp_path) -> None:
    """A CUDA trace (made here from the CPU mini trace: no GPU on this machine) with bandwidth.json."""
    import json
    import shutil

    from annotate.pages.base.trace_set import TraceSet, TraceView
    from annotate.trace.format.store import load_trace
    from values_fixtures import mini_dir

    cuda = tmp_path / "cuda"
    shutil.copytree(mini_dir("bf16"), cuda)
    payload = json.loads((cuda / "trace.json").read_text(encoding="utf-8"))
    payload["meta"].update(device="cuda", device_name="NVIDIA H200")
    for k in payload["kernels"]:
        k["languages"] = ["triton"]
        k["kernels"] = [dict(x, language="triton", source="@triton.jit\ndef triton_red_fused(in_ptr0, out_ptr0):\n    pass")
                        for x in k["kernels"]]
    (cuda / "trace.json").write_text(json.dumps(payload), encoding="utf-8")
    (cuda / "bandwidth.json").write_text(json.dumps({
        "device_name": "NVIDIA H200", "dtype": "bfloat16", "tokens": 32768, "hidden": 1024,
        "method": {"timer": "CUDA events recorded around the loop, then synchronised", "warmup_calls": 10,
                   "calls_per_repeat": 100, "repeats": 20},
        "bytes_moved": 268437504, "median_s": {"fused": 1e-4, "eager": 4e-4, "copy": 8e-5},
        "bandwidth_GBps": {"fused": 2684.4, "eager": 671.1, "copy": 3355.4},
        "fraction_of_copy": {"fused": 0.8, "eager": 0.2}, "fused_speedup_vs_eager": 4.0}), encoding="utf-8")
    traces = TraceSet([TraceView("cpu", mini()), TraceView("cuda", load_trace(cuda))])
    assert [v.device for v in traces.views] == ["cpu", "cuda"] and "H200" in traces.views[1].label
    page = kernels_page.render(repo_sources(), traces, href)
    assert "Triton" in page and "triton_red_fused" in page and "Inductor C++" in page
    assert "实测带宽 Achieved bandwidth" in page and "2684 GB/s" in page and "80%" in page
    assert "median of 20 repeats × 100 calls after 10 warm-up calls; CUDA events" in page


CUDA = REPO / "traces" / "cuda"


def _cuda_set():
    from annotate.pages.base.trace_set import TraceSet, TraceView
    from annotate.trace.format.store import load_trace

    return TraceSet([TraceView("cpu", mini()), TraceView("cuda", load_trace(CUDA, REPO))])


def test_evidence_that_each_trace_ran_compiled_is_its_own() -> None:
    """On the CPU Inductor's graph count proves it; a trace whose count is not trusted says what else shows it."""
    import copy

    cpu = mini()
    words = compile_evidence(cpu)
    trusted = cpu.meta["compiled"]["graph_count_trusted"]
    assert all(trusted.values()) and f"graph count for {len(trusted)} of {len(trusted)} functions" in words
    untrusted = copy.copy(cpu)
    untrusted.meta = copy.deepcopy(cpu.meta)
    untrusted.meta["compiled"]["graph_count_trusted"] = {f: False for f in trusted}
    words = compile_evidence(untrusted)
    assert f"not trusted here (0 of {len(trusted)})" in words and "eager escapes: 0" in words
    assert f"kernels captured: {len(trusted)}/{len(trusted)} (C++)" in words and "fused vs eager: ≤ 1 ulp" in words


@pytest.mark.skipif(not (CUDA / "trace.json").is_file(), reason="traces/cuda (the H200 trace) is not in this checkout")
def test_the_h200_kernels_are_read_statement_by_statement() -> None:
    """Each compiled function's Triton kernels beside their statements; the rounding rms_forward's kernel drops is
    named at the statement that does it eagerly, and the page says the CUDA trace's graph count proves nothing."""
    traces = _cuda_set()
    page = kernels_page.render(repo_sources(), traces, href)
    cuda = traces.views[1].trace
    assert not any(cuda.meta["compiled"]["graph_count_trusted"].values())
    assert "not trusted here (0 of 4)" in page and "kernels captured: 4/4 (Triton)" in page
    for function in kernels_page.FUNCTIONS:
        part = page[page.index(f"## `{function}`"):]
        part = part[:part.find("\n## ", 1) if "\n## " in part[1:] else len(part)]
        assert "逐句对照 Statement by statement" in part and "没有找到对应语句" not in part, function
    rms = page[page.index("## `RMSNorm.rms_forward`"):page.index("## `SiluAndMul.forward`")]
    lines = (REPO / "vendor" / "nano-vllm" / "nanovllm" / "layers" / "layernorm.py").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if "def rms_forward" in ln)
    to_line = next(i for i, ln in enumerate(lines[start:], start=start + 1) if ln.strip().startswith("x = x.to("))
    assert f'layernorm.py.html#L{to_line}">layernorm.py:{to_line}</a>：eager 在这里把 fp32 的值舍入到 bfloat16，内核没有这次舍入' \
        in rms
    assert "<code>tmp13 = tmp12.to(tl.float32)</code> — 仍是 fp32，不舍入 stays fp32: no rounding" in rms
    rotary = page[page.index("## `RotaryEmbedding.forward`"):]
    assert "The kernel keeps every rounding the eager body does." in rotary and "enable_fp_fusion=True" in rotary
    assert "<code>in_ptr0</code> = query" in rotary and "<code>in_ptr0</code> = key" in rotary
    maps = "\n".join(kernels_page.statement_maps(traces.views[1], f, repo_sources()[cuda.function(f)["file"]].text,
                                                 cuda.function(f)["file"], href) for f in kernels_page.FUNCTIONS)
    compare_golden("values/kernels-h200-statements.html", maps)


class _OneFunction:
    """Just enough of a Trace for body_source: one function's static facts."""

    def __init__(self, info: dict) -> None:
        self.info = info

    def function(self, name: str) -> dict | None:
        return self.info if self.info["name"] == name else None


def test_body_spans_multi_line_decorators_and_a_def_on_line_one() -> None:
    sources = {"pkg/m.py": parse("def first(x):\n    return x\n\n\nclass A:\n\n    @torch.compile(\n        dynamic=False,\n    )\n"
                   "    def f(self, x):\n        y = x + 1\n        return y\n\n# trailing\n", "pkg/m.py")}
    stmt = lambda a, b: {"line": a, "end_line": b, "text": "", "targets": []}  # noqa: E731
    first = {"name": "first", "file": "pkg/m.py", "def_line": 1, "statements": [stmt(2, 2)]}
    assert body_source(sources, _OneFunction(first), "first") == ("def first(x):\n    return x", 1, 2)
    f = {"name": "A.f", "file": "pkg/m.py", "def_line": 10, "statements": [stmt(11, 11), stmt(12, 12)]}
    text, a, b = body_source(sources, _OneFunction(f), "A.f")
    assert (a, b) == (7, 12) and text.splitlines()[0].strip() == "@torch.compile(" and text.endswith("return y")
    assert body_source(sources, _OneFunction(dict(f, name="A.gone")), "A.gone") is None


def test_search_index_leaves_out_the_bodies_and_kernels(built_site) -> None:
    """The kernels page is searchable by its prose, not by the code it shows (Python bodies are on the
    source pages already; generated kernels are long and never what a reader looks for)."""

    docs = read_search_index(built_site)["docs"]
    page = [d for d in docs if d["location"].startswith("trace/kernels.html")]
    assert page, "the kernels page is in the index"
    text = " ".join(d["text"] for d in page)
    assert "async_compile" not in text and "def add_rms_forward" not in text and "#include" not in text
    assert "cpp_fused" not in text and "extern" not in text
