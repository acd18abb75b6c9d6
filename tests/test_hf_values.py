"""The HF page's values panels (annotate/pages/source/hf_values.py): nano-vllm's panel structure, HF's rows."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from annotate.pages.source.hf_values import OLD_TRACE, HfValues
from annotate.pages.base.trace_set import TraceSet, TraceView
from annotate.pages.base.tracefmt import esc
from annotate.pages.source.values import script_uri
from annotate.trace.identify.hf_lines import HF_FILE

from values_fixtures import mini, repo_snapshot

pytest_plugins = ["values_fixtures"]
REPO = Path(__file__).resolve().parents[1]


def views_of(provider: HfValues, key: str) -> dict:
    """The (line -> layer -> view) data a trace's generated script holds."""
    text = provider.data_files(HF_FILE)[script_uri(HF_FILE, key)]
    return json.loads(text.split("] = ", 1)[1].rstrip(";\n"))


def x1_rows(trace) -> list[dict]:
    return [e for e in trace.summary["hf_lines"]["lines"] if e["identity"] == "x1" and e["var"] == "hidden_states"]


def test_hf_page_carries_the_values_blob_and_panels_annotate_js_reads() -> None:
    trace = mini()
    provider = HfValues(TraceSet([TraceView("cpu", trace)]), repo_snapshot().files)
    line = x1_rows(trace)[0]["line"]
    data = provider.page_data(HF_FILE)["values"]
    assert [t["key"] for t in data["traces"]] == ["cpu"] and line in data["lines"]
    assert data["layers"] == trace.layers()
    html = provider.line_html(HF_FILE, line)
    assert html.startswith(f'<details class="an-values an-hf-values" id="values-L{line}" data-line="{line}"')
    assert 'class="an-layer-select"' in html and provider.line_html("nanovllm/models/qwen3.py", line) == ""
    assert 'id="an-panel-template"' in provider.banner_html(HF_FILE)   # the legend and the citation button
    views = views_of(provider, "cpu")
    assert set(views[str(line)]) == {str(n) for n in trace.layers()}
    # a trace recorded before HF values were kept says so, and invents no comparison
    body = views[str(line)]["1"]["h"]
    assert esc(OLD_TRACE) in body and "an-vs-nano" not in body


def test_hf_view_links_the_matching_nano_vllm_line_with_the_measured_distance() -> None:
    trace = copy.deepcopy(mini())
    row = next(e for e in x1_rows(trace) if e["layer"] == 1)
    row.update(shape=[32, 1024], dtype="bfloat16", norm=350.25, mean=0.0165, absmax=8.1875, head=[-1.1015625, 4.53125],
               nano={"file": "nanovllm/models/qwen3.py", "line": 156, "var": "residual", "layer": 1,
                     "max_abs": 0.09375, "max_ulps": 3, "scale_ulps": 1.5, "rel": 0.011, "dtype": "bfloat16"})
    provider = HfValues(TraceSet([TraceView("cpu", trace)]), repo_snapshot().files)
    body = views_of(provider, "cpu")[str(row["line"])]["1"]["h"]
    assert 'href="../../../nanovllm/models/qwen3.py.html#L156&amp;layer=1&amp;trace=cpu"' in body
    assert "qwen3.py:156 <code>residual</code>" in body and "max |Δ| = 0.09375（bfloat16，1.5 ulp），rel 0.011" in body
    assert "‖·‖₂ = 350.2" in body and "[-1.102, 4.531, …]" in body and "[32, 1024] bfloat16" in body
    assert "对照 nano-vllm: qwen3.py:156 residual（第 1 层 layer 1）" in body   # in the copied citation too
    # no ≡ claimed, no comparison: a row that matched nothing
    row.update(status="no match", label="", identity="")
    body = views_of(HfValues(TraceSet([TraceView("cpu", trace)]), repo_snapshot().files), "cpu")[str(row["line"])]["1"]["h"]
    assert "qwen3.py:156" not in body and "无匹配 no match" in body
