"""The diagrams' data (annotate.lesson.diagrams) and HTML (annotate.pages.lesson.diagrams), from real runs.

The claims come from running the vendored code in a scratch copy of the project that holds the
session's real tiny trace (so the trace-based diagram and its counterexamples exist, as after
`make site`); a second copy without traces shows the bilingual notice instead.
"""
from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pytest

from annotate.claims import ClaimError, format_value
from annotate.lesson import diagrams as data
from annotate.lesson.model import Claim
from annotate.lesson.table import Table, load_table
from annotate.pages.lesson import diagrams as pages
from annotate.project import Project
from goldens import compare_golden

pytest_plugins = ["site_fixtures"]


@pytest.fixture(scope="module")
def traced_root(tmp_path_factory: pytest.TempPathFactory, tiny_trace) -> Path:
    """A project copy whose traces/ holds the session's tiny bf16 trace (with its tensors)."""
    from site_fixtures import copy_project_with_trace

    return copy_project_with_trace(tmp_path_factory.mktemp("diagrams") / "project", tiny_trace.out)


@pytest.fixture(scope="module")
def table(traced_root: Path) -> Table:
    return load_table(traced_root)


@pytest.fixture(scope="module")
def all_(table: Table) -> dict[str, data.Diagram]:
    return data.all_diagrams(table)


def value(table: Table, name: str):
    return table.claims[name].value


# ---------------------------------------------------------------- dependency sets

def test_swiglu_output_depends_on_products_and_its_row_of_w_down(all_):
    d = all_["swiglu"]
    for t in range(2):
        for i in range(4):
            assert set(d.cells[f"out.{t}.{i}"].deps) == {f"p.{t}.{j}" for j in range(6)} | {f"wd.{i}.{j}" for j in range(6)}
    assert d.cells["gu.1.7"].deps == tuple([f"x.1.{i}" for i in range(4)] + [f"wgu.7.{i}" for i in range(4)])
    assert d.cells["gate.0.2"].deps == ("gu.0.2",) and d.cells["up.0.2"].deps == ("gu.0.8",)  # chunk: second half at F + j
    assert set(d.cells["p.0.3"].deps) == {"silu.0.3", "up.0.3"}
    assert all(dep in d.cells for deps in d.deps().values() for dep in deps)


def test_swiglu_mixes_h_never_tokens(table, all_):
    """Two tokens in one batch: no formula of token t reads another token's cells, and token 0's output is
    the one it has alone (both measured by the vendored run)."""
    d = all_["swiglu"]
    assert value(table, "swiglu.tokens") == 2
    for cell in d.cells.values():
        parts = cell.id.split(".")
        if cell.deps and parts[0] in {"gu", "gate", "up", "silu", "p", "out"}:
            t = parts[1]
            assert all(dep.split(".")[1] == t for dep in cell.deps if dep.split(".")[0] not in {"wgu", "wd"}), cell.id
    assert value(table, "swiglu.tok1.out") != value(table, "swiglu.out")
    assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(value(table, "swiglu.tok0_in_batch"), value(table, "swiglu.out")))


def test_every_formula_recomputes_from_the_cells_it_highlights(all_):
    """out[i] is the sum of p[j]·W_d[i, j] over exactly its highlighted cells; p is the product of its two."""
    d = all_["swiglu"]
    for t in range(2):
        for i in range(4):
            deps = d.cells[f"out.{t}.{i}"].deps
            total = sum(d.cells[f"p.{t}.{j}"].value * d.cells[f"wd.{i}.{j}"].value for j in range(6))
            assert math.isclose(total, d.cells[f"out.{t}.{i}"].value, abs_tol=1e-5), deps
            assert d.cells[f"out.{t}.{i}"].formula.endswith("= " + format_value(d.cells[f"out.{t}.{i}"].value))
        for j in range(6):
            a, b = (d.cells[k].value for k in d.cells[f"p.{t}.{j}"].deps)
            assert math.isclose(a * b, d.cells[f"p.{t}.{j}"].value, abs_tol=1e-6)
            z = d.cells[f"gate.{t}.{j}"].value
            assert "z·σ(z)" in d.cells[f"gate.{t}.{j}"].formula
            assert math.isclose(z / (1 + math.exp(-z)), d.cells[f"silu.{t}.{j}"].value, abs_tol=1e-6)


