"""The search index's post-processing (annotate.search_index): symbols and notes as entries landing on
their lines, source summaries instead of page mush, superscripts, boosts; on a synthetic index (no
vendored text) and on the real built site's index."""
from __future__ import annotations

from pathlib import Path


from annotate import search_index as si
from annotate.render.offline import read_search_index

pytest_plugins = ["site_fixtures"]

LINES = ("class Norm:", "    eps = 1", "    def forward(self, x):", "        return x + residual", "", "def free():",
         "    return 0")
PAGE = si.SourceEntries("pkg/mod.py", "source/pkg/mod.py.html", LINES,
                        (si.SymbolSpan("Norm", "class", 1, 4), si.SymbolSpan("Norm.forward", "method", 3, 4),
                         si.SymbolSpan("free", "function", 6, 7)),
                        {1: (4, 4), 2: (3, 4)})


def index(*docs: dict) -> dict:
    return {"config": {"lang": ["en"]}, "docs": list(docs)}


def test_each_symbol_is_an_entry_landing_on_its_first_line() -> None:
    out = si.refine(index({"location": "source/pkg/mod.py.html", "title": "pkg/mod.py",
                           "text": "加载中… loading… 复制引用 cpucpu-bfloat16 class Norm: eps = 1 …"}), [PAGE])["docs"]
    by_loc = {d["location"]: d for d in out}
    assert list(by_loc) == ["source/pkg/mod.py.html", "source/pkg/mod.py.html#L1", "source/pkg/mod.py.html#L3",
                            "source/pkg/mod.py.html#L6"]
    assert by_loc["source/pkg/mod.py.html#L3"]["title"] == "Norm.forward · mod.py:3–4"
    assert "return x + residual" in by_loc["source/pkg/mod.py.html#L3"]["text"]
    cls = by_loc["source/pkg/mod.py.html#L1"]["text"]
    assert "eps = 1" in cls and "residual" not in cls            # a class without its methods' bodies
    page = by_loc["source/pkg/mod.py.html"]["text"]
    assert "加载中" not in page and "复制引用" not in page and "cpucpu" not in page
    assert "Norm.forward" in page and "7 行 lines" in page


def test_a_note_lands_on_its_lines_and_names_its_file() -> None:
    out = si.refine(index({"location": "source/pkg/mod.py.html#note-2", "title": "L3–4 <code>Norm.forward</code>",
                           "text": "<p>x</p>"},
                          {"location": "source/pkg/mod.py.html#note-9", "title": "L1 <code>x</code>", "text": ""}),
                    [PAGE])["docs"]
    assert out[0]["location"] == "source/pkg/mod.py.html#L3-L4"
    assert out[0]["title"] == "mod.py:3–4 <code>Norm.forward</code>"
    assert out[1]["location"] == "source/pkg/mod.py.html#note-9"   # a note the build did not place: kept as is


def test_a_note_on_a_symbols_first_line_keeps_its_card_anchor() -> None:
    """Locations are the engine's keys: a note on line 6 (where `free` lands) stays on its card."""
    page = si.SourceEntries(PAGE.path, PAGE.location, PAGE.lines, PAGE.symbols, {5: (6, 6)})
    out = si.refine(index({"location": "source/pkg/mod.py.html", "title": "m", "text": ""},
                          {"location": "source/pkg/mod.py.html#note-5", "title": "L6", "text": ""}), [page])["docs"]
    locations = [d["location"] for d in out]
    assert "source/pkg/mod.py.html#note-5" in locations and len(set(locations)) == len(locations)


