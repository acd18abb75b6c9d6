"""The 三框架映射 map page: anchors from map/decoder-block.yml resolve in all three upstreams' vendored
files, cells link to the resolved lines and the pinned upstream lines, and a broken anchor is a problem
(which fails the strict build)."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from annotate.anchors import Anchor, resolve
from annotate.errors import UserError
from annotate.notes import Sources
from annotate.framework_map import FRAMEWORKS, MAP_FILE, load_map
from annotate.pages.lesson.map_page import render_map
from annotate.pages.base.snapshot import Snapshot, build_snapshot

pytest_plugins = ["site_fixtures"]
REPO = Path(__file__).resolve().parents[1]
HF = "transformers/models/qwen3/modeling_qwen3.py"


@pytest.fixture(scope="module")
def facts() -> Snapshot:
    return build_snapshot(REPO)


@pytest.fixture(scope="module")
def rows():
    found = load_map(REPO)
    assert found is not None
    return found


def test_every_step_has_the_three_frameworks_and_resolves(rows, facts) -> None:
    steps = [r.step for r in rows]
    assert steps == ["embedding", "first-input-norm", "fused-input-norm", "attention", "x1-and-norm", "gate-up",
                     "silu-mul", "down", "tp-all-reduce", "x2", "returns", "layer-loop", "final-norm"]
    # HF's vendored modeling file holds no tensor-parallel code: that one row has no transformers cell
    assert all(set(r.cells) == set(FRAMEWORKS) - ({"transformers"} if r.step == "tp-all-reduce" else set()) for r in rows)
    page = render_map(rows, facts)
    assert page.problems == []
    assert page.markdown.index("三框架映射") < page.markdown.index("Three-framework map")


def test_hf_x1_cell_links_to_the_resolved_line_and_the_tag_permalink(rows, facts) -> None:
    """HF's first residual add (x₁) is modeling_qwen3.py:270 at v4.57.6: resolved, not typed into the map."""
    line = resolve(Anchor(HF, "Qwen3DecoderLayer.forward", "hidden_states = residual + hidden_states", 0),
                   Sources(REPO).get(HF)).span[0]
    assert line == 270   # the fact the issue states, checked against the vendored file
    html = render_map(rows, facts).markdown
    row = re.search(r'<tr id="step-x1-and-norm">.*?</tr>', html).group(0)
    cell = re.search(r'<td data-framework="transformers">.*?</td>', row).group(0)
    assert f'href="source/{HF}.html#L{line}"' in cell
    assert f"https://github.com/huggingface/transformers/blob/v4.57.6/src/{HF}#L{line}" in cell
    assert "<code>residual</code> = x₁（在运行的 dtype 里相加并舍入 added and rounded in the run&#x27;s dtype）" in cell
    # a multi-line statement links to its whole span, and the span is registered as an anchor for the page
    attention = re.search(r'<tr id="step-attention">.*?</tr>', html).group(0)
    assert f'source/{HF}.html#L260-L269"' in attention
    assert (260, 269) in facts.ranges[HF]


def test_a_broken_anchor_is_one_problem_line(rows, facts) -> None:
    row = rows[4]
    cell = row.cells["vllm"]
    broken = replace(cell, anchors=(replace(cell.anchors[0], statement="residual = residual + hidden_states"),))
    rows = [*rows[:4], replace(row, cells={**row.cells, "vllm": broken}), *rows[5:]]
    page = render_map(rows, facts)
    assert len(page.problems) == 1
    assert "vllm/model_executor/models/qwen3.py" in page.problems[0] and "changed" in page.problems[0]
    assert "an-ref-broken" in page.markdown


def test_a_malformed_map_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "map").mkdir()
    (tmp_path / MAP_FILE).write_text("rows:\n  - step: x\n    zh: 甲\n    en: a\n    cells: {hf: {anchors: []}}\n",
                                     encoding="utf-8")
    with pytest.raises(UserError, match=r"map/decoder-block.yml: \$\.rows\[0\]\.cells\.hf: expected one of"):
        load_map(tmp_path)