def test_swiglu_values_are_the_lessons_claims(table, all_):
    d = all_["swiglu"]
    assert [d.cells[f"out.0.{i}"].value for i in range(4)] == value(table, "swiglu.out")
    assert [d.cells[f"gu.0.{j}"].value for j in range(12)] == value(table, "swiglu.gate_up")
    assert [d.cells[f"out.1.{i}"].value for i in range(4)] == value(table, "swiglu.tok1.out")


def test_rmsnorm_example_cells(all_):
    d = all_["rmsnorm"]
    assert d.cells["sq.0.1"].value == 16.0 and d.cells["mean.0"].value == 12.5
    assert set(d.cells["mean.0"].deps) == {"sq.0.0", "sq.0.1"} and set(d.cells["rms.0"].deps) == {"mean.0", "eps"}
    assert set(d.cells["y.0.0"].deps) == {"x.0.0", "rms.0", "g.0"}
    assert math.isclose(d.cells["y.0.1"].value, 4 / math.sqrt(12.5), rel_tol=1e-6)


def test_rmsnorm_reduces_over_h_per_token(table, all_):
    """Each token's mean reads that token's squares only (the axis the diagram teaches); γ is one row, [H]."""
    d = all_["rmsnorm"]
    x = value(table, "rmsnorm.batch.x")
    assert len(x) == 2 and x[0] == value(table, "rmsnorm.example.x")
    for t, row in enumerate(x):
        assert set(d.cells[f"mean.{t}"].deps) == {f"sq.{t}.{i}" for i in range(len(row))}
        assert math.isclose(d.cells[f"mean.{t}"].value, sum(v * v for v in row) / len(row), rel_tol=1e-6)
    gamma = next(b for b in d.blocks if b.key == "g")
    assert gamma.shape.startswith("[H]") and len(gamma.rows) == 1
    assert all(b.shape.startswith("[token, H] = [2,") for b in d.blocks if b.key in {"x", "sq", "y"})


def test_traced_strip_shows_the_largest_channels_of_the_token(table, all_):
    d = all_["traced"]
    assert not d.notice
    x, chans = value(table, "traced.norm.x"), value(table, "traced.norm.channels")
    assert len(chans) == data_top() and len(x) == value(table, "traced.norm.hidden_size")
    smallest_shown = min(abs(x[i]) for i in chans)
    assert all(abs(x[i]) <= smallest_shown for i in range(len(x)) if i not in chans)
    h = len(x)
    assert math.isclose(sum(v * v for v in x) / h, d.cells["mean.0"].value, rel_tol=1e-4)
    assert set(d.cells["mean.0"].deps) == {f"sq.0.{i}" for i in chans}
    assert next(b for b in d.blocks if b.key == "g").shape.startswith("[H]")
    stats = next(b for b in d.blocks if b.key == "stats")   # one token: "each" of them would be wrong
    assert stats.shape == f"[token] = [{len(stats.rows)}]（每个 token 两个值 two values per token）"
    assert "各" not in stats.shape


def data_top() -> int:
    from annotate.lesson.traced import TOP

    return TOP


# ---------------------------------------------------------------- counterexamples: differ / agree as claimed

def test_layernorm_counterexample_changes_the_output(table):
    x = value(table, "rmsnorm.example.x")
    mean = sum(x) / len(x)
    std = math.sqrt(sum((v - mean) ** 2 for v in x) / len(x))
    want = [(v - mean) / std for v in x]
    got = value(table, "counter.layernorm.output")
    assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(got, want))
    assert got != value(table, "rmsnorm.example.output")
    assert value(table, "counter.layernorm.rmsnorm_output") == value(table, "rmsnorm.example.output")


def test_swapped_chunk_gives_another_mlp_output(table):
    right, wrong = value(table, "swiglu.out"), value(table, "counter.swap.out")
    assert max(abs(a - b) for a, b in zip(right, wrong)) > 1e-3
    assert value(table, "counter.swap.gate") == value(table, "swiglu.up")  # SiLU now receives the up half
    assert value(table, "counter.swap.right_out") == right


def test_relu_for_silu_on_the_same_weights_changes_the_output(table):
    """The vendored MLP with ReLU: plain Python on the displayed weights gives the same numbers."""
    from annotate.lesson.swiglu import WALK_X, walk_weights

    w_gate, w_up, w_down = walk_weights()
    gate = [sum(a * b for a, b in zip(WALK_X, row)) for row in w_gate]
    up = [sum(a * b for a, b in zip(WALK_X, row)) for row in w_up]
    prod = [max(g, 0.0) * u for g, u in zip(gate, up)]
    want = [sum(p * w for p, w in zip(prod, row)) for row in w_down]
    got = value(table, "counter.relu.out")
    assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(got, want))
    assert max(abs(a - b) for a, b in zip(got, value(table, "swiglu.out"))) > 1e-3
    assert value(table, "counter.relu.gate") == value(table, "swiglu.gate")


