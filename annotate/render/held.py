"""Generated HTML held back from Markdown: set aside before the conversion, put back after it.

The generated pages (a source file's rows and note cards, the kernels page, an experiment's table) are
mostly HTML that Markdown only passes through. To pass it through, Python-Markdown's ``md_in_html`` and
MkDocs' scan for anchor ids each parse every tag of it: on the real project that was about a fifth of a
whole build, for output that came out as it went in (bar a line break Markdown puts between two top-level
elements of one line).

A generator marks such a block with :func:`hold` (two HTML comments around it: harmless wherever the
Markdown is read without the plugin). The plugin, last in ``on_page_markdown``, swaps each held block for
a one-line placeholder (:func:`set_aside`), and first in ``on_page_content`` puts the blocks back
(:meth:`HeldBlocks.put_back`) and adds the anchors they hold to the page's (:meth:`HeldBlocks.anchor_ids`), so that
MkDocs' link validation knows ``#L28-L40`` as before. The placeholders carry a nonce of the build: text
a page shows cannot spell one.
"""
from __future__ import annotations

import html
import re
import secrets
from dataclasses import dataclass, field

OPEN, CLOSE = "<!--an:held-->", "<!--/an:held-->"
_HELD = re.compile(re.escape(OPEN) + "(.*?)" + re.escape(CLOSE), re.S)
#: the start tags that can hold an anchor (``id``; ``name`` on ``<a>``), and their attributes
_ANCHOR_TAG = re.compile(r"<([a-zA-Z][^\s/>]*)(\s[^>]*?\b(?:id|name)\s*=[^>]*)>", re.I)
_ATTR = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")


def hold(block: str) -> str:
    """``block`` (HTML that Markdown must leave as it is) marked to be held back from the conversion."""
    return f"{OPEN}{block}{CLOSE}"


def unheld(text: str) -> str:
    """``text`` without the marks :func:`hold` put in (what a page reads like with the blocks in place)."""
    return text.replace(OPEN, "").replace(CLOSE, "")


@dataclass
class HeldBlocks:
    """One page's held blocks, in order, behind placeholders named by ``nonce``."""

    nonce: str
    blocks: list[str] = field(default_factory=list)

    def placeholder(self, index: int) -> str:
        return f'<div data-an-held="{self.nonce}-{index}"></div>'

    def put_back(self, page_html: str) -> str:
        """The converted page with each placeholder replaced by its block (each appears once)."""
        pattern = re.compile(rf'<div data-an-held="{re.escape(self.nonce)}-(\d+)"></div>')
        return pattern.sub(lambda m: self.blocks[int(m[1])], page_html)

    def anchor_ids(self) -> set[str]:
        """The anchors the blocks hold, as MkDocs' own scan of raw HTML counts them: every ``id``, and the
        ``name`` of an ``<a>`` (attribute names in any case, values with their character references decoded)."""
        found: set[str] = set()
        for block in self.blocks:
            for tag in _ANCHOR_TAG.finditer(block):
                for m in _ATTR.finditer(tag[2]):
                    key = m[1].lower()
                    if key == "id" or (key == "name" and tag[1].lower() == "a"):
                        value = next((v for v in m.group(2, 3, 4) if v is not None), None)
                        if value is not None:
                            found.add(html.unescape(value))
        return found


def set_aside(markdown: str, nonce: str | None = None) -> tuple[str, HeldBlocks]:
    """``markdown`` with each held block replaced by a placeholder, and the blocks to put back."""
    held = HeldBlocks(nonce or secrets.token_hex(8))

    def swap(m: re.Match[str]) -> str:
        held.blocks.append(m[1])
        return held.placeholder(len(held.blocks) - 1)

    return _HELD.sub(swap, markdown), held