def test_the_strict_build_fails_when_a_map_anchor_stops_resolving(project: Path) -> None:
    from annotate.cli.site import build_site

    path = project / MAP_FILE
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("statement: return hidden_states}", "statement: return hidden_states * 2}"),
                    encoding="utf-8")
    with pytest.raises(UserError, match=r"modeling_qwen3\.py.*return hidden_states \* 2"):
        build_site(project, project / "site", strict=True)
    assert not (project / "site").exists()


def test_the_lessons_step_links_name_steps_of_the_map(rows) -> None:
    """The lesson's two-layer section links each step to its map row (`map.md#step-…`): every one exists."""
    text = (REPO / "docs/lesson.md").read_text(encoding="utf-8")
    linked = re.findall(r"\]\(map\.md#step-([a-z0-9-]+)\)", text)
    assert len(linked) >= 8
    assert set(linked) <= {r.step for r in rows}


# ---------------------------------------------------------------- what the map refuses

def _edit_map(project: Path, old: str, new: str) -> None:
    path = project / MAP_FILE
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("annotate: error: ") and "Traceback" not in err, err
    return lines[0]


def test_a_repeated_statement_without_nth_fails_check_with_its_occurrences(project: Path, capsys) -> None:
    """HF's `residual = hidden_states` occurs twice in Qwen3DecoderLayer.forward (before each norm): without
    `nth` the map bound the first silently and `check --strict` passed."""
    from annotate.cli import main

    first = "statement: residual = hidden_states, nth: 0}"
    _edit_map(project, first, "statement: residual = hidden_states}")
    assert main(["--root", str(project), "check", "--strict", "--no-claims", "--no-math"]) == 1
    out = capsys.readouterr().out
    hit = [ln for ln in out.splitlines() if "ambiguous:" in ln]
    lines = [s.start_line for s in Sources(project).get(HF).matches("Qwen3DecoderLayer.forward", "residual = hidden_states")]
    assert len(lines) == 2 and len(hit) == 1
    assert hit[0].startswith(f"{MAP_FILE}: first-input-norm › transformers: {HF}")
    assert f"occurs 2 times in Qwen3DecoderLayer.forward (lines {lines[0]}, {lines[1]}); add `nth:`" in hit[0]


@pytest.mark.parametrize("old, new, says", [
    ("    zh: 词嵌入\n", "    zh: 词嵌入\n    stpe: typo\n", "$.rows[0].stpe: unknown key; expected one of step, zh, en, cells"),
    ("        holds: {hidden_states: 'x⁽⁰⁾'}\n", "        hold: {hidden_states: 'x⁽⁰⁾'}\n",
     "$.rows[0].cells[\"nano-vllm\"].hold: unknown key; expected one of anchors, holds, dtype, float32, zh, en"),
    ("statement: residual = hidden_states, nth: 0}", "statement: residual = hidden_states, nht: 0}",
     ".anchors[0].nht: unknown key; expected one of file, symbol, statement, nth"),
    ("columns: [nano-vllm, transformers, vllm]\n", "columns: [nano-vllm, transformers, vllm]\nrow: []\n",
     "$.row: unknown key; expected one of columns, rows"),
    ("  - step: first-input-norm\n", "  - step: embedding\n", "$.rows[1].step: step 'embedding' repeats $.rows[0]'s"),
    ("  - step: first-input-norm\n", "  - step: 'a\"><script>'\n", "$.rows[1].step: expected a step name"),
])
def test_a_mistyped_key_or_a_repeated_step_is_one_line(project: Path, old: str, new: str, says: str, capsys) -> None:
    from annotate.cli import main

    _edit_map(project, old, new)
    before = (project / MAP_FILE).read_bytes()
    assert main(["--root", str(project), "check", "--no-claims", "--no-math"]) != 0
    line = _one_error(capsys)
    assert line.startswith(f"annotate: error: {MAP_FILE}: ") and says in line
    assert f"fix {MAP_FILE} (see" in line or f"another name in {MAP_FILE}" in line     # the fix
    assert (project / MAP_FILE).read_bytes() == before