def test_normalising_over_tokens_is_another_output(table):
    x = value(table, "rmsnorm.batch.x")
    cols = list(zip(*x))
    rms = [math.sqrt(sum(v * v for v in c) / len(c)) for c in cols]
    want = [[row[i] / rms[i] for i in range(len(row))] for row in x]
    got = value(table, "counter.axis.output")
    assert all(math.isclose(a, b, rel_tol=1e-6) for r, w in zip(got, want) for a, b in zip(r, w))
    assert got != value(table, "rmsnorm.batch.output") and value(table, "counter.axis.right_output") == value(table, "rmsnorm.batch.output")


def test_counterexamples_are_numbered_in_page_order(all_, traced_root: Path):
    """The numbers follow the diagrams as the page places them; the lesson's references resolve to the same."""
    page = (traced_root / "docs" / "diagrams.md").read_text(encoding="utf-8")
    placed = data.DIAGRAM_LINE.findall(page)
    assert placed == list(data.PAGE_ORDER)
    drawn = [ce.key for key in placed for ce in all_[key].counterexamples]
    numbers = data.counterexample_numbers()
    assert [numbers[k] for k in drawn] == list(range(1, len(drawn) + 1))
    html = "".join(pages.diagram_html(all_[key]) for key in placed)
    assert re.findall(r'data-number="(\d+)"', html) == [str(i) for i in range(1, len(drawn) + 1)]
    assert pages.number_refs("<p>反例 {{counterexample relu}}</p>", "x") == "<p>反例 2</p>"
    with pytest.raises(ClaimError, match=r"^docs/lesson.md: unknown counterexample 'nope'; known: swap"):
        pages.number_refs("{{counterexample nope}}", "docs/lesson.md")


def test_diagrams_out_of_page_order_are_refused(traced_root: Path):
    with pytest.raises(ClaimError, match=r"diagrams placed in the order rmsnorm, swiglu; place them as swiglu, rmsnorm, traced"):
        pages.expand("<p>{{diagram rmsnorm}}</p><p>{{diagram swiglu}}</p>", traced_root)


def test_counterexample_text_has_no_raw_backticks_and_normalised_superscripts(all_):
    html = pages.diagram_html(all_["traced"])
    text = re.sub(r"<[^>]+>", "", html.split('<script type="application/json"')[0])
    assert "`" not in text and not re.search(r"⁽[0-9]", text)
    assert "<code>" in html


def test_returned_hidden_states_is_not_x2_but_the_sum_is(table):
    tol = value(table, "traced.x2.tolerance")
    assert value(table, "traced.x2.rel_hidden") > tol > value(table, "traced.x2.rel_sum")
    assert value(table, "traced.x2.hidden_label").startswith("MLP(")  # what the trace identified it as
    assert "x₂" not in value(table, "traced.x2.hidden_label")
    assert value(table, "traced.x2.found_at")


def test_rounded_residual_changes_some_outputs_by_an_ulp_or_two(table):
    n_diff, numel, max_ulps = (value(table, f"traced.order.{k}") for k in ("n_diff", "numel", "max_ulps"))
    assert 0 < n_diff < numel and 1 <= max_ulps <= 4
    ulps, differ = value(table, "traced.order.ulps"), value(table, "traced.order.differ")
    assert differ and all(ulps[i] > 0 for i in differ)
    y, y_hf = value(table, "traced.norm.output"), value(table, "traced.order.output_hf")
    assert all(y[i] != y_hf[i] for i in differ)
    assert table.claims["traced.norm.output"].problem is None  # the re-run reproduced the trace bit for bit


# ---------------------------------------------------------------- failures

def _with(table: Table, name: str, **change) -> Table:
    claims = dict(table.claims)
    old = claims[name]
    claims[name] = Claim(name, change.get("value", old.value), old.what, change.get("problem", old.problem))
    return Table(table.key, claims, dict(table.failed))


def test_a_claim_that_no_longer_holds_stops_the_diagram(table):
    broken = _with(table, "swiglu.out", problem="the vendored Qwen3MLP gives [0], but … gives [1]")
    with pytest.raises(ClaimError, match=r"^docs/diagrams.md: diagram swiglu: claim swiglu.out no longer holds"):
        data.all_diagrams(broken)   # the page's diagrams, named by the page they are drawn on


