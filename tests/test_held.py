"""annotate/render/held.py: generated HTML set aside before Markdown and put back after, anchors kept."""
from __future__ import annotations

from pathlib import Path

import markdown
from mkdocs.structure.pages import _HTMLHandler

from annotate.pages.base.snapshot import build_snapshot
from annotate.pages.source.generate import generate
from annotate.render.held import CLOSE, OPEN, HeldBlocks, hold, set_aside, unheld

REPO = Path(__file__).resolve().parents[1]


def mkdocs_ids(block: str) -> set[str]:
    """The anchor ids MkDocs' own scan of raw HTML finds in `block`."""
    parser = _HTMLHandler()
    parser.feed(block)
    parser.close()
    return parser.present_anchor_ids


def test_set_aside_then_put_back_gives_the_page_without_marks() -> None:
    page = "# T\n\nsome *prose*\n\n" + hold('<div id="a">x\n\ny</div>') + "\n\nmore\n\n" + hold("<p>two</p>") + "\n"
    text, held = set_aside(page, "n0")
    assert OPEN not in text and CLOSE not in text and "x\n\ny" not in text and "two" not in text
    assert held.blocks == ['<div id="a">x\n\ny</div>', "<p>two</p>"]
    assert held.put_back(text) == unheld(page)


def test_markdown_leaves_the_placeholders_whole_and_the_blocks_come_back_unparsed() -> None:
    """Through the extensions the site uses, a held block comes out byte for byte as generated (Markdown
    itself puts a line break between two top-level elements of one line)."""
    block = '<p class="an-kernel-src" id="L1">a</p><div id="L2">b *c*\n\n<span id="L3">d</span></div>'
    text, held = set_aside("# Page\n\n" + hold(block) + "\n", "n1")
    out = held.put_back(markdown.markdown(text, extensions=["md_in_html", "attr_list", "tables"]))
    assert block in out
    assert block not in markdown.markdown(unheld("# Page\n\n" + hold(block) + "\n"), extensions=["md_in_html"])


def test_a_placeholder_of_another_build_is_left_alone() -> None:
    text, held = set_aside(hold("<b>x</b>"), "mine")
    other = HeldBlocks("theirs", ["<i>y</i>"])
    assert other.put_back(text) == text and held.put_back(text) == "<b>x</b>"


def test_anchor_ids_count_what_mkdocs_counts() -> None:
    block = ('<div id="L1"><span data-id="no"></span><a name="n&amp;1">a</a><span name="not-an-anchor"></span>'
             "<p ID='Up' class=x>u</p><a href=\"#x\" NAME=plain>b</a><td id=bare>c</td><br/></div>")
    got = HeldBlocks("n", [block]).anchor_ids()
    assert got == mkdocs_ids(block) == {"L1", "n&1", "Up", "plain", "bare"}


def test_anchor_ids_of_every_held_block_of_the_real_pages_are_mkdocs_own() -> None:
    """The source pages of this project (every vendored file, its notes and ranges), set aside as the plugin
    does: the ids the held blocks give MkDocs are exactly the ones its scan of the HTML would have found."""
    facts = build_snapshot(REPO)
    pages = generate(facts, lambda tex, display: "<span>m</span>", lambda tex: None).pages
    blocks = 0
    for uri, text in pages.items():
        _, held = set_aside(text, "n")
        blocks += len(held.blocks)
        assert held.anchor_ids() == set().union(set(), *map(mkdocs_ids, held.blocks)), uri
    assert blocks >= 3 * (len(pages) - 1)   # rows, symbols and data of every source page (not the index)
    assert any("L156" in HeldBlocks("n", [p]).anchor_ids() for p in pages.values())