def test_a_missing_map_file_fails_check(project: Path, capsys) -> None:
    from annotate.cli import main

    (project / MAP_FILE).unlink()
    assert main(["--root", str(project), "check", "--no-claims", "--no-math"]) != 0
    line = _one_error(capsys)
    assert f"{MAP_FILE}: missing" in line and f"git checkout {MAP_FILE}" in line
    (project / "map").rmdir()                      # no map/ at all: a project without the map
    assert load_map(project) is None


def test_a_symlinked_map_is_refused_without_reading_its_target(project: Path, tmp_path: Path, capsys) -> None:
    """Before, the target's first bytes came back in the error (`expected an object, got "root:x:0:0…"`)."""
    from annotate.cli import main

    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LINE: hunter2\n", encoding="utf-8")
    (project / MAP_FILE).unlink()
    (project / MAP_FILE).symlink_to(secret)
    assert main(["--root", str(project), "check", "--no-claims", "--no-math"]) != 0
    line = _one_error(capsys)
    assert f"{MAP_FILE}: is a symbolic link" in line and "TOP-SECRET" not in line and "hunter2" not in line


def _cell(html: str, step: str, framework: str) -> str:
    row = re.search(rf'<tr id="step-{step}">.*?</tr>', html).group(0)
    return re.search(rf'<td data-framework="{framework}">.*?</td>', row).group(0)


def test_every_holds_names_its_dtype_and_float32_cells_link_the_float32_trace(rows, facts) -> None:
    from values_fixtures import mini_set

    html = render_map(rows, facts, traces=mini_set("bf16", "f32")).markdown
    for row in rows:
        for name, cell in row.cells.items():
            if cell.holds:
                assert re.search(r"之后 after（(bfloat16|bfloat16 与 float32 皆然 both bfloat16 and float32)）",
                                 _cell(html, row.step, name)), (row.step, name)
    first = _cell(html, "first-input-norm", "nano-vllm")     # where float32 loses x⁽⁰⁾: found, said, and linked
    assert re.search(r"float32 轨迹 trace: <code>residual</code>: ℓ0: RMSNorm₁\(x⁽⁰⁾\)；与 <code>hidden_states</code> "
                     "同一张量 the same tensor as <code>hidden_states</code>", first), first
    link = re.search(r'<a class="an-map-f32-link" href="([^"]+)">float32 轨迹 trace, L(\d+)</a>', first)
    assert link and link[1].endswith(f"qwen3.py.html#L{link[2]}&amp;layer=0&amp;trace=cpu-float32")
    bare = render_map(rows, facts, traces=mini_set("bf16")).markdown     # no float32 trace: said, and unchecked
    assert "an-map-f32-link" not in bare and "no float32 trace: the float32 statements of the map are not checked" in bare
    assert "float32 下 in float32（未核对 unchecked）: <code>residual</code> = RMSNorm₁(x⁽⁰⁾)" in _cell(
        bare, "first-input-norm", "nano-vllm")