def test_arithmetic_that_does_not_add_up_stops_the_diagram(table):
    out = list(value(table, "swiglu.out"))
    out[2] += 0.01
    with pytest.raises(ClaimError, match=r"diagram swiglu: out\[0, 2\]: the arithmetic shown gives"):
        data.swiglu(_with(table, "swiglu.out", value=out))


def test_edited_vendored_chunk_fails_the_diagram(project: Path):
    """Swap the chunk in the vendored activation: the diagram (not only the lesson) refuses to draw."""
    path = project / "vendor/nano-vllm/nanovllm/layers/activation.py"
    path.write_text(path.read_text(encoding="utf-8").replace("x, y = x.chunk(2, -1)", "y, x = x.chunk(2, -1)"),
                    encoding="utf-8")
    with pytest.raises(ClaimError, match=r"diagram swiglu: claim swiglu\.\w+ no longer holds"):
        pages.expand("<p>{{diagram swiglu}}</p>", project, strict=True)
    assert "dg-broken" in pages.expand("<p>{{diagram swiglu}}</p>", project, strict=False)


def test_without_a_trace_the_page_says_so_in_both_languages(project: Path):
    assert not (project / "traces").exists()
    d = data.all_diagrams(load_table(project))["traced"]
    assert "没有可用的轨迹" in d.notice and "No usable trace" in d.notice and not d.cells
    html = pages.diagram_html(d)
    assert "dg-missing" in html and "dg-cell" not in html


def test_unknown_diagram_is_one_line(traced_root: Path):
    with pytest.raises(ClaimError, match=r"unknown diagram 'nope'; known: swiglu, rmsnorm, traced"):
        pages.expand("<p>{{diagram nope}}</p>", traced_root)


# ---------------------------------------------------------------- HTML

def test_html_carries_the_dependency_sets_as_data(all_):
    html = pages.diagram_html(all_["swiglu"])
    found = dict(re.findall(r'data-cell="([^"]+)" data-deps="([^"]*)"', html))
    assert {k: v.split() for k, v in found.items()} == all_["swiglu"].deps()
    assert html.count('<button type="button" class="dg-cell"') == 80  # per token: gu 12 + gate/up/silu/p 6 each + out 4
    assert html.count('aria-expanded="false"') == 2


def test_html_escapes_what_it_shows():
    d = data.Diagram("t", "<b>title</b>", [], {}, notice="<script>alert(1)</script>")
    html = pages.diagram_html(d)
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    cell = data.Cell("a", 1.0, ("b",), "x </script><script>y")
    diagram = data.Diagram("t", "t", [], {"a": cell})
    assert "</script><script>" not in pages.data_json(diagram)


@pytest.mark.parametrize("key", ["swiglu", "rmsnorm"])
def test_html_golden(all_, key):
    """The generated HTML (numbers and labels only: no vendored code) against tests/golden/."""
    text = pages.diagram_html(all_[key]) + "\n"
    compare_golden(f"diagram-{key}.html", text)


def test_annotate_check_lists_a_diagram_that_cannot_be_drawn(project: Path):
    """`annotate check` (claims.scan_claims) covers the diagrams: an unknown one is one line."""
    from annotate.claims import scan_claims

    assert scan_claims(Project.load(project)) == []
    page = project / "docs" / "diagrams.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n{{diagram nope}}\n", encoding="utf-8")
    assert scan_claims(Project.load(project)) == ["docs/diagrams.md: unknown diagram 'nope'; known: swiglu, rmsnorm, traced"]


def test_a_trace_the_vendored_code_no_longer_reproduces_stops_the_diagram(tmp_path: Path, tiny_trace):
    """Change one recorded output of add_rms_forward: the re-run no longer matches it bit for bit."""
    from safetensors.torch import load_file, save_file

    from annotate.lesson.traced import LAYER, _call
    from annotate.trace.format.store import TENSORS_NAME
    from site_fixtures import copy_project

    root = copy_project(tmp_path / "project")
    trace_dir = root / "traces" / tiny_trace.out.name
    shutil.copytree(tiny_trace.out, trace_dir)
    tensors = load_file(str(trace_dir / TENSORS_NAME))
    key = _call(tiny_trace.trace, LAYER)["out"]
    tensors[key] = tensors[key].clone()
    tensors[key][0, 0] += 1.0
    save_file(tensors, str(trace_dir / TENSORS_NAME))
    with pytest.raises(ClaimError, match=r"diagram traced: claim traced.norm.output no longer holds: re-running"):
        data.traced_norm(load_table(root))