def test_code_in_an_entry_is_escaped() -> None:
    page = si.SourceEntries("a.py", "source/a.py.html", ("def f():", "    return '<script>'"),
                            (si.SymbolSpan("f", "function", 1, 2),))
    text = si.refine(index({"location": "source/a.py.html", "title": "a.py", "text": ""}), [page])["docs"][1]["text"]
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_superscripts_and_boosts_on_every_page() -> None:
    out = si.refine(index({"location": "lesson.html#x", "title": "x₁⁽0⁾", "text": "x₂⁽12⁾ and x⁽-1⁾"},
                          {"location": "source/vllm/model_executor/models/qwen2.py.html", "title": "q", "text": ""},
                          {"location": "other.html", "title": "o", "text": "", "boost": 7}), [])["docs"]
    assert out[0]["title"] == "x₁⁽⁰⁾" and out[0]["text"] == "x₂⁽¹²⁾ and x⁽⁻¹⁾"
    assert out[0]["boost"] > 1 > out[1]["boost"] and out[2]["boost"] == 7    # a page's own boost is kept
    assert si.boost_for("nowhere.html") is None


def test_refine_file_without_an_index_does_nothing(tmp_path: Path) -> None:
    assert si.refine_file(tmp_path, [PAGE]) is False and not any(tmp_path.iterdir())


def test_the_built_index_lands_symbols_and_notes_on_lines(built_site: Path) -> None:
    docs = read_search_index(built_site)["docs"]       # the one copy the site ships (the lazy script)
    qwen3 = "source/nanovllm/models/qwen3.py.html"
    forward = next(d for d in docs if d["title"].startswith("Qwen3DecoderLayer.forward · qwen3.py:"))
    line = int(forward["location"].split("#L")[1])
    page_html = (built_site / qwen3).read_text(encoding="utf-8")
    assert forward["location"].startswith(qwen3 + "#L") and f'id="L{line}"' in page_html
    assert "def forward" in forward["text"] and "residual" in forward["text"]
    locations = {d["location"] for d in docs}
    assert len(locations) == len(docs)                                       # the engine's keys stay unique
    for kept in (d for d in docs if "#note-" in d["location"]):              # a note off its line only where
        line = kept["title"].split(":")[1].split()[0].split("–")              # another entry lands there
        assert f"{kept['location'].split('#')[0]}#L{line[0]}" + (f"-L{line[1]}" if len(line) > 1 else "") in locations
    sources = [d for d in docs if d["location"].startswith("source/")]
    for chrome in ("加载中", "复制引用", "loading…"):
        assert not [d["location"] for d in sources if chrome in d["text"].replace("\u200b", "")], chrome
    assert not [d["location"] for d in docs if "⁽0⁾" in d["text"] + d["title"] or "⁽1⁾" in d["text"] + d["title"]]
    lesson = next(d for d in docs if d["location"].startswith("lesson.html"))
    vllm = next(d for d in docs if d["location"].startswith("source/vllm/model_executor/models/qwen2.py.html"))
    assert lesson["boost"] > vllm["boost"]
    flat = " ".join(d["text"] for d in docs).replace("\u200b", "")
    assert "10⁻⁶" in flat and "ℝ^(F×H)" in flat and "10−6" not in flat and "RF×H" not in flat   # math as text
    script = (built_site / "search" / "search_index.js").read_text(encoding="utf-8")
    assert forward["location"] in script                                      # the offline copy is the refined one


def test_table_cells_are_kept_apart_for_the_index() -> None:
    html = "<table><tr><td>cpu</td><td>cpu-bfloat16</td></tr><tr><th>a</th></tr></table><p>x</p><td>y</td>"
    assert si.spaced_cells(html) == ("<table><tr><td>cpu</td> <td>cpu-bfloat16</td></tr> <tr><th>a</th></tr></table>"
                                     "<p>x</p><td>y</td>")


def test_what_only_the_index_reads_leaves_the_written_page() -> None:
    from annotate.pages.source.source_page import lean_math

    formula = lean_math(lambda tex, display: f'<span class="katex"><span class="katex-html">{tex}</span></span>')
    shown = formula(r"10^{-6}", False)
    assert "10⁻⁶" in shown and "data-search-exclude" in shown       # what Material's parser reads
    page = f"<p>ε = {shown}</p>"
    assert si.strip_search_only(page) == '<p>ε = <span class="katex" role="img" aria-label="10^{-6}">' \
                                         '<span class="katex-html">10^{-6}</span></span></p>'
