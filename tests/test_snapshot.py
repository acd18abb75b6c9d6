"""The build's snapshot (annotate.pages.base.snapshot): what it holds, that it is frozen, and that one build
reads, parses and diffs each vendored file once and walks each vendor folder once, pages included."""
from __future__ import annotations

import dataclasses
import os
import shutil
from collections import Counter
from pathlib import Path
from unittest import mock

import pytest

from annotate import references, source
from annotate.errors import UserError
from annotate.pages.source import providers
from annotate.pages.source.generate import generate
from annotate.pages.lesson.map_page import render_map
from annotate.pages.base.snapshot import Snapshot, build_snapshot
from annotate.pages.base.trace_set import TraceReview
from annotate.project import Project
from annotate.vendoring import linemap

from site_fixtures import copy_project_with_trace
from values_fixtures import mini_dir, mini_set

pytest_plugins = ["site_fixtures"]
QWEN3 = "nanovllm/models/qwen3.py"
LAYERNORM = "nanovllm/layers/layernorm.py"
HF = "transformers/models/qwen3/modeling_qwen3.py"


def docs_pages(root: Path) -> dict[str, str]:
    """The hand-written pages as MkDocs hands them to the plugin (its own file discovery, through
    :meth:`Project.pages`): src uri -> Markdown."""
    return {page.uri: page.path.read_text(encoding="utf-8") for page in Project.load(root).pages()}


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    """The snapshot of a copy of this project whose traces/ holds the committed mini trace as ``cpu``:
    a clean clone that runs only `make test` (as CI does) has no traces of its own."""
    root = copy_project_with_trace(tmp_path_factory.mktemp("snapshot") / "project", mini_dir("bf16"), name="cpu")
    return build_snapshot(root, docs_pages(root))


def test_it_holds_every_vendored_file_with_its_parse_line_map_status_and_lock(facts: Snapshot) -> None:
    assert {QWEN3, LAYERNORM, HF, "LICENSE"} <= set(facts.files)
    assert list(facts.files).index(QWEN3) < list(facts.files).index(HF)   # the primary upstream's files first
    qwen3 = facts.files[QWEN3]
    assert qwen3.owner == "nano-vllm" and qwen3.source is not None and qwen3.source.text.encode() == qwen3.data
    assert qwen3.status.state == "differs" and (204, 217) in qwen3.status.local_only
    assert qwen3.line_map.upstream_line(218) == 204 and qwen3.lock.upstream.commit
    assert facts.files["LICENSE"].source is None            # not Python: read and diffed, never parsed
    assert facts.files[HF].owner == "transformers" and [name for name, _ in facts.pins][0] == "nano-vllm"
    assert facts.source(QWEN3) is qwen3.source and facts.sources[QWEN3] is qwen3.source
    assert facts.sources is facts.sources and "LICENSE" not in facts.sources   # built once; parsed files only
    assert facts.page_paths() == [p for p in facts.files if p.endswith(".py")]


def test_it_holds_notes_references_map_traces_and_ranges_resolved(facts: Snapshot) -> None:
    assert facts.note_problems == () and facts.reference_problems == ()
    cards = facts.placed[QWEN3]
    assert any(p.start == 156 and not p.note.on_symbol for p in cards)
    lesson = facts.references["lesson.md"]
    assert lesson and all(res.ok for _, res in lesson)
    assert [ref.line for ref, _ in lesson] == sorted(ref.line for ref, _ in lesson)   # page order: the position
    assert facts.map_rows and all(res.ok for res in facts.map_resolved.values())
    anchor = next(iter(facts.map_resolved))
    assert facts.resolution(anchor) is facts.map_resolved[anchor]
    assert facts.traces.views and facts.trace_review == TraceReview()
    # a multi-line span the map links to is a range the source page gives an id
    assert all(b > a for spans in facts.ranges.values() for a, b in spans) and facts.ranges[HF]


def test_it_is_frozen(facts: Snapshot) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.traces = mini_set()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.files[QWEN3].data = b""  # type: ignore[misc]
    with pytest.raises(TypeError):
        facts.files["x.py"] = facts.files[QWEN3]  # type: ignore[index]
    with pytest.raises(TypeError):
        facts.references["lesson.md"] = ()  # type: ignore[index]


@pytest.mark.parametrize("strict", [False, True])
def test_one_build_reads_parses_and_diffs_each_file_once_and_walks_each_folder_once(project: Path, strict: bool) -> None:
    """The counts of issue 15 (before: a source page read its file 3 times and diffed it twice; one build
    walked each vendor folder 8-9 times and parsed a referenced file up to 5 times). A strict build checks
    the very bytes it publishes against the locks: no second walk or read. A recorded trace is placed
    on the bytes the snapshot read (no re-read of the files it recorded)."""
    shutil.copytree(mini_dir("bf16"), project / "traces" / "cpu")
    vendor = (project / "vendor").resolve()
    reads: Counter[str] = Counter()
    walks: Counter[str] = Counter()
    diffs: Counter[str] = Counter()
    read_bytes, walk, make_parser, build = Path.read_bytes, os.walk, source._parser, linemap.build
    parsed: list[bytes] = []   # what tree-sitter was asked to parse, whoever asked

    def counted_read(self: Path) -> bytes:
        if self.resolve().is_relative_to(vendor) and self.suffix != ".json":
            reads["/".join(self.resolve().relative_to(vendor).parts[1:])] += 1   # the path under its folder
        return read_bytes(self)

    def counted_walk(top, *args, **kwargs):
        if Path(top).resolve().parent == vendor:
            walks[Path(top).name] += 1
        return walk(top, *args, **kwargs)

    class CountedParser:
        def __init__(self) -> None:
            self.parser = make_parser()

        def parse(self, data: bytes):
            parsed.append(data)
            return self.parser.parse(data)

    def counted_build(path: str, *args, **kwargs):
        diffs[path] += 1
        return build(path, *args, **kwargs)

    with mock.patch.object(Path, "read_bytes", counted_read), mock.patch("os.walk", counted_walk), \
            mock.patch.object(source, "_parser", CountedParser), mock.patch.object(linemap, "build", counted_build):
        facts = build_snapshot(project, docs_pages(project), strict=strict)
        site = generate(facts, lambda tex, display: tex, lambda tex: None, providers.providers(facts.traces, facts.files))
        assert facts.map_rows is not None
        render_map(facts.map_rows, facts)
        for uri, markdown in docs_pages(project).items():
            references.expand(markdown, uri, facts.references.get(uri, ()), facts.files)
    files = list(facts.files)
    assert len(files) > 20 and len(site.pages) == len(facts.page_paths()) + 1
    assert [v.key for v in facts.traces.views] == ["cpu"] and facts.traces.views[0].trace.placement is not None
    assert {f: reads[f] for f in files} == {f: 1 for f in files}
    # tree-sitter parsed exactly the Python files' bytes, each once (whoever asked)
    assert Counter(parsed) == Counter(f.data for f in facts.files.values() if f.source is not None)
    assert len(parsed) == len(facts.page_paths())
    assert {f: diffs[f] for f in files} == {f: 1 for f in files} and sum(diffs.values()) == len(files)
    assert walks == Counter({"nano-vllm": 1, "transformers": 1, "vllm": 1})


def test_a_missing_vendored_copy_is_one_line(project: Path) -> None:
    shutil.rmtree(project / "vendor/vllm")
    with pytest.raises(UserError, match=r"vendor/vllm: the vendored copy is missing; run `annotate vendor sync` "
                       r"\(or, if vendor/vllm\.lock\.json is stray, delete it\)$"):
        build_snapshot(project)