# ---------------------------------------------------------------- citations

def _facts(trace: str = "") -> pages.CiteFacts:
    from values_fixtures import repo_files, repo_sources

    return pages.CiteFacts(repo_sources(), repo_files(), trace)


def test_every_diagram_and_counterexample_names_code_that_resolves_to_a_permalink(all_):
    keys = {k for d in all_.values() for k in [d.key, *(ce.key for ce in d.counterexamples)]}
    assert set(pages.CODE) == keys
    for key in keys:
        lines = _facts().code_lines(key)
        assert lines and all(re.fullmatch(r"实现 code: nanovllm/\S+\.py:\d+ · \S+", x) for x in lines[::2]), lines
        assert all(x.startswith("上游 upstream: https://") and "/blob/" in x for x in lines[1::2]), lines


def test_a_cell_citation_names_diagram_cell_value_formula_and_code(all_):
    d = all_["swiglu"]
    cell = d.cells["out.0.2"] if "out.0.2" in d.cells else next(c for c in d.cells.values() if c.id.startswith("out."))
    lines = pages.diagram_cell_citation(d, cell, _facts()).split("\n")
    assert lines[0].endswith("· nano-vllm") and lines[1].startswith("图解 diagram: SwiGLU：") and lines[1].endswith("(diagrams.md#swiglu)")
    assert lines[2] == f"元素 cell: out [token, H] = [2, 4] · {cell.id} = {data.n(cell.value)}"
    assert lines[3] == f"算式 formula: {cell.formula}" and cell.formula
    assert lines[4].startswith("实现 code: nanovllm/models/qwen3.py:") and lines[4].endswith("· Qwen3MLP.forward")
    assert lines[6].startswith("实现 code: nanovllm/layers/activation.py:") and len(lines) == 8


def test_the_page_script_joins_the_same_citation_from_the_diagram_json(all_):
    """docs/js/diagrams.js joins head, what, formula and tail: the JSON holds exactly the parts diagram_cell_citation joins."""
    import json

    d, facts = all_["rmsnorm"], _facts()
    got = json.loads(pages.data_json(d, facts))
    for cell in (c for c in d.cells.values() if c.interactive):
        entry = got["cells"][cell.id]
        parts = [got["cite"]["head"], entry["what"], "算式 formula: " + entry["formula"], got["cite"]["tail"]]
        assert "\n".join(p for p in parts if p) == pages.diagram_cell_citation(d, cell, facts)
    assert "复制" in got["cite"]["label"] and "Copy" in got["cite"]["label"]


def test_the_traced_diagram_cites_its_trace(table, traced_root: Path):
    import json

    trace = pages.traced_from(table)
    assert trace.startswith("运行 trace: traces/") and table.claims["traced.norm.provenance"].value in trace
    html = pages.expand("<p>{{diagram traced}}</p>", traced_root, table=lambda: table,
                        sources=_facts().sources, files=_facts().files)
    got = json.loads(html.split('class="dg-data">')[1].split("</script>")[0])
    assert got["cite"]["tail"].endswith(trace) and "RMSNorm.add_rms_forward" in got["cite"]["tail"]
    assert html.count('class="dg-ce-cite"') == 2


def test_a_counterexample_citation_has_claim_right_and_wrong_values_verdict_and_code(all_):
    d = all_["swiglu"]
    relu = next(ce for ce in d.counterexamples if ce.key == "relu")
    number = data.counterexample_numbers()["relu"]
    text = pages.counterexample_citation(d, relu, number, _facts())
    lines = text.split("\n")
    assert lines[2] == f"反例 counterexample: 反例 {number}：{relu.title} · Counterexample {number}: {relu.title_en}"
    assert lines[3].startswith("论断 claim: 错误读法") and lines[4] == "对比 compared:"
    row = relu.rows[0]
    assert lines[5] == f"  {row.label}: 正确 right {row.right} | 错误 wrong {row.wrong}"
    assert any(x.startswith("结果 verdict: ") for x in lines) and "`" not in text
    assert lines[-2].endswith("· Qwen3MLP.forward") and lines[-1].startswith("上游 upstream: ")
    html = pages.diagram_html(d, _facts())
    assert html.count('class="dg-ce-cite"') == 2 and 'class="an-cite" data-cite="text"' in html