def test_the_float32_lines_are_the_float32_traces_findings(rows, facts) -> None:
    """Issue 34: at layernorm.py:35 `residual` is not yet the same tensor as `x` (the alias comes at :36), and
    at qwen3.py:154 / :156 float32's hidden_states matches nothing: the page says what the trace found."""
    from values_fixtures import mini_set

    html = render_map(rows, facts, traces=mini_set("bf16", "f32")).markdown
    x2 = _cell(html, "x2", "nano-vllm")
    f32 = re.search(r'<div class="an-map-holds an-map-f32">.*?</div>', x2).group(0)
    assert "<code>x</code>: " in f32 and "无匹配 no match" in f32 and "同一张量" not in f32, f32
    for step in ("fused-input-norm", "x1-and-norm"):
        line = re.search(r'<div class="an-map-holds an-map-f32">.*?</div>', _cell(html, step, "nano-vllm")).group(0)
        said = re.search(r"<code>hidden_states</code>: ([^；]*)", line).group(1)
        assert said.startswith("ℓ") and "无匹配 no match" in said and "RMSNorm" not in said, line
    hf = _cell(html, "x1-and-norm", "transformers")      # HF's float32 trace line: its own lines' identities
    assert re.search(r"float32 轨迹 trace: <code>residual</code>: ℓ0–\d: x₁⁽⁰⁾", hf), hf
    assert "(bf16)" not in hf and "(bf16)" not in _cell(html, "x2", "transformers")


def test_every_float32_statement_of_the_shipped_map_holds_in_the_float32_trace(rows, facts) -> None:
    from annotate.pages.lesson.map_truth import contradictions, hf_lines_today
    from values_fixtures import mini_set

    view = mini_set("f32").find(dtype="float32")
    hf = hf_lines_today(view, lambda p: facts.files[p].data if p in facts.files else None)
    assert hf is not None     # HF's cells are checked too
    line_of = lambda a: facts.resolution(a).span[0]   # noqa: E731
    assert contradictions(rows, line_of, view, hf) == []
    # the three statements issue 34 found false, put back: each is one line naming the step, the cell, the trace's words
    x2, fused = (next(r for r in rows if r.step == s) for s in ("x2", "fused-input-norm"))
    bad = [replace(x2, cells={**x2.cells, "nano-vllm": replace(x2.cells["nano-vllm"], float32={
               "x": "written in place into the caller's hidden_states; residual is the same tensor"})}),
           replace(fused, cells={**fused.cells, "nano-vllm": replace(fused.cells["nano-vllm"], float32={
               "residual": "the same tensor as hidden_states"})}),
           replace(x2, step="x2-hf", cells={"transformers": replace(x2.cells["transformers"], holds={"hidden_states": "x₂ (bf16)"})})]
    found = contradictions(bad, line_of, view, hf)
    assert len(found) == 3, found
    assert found[0].startswith(f"{MAP_FILE}: x2 › nano-vllm: `x` = ") and "layernorm.py:35" in found[0]
    assert "not the same tensor as residual (same_memory there: none)" in found[0] and f"fix the cell's `float32` in {MAP_FILE}" in found[0]
    assert found[1].startswith(f"{MAP_FILE}: fused-input-norm › nano-vllm: `hidden_states` = 'RMSNorm₁(x⁽ℓ⁾)'")
    assert re.search(r"no math variable matches in ℓ1, ℓ2, ℓ3 \(nearest rel [0-9.]+–[0-9.]+\)", found[1])
    assert "marked for both dtypes but names bf16" in found[2]
    assert all("\n" not in line for line in found)


def test_check_strict_fails_on_a_map_cell_the_float32_trace_contradicts(project: Path, capsys) -> None:
    """The map's float32 statements are checked by `annotate check --strict` against the float32 trace; without
    one it says so and passes."""
    from annotate.cli import main
    from values_fixtures import mini_dir

    args = ["--root", str(project), "check", "--strict", "--no-claims", "--no-math"]
    assert main(args) == 0
    assert "no float32 trace: the float32 statements of the map are not checked" in capsys.readouterr().out
    import shutil
    shutil.copytree(mini_dir("f32"), project / "traces" / "cpu-float32")
    assert main(args) == 0
    assert "map float32: all hold" in capsys.readouterr().out
    _edit_map(project, "float32: {x: '不等于任何数学变量 no math variable'}\n        zh: 推迟到下一层",   # the x2 row
              "float32: {x: 'x₂，与 residual 同一张量 residual is the same tensor'}\n        zh: 推迟到下一层")
    assert main(args) == 1
    out = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("map    ")]
    assert len(out) == 1 and out[0].startswith(f"map    {MAP_FILE}: x2 › nano-vllm: `x` = ")
    assert "not the same tensor as residual" in out[0] and "no math variable matches in" in out[0]


