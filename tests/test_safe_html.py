"""Nothing injected: hostile notes, docs, lock and trace fields never put script on a page.

The site test builds a real site (strict MkDocs, the real plugin) from a scratch project whose
notes, docs, lock and trace carry script, event handlers and script URLs, then PARSES every page
with html.parser and asserts that none of them survived (the theme's own scripts excepted by rule).
"""
from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from annotate import safe_html
from annotate.cli import main
from annotate.errors import UserError
from annotate.vendoring.lock import LOCK_NAME, lock_from_json

pytest_plugins = ["site_fixtures"]

PAYLOAD = ('<script>alert("pwn")</script><img src=x onerror="alert(\'pwn\')">'
           '<a href="javascript:alert(\'pwn\')">j</a><a href="data:text/html,pwn">d</a>'
           '<iframe src="javascript:alert(1)"></iframe><div onclick="alert(1)">c</div>'
           '<svg onload="alert(1)"></svg><a href=" JaVaScRiPt:alert(1)">k</a>')
MD_PAYLOAD = PAYLOAD + " [x](javascript:alert('pwn')) [y](data:text/html;base64,cHdu) ![z](javascript:pwn)"
SCRIPT_URL = ("javascript:", "data:", "vbscript:")


class Audit(HTMLParser):
    """Collects what would run: script elements (with their text), on* attributes, script URLs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[dict[str, str], str]] = []
        self.handlers: list[str] = []
        self.urls: list[str] = []
        self.embeds: list[str] = []
        self._in_script: dict[str, str] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k.lower(): (v or "") for k, v in attrs}
        for name, value in values.items():
            if name.startswith("on"):
                self.handlers.append(f"<{tag} {name}={value!r}>")
            if name in ("href", "src", "action", "formaction", "xlink:href", "srcdoc", "poster", "data"):
                if value.strip().lower().startswith(SCRIPT_URL) and not _own_data_url(tag, name, value):
                    self.urls.append(f"<{tag} {name}={value[:40]!r}>")
        if tag in ("iframe", "object", "embed", "frame"):
            self.embeds.append(tag)
        if tag == "script":
            self._in_script, self._text = values, []

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._in_script is not None:
            self.scripts.append((self._in_script, "".join(self._text)))
            self._in_script = None

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            self._text.append(data)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _own_data_url(tag: str, name: str, value: str) -> bool:
    """The theme's own inline images (an SVG favicon data: URL would be the only legitimate use)."""
    return tag == "link" and name == "href" and value.startswith("data:image/")


def audit(html: str) -> Audit:
    parser = Audit()
    parser.feed(html)
    parser.close()
    return parser


def hostile_scripts(found: Audit) -> list[str]:
    """Script elements that are not the site's own: ours load a local file or carry the theme's config."""
    bad = []
    for attrs, text in found.scripts:
        src = attrs.get("src", "")
        if src and not src.strip().lower().startswith(SCRIPT_URL) and "//" not in src:
            continue  # a local asset of the site (theme bundle, annotate.js, lesson.js)
        if attrs.get("type") == "application/json" and _is_json(text):
            continue  # a data island: never run, and it parsed whole, so nothing broke out of it
        if "pwn" in text or "alert(" in text:
            bad.append(text[:80])
    return bad


# ---------------------------------------------------------------- the sanitiser itself

@pytest.mark.parametrize("text", [PAYLOAD, MD_PAYLOAD, "<scr<script>ipt>alert(1)</script>",
                                  "<a href='jav&#x09;ascript:alert(1)'>x</a>", "<math><mi xlink:href='javascript:1'>"])
def test_prose_never_carries_script(text: str) -> None:
    html = safe_html.prose(text, lambda tex: f"<span>{tex}</span>")
    found = audit(html)
    assert not found.scripts and not found.handlers and not found.urls and not found.embeds, html


def test_prose_keeps_what_notes_use() -> None:
    html = safe_html.prose("**bold** `code` *em* [link](https://example.org/x) [rel](../a.md#L3) $x_1$",
                           lambda tex: f'<span class="katex">{tex}</span>')
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html and "<em>em</em>" in html
    assert 'href="https://example.org/x"' in html and 'href="../a.md#L3"' in html
    assert '<span class="katex">x_1</span>' in html


def test_hostile_repo_url_is_refused_on_load() -> None:
    data = json.loads((Path(__file__).resolve().parents[1] / LOCK_NAME).read_text(encoding="utf-8"))
    data["upstream"]["repo"] = "javascript:alert(1)//x"
    with pytest.raises(UserError, match=r"\$\.upstream\.repo: expected an https:// URL"):
        lock_from_json(data)


# ---------------------------------------------------------------- a whole hostile site

def _poison(project: Path, trace_dir: Path | None) -> None:
    notes = project / "notes/nanovllm/layers/layernorm.py.yml"
    data = yaml.safe_load(notes.read_text(encoding="utf-8"))
    data["intro"] = {"zh": MD_PAYLOAD, "en": MD_PAYLOAD}
    for note in data["notes"]:
        if "zh" in note:
            note["zh"] = note["zh"] + " " + MD_PAYLOAD
        if "en" in note:
            note["en"] = MD_PAYLOAD
    notes.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    for page in ("index.md", "lesson.md", "writing.md"):
        path = project / "docs" / page
        path.write_text(path.read_text(encoding="utf-8") + "\n\n" + MD_PAYLOAD + "\n\n<p>" + PAYLOAD + "</p>\n",
                        encoding="utf-8")
    lock = project / LOCK_NAME
    facts = json.loads(lock.read_text(encoding="utf-8"))
    facts["upstream"]["subject"] = PAYLOAD
    facts["upstream"]["committed"] = "2025-01-01" + PAYLOAD
    lock.write_text(json.dumps(facts), encoding="utf-8")
    if trace_dir is not None:
        dest = project / "traces" / "cpu"
        shutil.copytree(trace_dir, dest)
        payload = json.loads((dest / "trace.json").read_text(encoding="utf-8"))
        meta = payload["meta"]
        meta["device_name"] = PAYLOAD
        meta["command"] = PAYLOAD
        meta["model"]["name"] = PAYLOAD
        meta["reference"]["implementation"] = PAYLOAD
        meta["created"] = PAYLOAD
        (dest / "trace.json").write_text(json.dumps(payload), encoding="utf-8")


@pytest.mark.slow
def test_hostile_inputs_put_no_script_on_any_page(project: Path, tiny_trace, tmp_path: Path) -> None:
    _poison(project, tiny_trace.out)
    site = tmp_path / "site"
    rc = main(["--root", str(project), "build", "--site-dir", str(site)])
    assert rc == 0
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 10
    seen_payload_text = False
    for page in pages:
        html = page.read_text(encoding="utf-8")
        found = audit(html)
        rel = page.relative_to(site)
        assert not hostile_scripts(found), f"{rel}: {hostile_scripts(found)}"
        assert not found.handlers, f"{rel}: {found.handlers[:3]}"
        assert not found.urls, f"{rel}: {found.urls[:3]}"
        assert not found.embeds, f"{rel}: {found.embeds[:3]}"
        seen_payload_text |= "pwn" in html
    assert seen_payload_text  # the hostile text did reach the pages, as inert text