def test_the_map_states_its_smaller_facts(rows, facts) -> None:
    """x̃₁ is defined where it is used, the transposes are there, the layer loop has a row, Qwen2 reuse is said."""
    html = render_map(rows, facts).markdown
    gate = _cell(html, "gate-up", "nano-vllm")
    assert "x̃₁ = RMSNorm₂(x₁)" in gate and "x̃₁W_gᵀ" in gate and "W_g|" not in gate
    loop = html[html.index('<tr id="step-layer-loop">'):]
    assert "qwen3.py:179" in loop and "modeling_qwen3.py:409" in loop and "qwen2.py:427" in loop
    assert "Qwen2Model" in _cell(html, "embedding", "vllm") and "Qwen2MLP" in _cell(html, "embedding", "vllm")
    for framework in ("nano-vllm", "vllm"):
        assert "x₁ (bf16)" in _cell(html, "x1-and-norm", framework)
        assert "forms x₁" in _cell(html, "x2", framework)


def test_the_identities_table_says_when_a_value_is_a_replayed_float32_one() -> None:
    from annotate.pages.lesson.map_page import _how_compared
    from values_fixtures import mini

    trace = mini()
    line = next(r.line for r in trace.records if r.function == "RMSNorm.add_rms_forward" and r.kind == "line"
                and r.var("x") is not None and r.var("x").dtype == "float32")     # the fp32 sum (x₂ or x₁)
    said = _how_compared(trace, "nanovllm/layers/layernorm.py", line, "x")
    assert "a value of the eager replay" in said and "float32 value compared after rounding to bfloat16" in said
    assert _how_compared(trace, "nanovllm/models/qwen3.py", 156, "residual") == ""   # a traced bf16 value


def test_the_maps_distances_share_one_precision(rows, facts) -> None:
    """Δ and ulps go through the one number formatter (3 significant digits): no `1.85938 ulp` beside `0.0291`."""
    from values_fixtures import mini_set

    html = render_map(rows, facts, traces=mini_set("bf16")).markdown
    found = re.findall(r"ℓ\d+: ([^ ;<]+) \(([^ ;<]+) ulp\)", html)
    if not found:
        pytest.skip("the mini trace has no HF line records to compare with")
    digits = lambda text: len(text.replace("-", "").replace(".", "").split("e")[0].lstrip("0"))  # noqa: E731
    assert all(digits(d) <= 3 and digits(u) <= 3 for d, u in found), found
def test_every_map_cell_copies_a_citation_naming_its_framework_line_and_permalink(rows, facts) -> None:
    html = render_map(rows, facts).markdown
    row = re.search(r'<tr id="step-x1-and-norm">.*?</tr>', html).group(0)
    for framework, title in (("nano-vllm", "nano-vllm"), ("transformers", "HF transformers"), ("vllm", "vLLM")):
        cell = _cell(html, "x1-and-norm", framework)
        cite = re.search(r'data-cite-text="([^"]*)"', cell).group(1).split("&#10;")
        assert cite[0].endswith(f"· {title}") and 'data-cite="text"' in cell
        where = re.search(r'class="an-map-line" href="[^"]*">([^<]*)</a>', cell).group(1)   # e.g. qwen3.py:156
        assert cite[1].startswith("位置 where: ") and cite[1].split(" · ")[0].endswith(where.replace("–", "-"))
        link = re.search(r'class="an-upstream" href="([^"]*)"', cell)
        assert cite[2] == f"上游 upstream: {link.group(1)}" if link else "本地独有" in cite[2]
    assert row.count("an-map-cite") == 3
