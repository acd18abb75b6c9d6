"""Traces found under traces/ (annotate.pages.base.trace_set) and what a build does with stale or broken ones."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from annotate.cli import main
from annotate.errors import UserError
import dataclasses

from annotate.pages.base.trace_set import REFUSAL_FIX, TraceReview, TraceSet, TraceView, load_traces, review_traces
from site_fixtures import copy_project
from values_fixtures import mini, mini_dir, mini_set

QWEN3 = "nanovllm/models/qwen3.py"
PIN = "2f214426530e2841e7d24c73ee0dfa914d62df56"


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A scratch copy of the project's site inputs (named apart from other modules' `project` fixtures)."""
    return copy_project(tmp_path / "project")


def vouch_for(project: Path, path: str) -> None:
    """Record the vendored file's current sha256 in the lock (what `vendor update` does for its files)."""
    import hashlib

    lock = project / "vendor/nano-vllm.lock.json"
    data = json.loads(lock.read_text(encoding="utf-8"))
    data["source"]["files"][path] = hashlib.sha256((project / "vendor/nano-vllm" / path).read_bytes()).hexdigest()
    lock.write_text(json.dumps(data), encoding="utf-8")


def with_traces(project: Path, *names: str) -> Path:
    for name in names:
        shutil.copytree(mini_dir(name), project / "traces" / ("cpu" if name == "bf16" else f"cpu-{name}"))
    return project


def build(project: Path, *extra: str) -> int:
    return main(["--root", str(project), "build", "--site-dir", str(project / "site"), *extra])


def test_default_first_then_by_dtype(scratch: Path) -> None:
    traces = load_traces(with_traces(scratch, "f32", "bf16"), PIN)
    assert [v.key for v in traces.views] == ["cpu", "cpu-f32"]
    # the float32 trace is the one that shows the aliasing hazard (its trace flagged it): its label says so
    assert [v.label for v in traces.views] == ["CPU · bfloat16", "CPU · float32 · 别名演示 aliasing run"]
    assert traces.warnings() == [] and traces.for_file(QWEN3)


REPO = Path(__file__).resolve().parents[1]
H200 = {"cuda": REPO / "traces" / "cuda", "cuda-full-depth": REPO / "traces" / "cuda-full-depth"}


def test_committed_h200_traces_are_found_labelled_and_kept_by_a_strict_build(scratch: Path) -> None:
    """The H200 traces (committed, not recorded here) sit beside the CPU ones: labelled by GPU, backend and,
    since they would otherwise read alike, their shape; their identities say which rule decided them."""
    with_traces(scratch, "bf16")
    for key, folder in H200.items():
        shutil.copytree(folder, scratch / "traces" / key)
    traces = load_traces(scratch, PIN)
    assert [v.key for v in traces.views] == ["cpu", "cuda", "cuda-full-depth"]
    labels = {v.key: v.label for v in traces.views}
    assert labels == {"cpu": "CPU · bfloat16", "cuda": "H200 · CUDA · bfloat16 · 4 层 layers × 32 词元 tokens",
                      "cuda-full-depth": "H200 · CUDA · bfloat16 · 28 层 layers × 512 词元 tokens"}
    cuda = traces.views[1]
    assert not cuda.rerecordable and cuda.rule_note and cuda.rule_note.startswith("此轨迹的身份由录制时的旧规则判定")
    assert traces.views[0].rule_note is None                     # a CPU trace is recorded again by `make site`
    assert "reference" in cuda.trace.meta and "rule" not in cuda.trace.meta["reference"]
    review = review_traces(traces, strict=True)
    assert review.fatal == () and traces.for_file(QWEN3) == traces.views


def test_rule_note_names_a_recorded_rule_version() -> None:
    trace = mini()
    meta = {**trace.meta, "device": "cuda", "device_name": "NVIDIA H200",
            "reference": {**trace.meta["reference"], "rule": 2}}
    view = TraceView("cuda", dataclasses.replace(trace, meta=meta))
    assert view.rule_note and view.rule_note.startswith("此轨迹的身份由录制时的规则 2 判定") and "rule 2" in view.rule_note


def test_changed_vendor_file_makes_its_values_stale(scratch: Path) -> None:
    with_traces(scratch, "bf16")
    qwen3 = scratch / "vendor/nano-vllm" / QWEN3
    qwen3.write_text("# a new first line moves every line down\n" + qwen3.read_text())
    traces = load_traces(scratch, PIN)
    view = traces.views[0]
    assert view.stale == [QWEN3] and not view.fresh_for(QWEN3) and view.fresh_for("nanovllm/layers/layernorm.py")
    assert traces.for_file(QWEN3) == [] and len(traces.warnings()) == 1
    assert load_traces(scratch, "0" * 40).views[0].pin_moved                 # another upstream pin: all stale


def test_strict_build_refuses_a_stale_trace_in_one_line(scratch: Path, capsys) -> None:
    with_traces(scratch, "bf16")
    qwen3 = scratch / "vendor/nano-vllm" / QWEN3
    qwen3.write_text("# moved\n" + qwen3.read_text())
    vouch_for(scratch, QWEN3)  # as after `vendor update`: the lock vouches for the new bytes, the trace does not
    assert build(scratch) != 0
    err = capsys.readouterr().err
    assert "traces/cpu: made from other bytes of nanovllm/models/qwen3.py" in err and "--force" in err
    assert not (scratch / "site").exists()


def test_non_strict_build_withholds_stale_values(scratch: Path, capsys) -> None:
    with_traces(scratch, "bf16")
    qwen3 = scratch / "vendor/nano-vllm" / QWEN3
    qwen3.write_text("# moved\n" + qwen3.read_text())
    assert build(scratch, "--no-strict") == 0
    page = (scratch / "site/source" / f"{QWEN3}.html").read_text(encoding="utf-8")
    assert "过期 Stale" in page and 'class="an-values"' not in page
    layernorm = (scratch / "site/source/nanovllm/layers/layernorm.py.html").read_text(encoding="utf-8")
    assert 'class="an-values"' in layernorm
    assert "WARNING" in capsys.readouterr().err


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.write_text(p.read_text()[:1000]), "invalid JSON"),
    (lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "version": 99})), "trace format version 99"),
], ids=["truncated", "wrong-version"])
def test_broken_trace_is_one_clear_error(scratch: Path, capsys, damage, message: str) -> None:
    with_traces(scratch, "bf16")
    damage(scratch / "traces/cpu/trace.json")
    with pytest.raises(UserError, match=message):
        load_traces(scratch, PIN)
    assert build(scratch) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and message in err[-1] and "traces/cpu/trace.json" in err[-1]


def test_pages_build_without_traces(scratch: Path) -> None:
    assert build(scratch) == 0
    page = (scratch / "site/source" / f"{QWEN3}.html").read_text(encoding="utf-8")
    assert 'class="an-values"' not in page
    assert "no usable trace" in (scratch / "site/trace/index.html").read_text(encoding="utf-8")


# --- the build's trace policy (review_traces) ------------------------------------------------------


def test_review_of_fresh_traces_is_quiet() -> None:
    assert review_traces(mini_set(), strict=True) == TraceReview()


def test_a_stale_cpu_trace_fails_a_strict_build_and_only_warns_without_strict() -> None:
    traces = mini_set()
    view = traces.views[0]
    stale = type(traces)([dataclasses.replace(view, changed=[QWEN3], stale=[QWEN3])])
    warning = stale.views[0].warning()
    assert warning and "--force" in warning
    assert review_traces(stale, strict=True) == TraceReview(fatal=(warning, REFUSAL_FIX))
    assert review_traces(stale, strict=False) == TraceReview(warnings=(warning,))


def test_a_stale_device_trace_is_a_notice_even_in_a_strict_build() -> None:
    traces = mini_set()
    view = traces.views[0]
    gpu = dataclasses.replace(view.trace, meta={**view.trace.meta, "device": "cuda", "device_name": "NVIDIA H200"})
    stale = type(traces)([dataclasses.replace(view, trace=gpu, changed=[QWEN3], stale=[QWEN3])])
    notice = stale.views[0].warning()
    assert notice and "cannot be recorded again here" not in (review_traces(stale, True).fatal or ("",))[0]
    assert review_traces(stale, strict=True) == TraceReview(notices=(notice,))


def test_a_non_finite_value_fails_a_strict_build_naming_line_and_variable() -> None:
    trace = mini()
    rec = next(r for r in trace.records if r.vars)
    rec.vars[0].norm = float("nan")
    review = review_traces(TraceSet([TraceView("cpu", trace)]), strict=True)
    assert len(review.fatal) == 1 and f"{rec.file}:{rec.line}" in review.fatal[0] and "NaN or infinite" in review.fatal[0]
    assert review_traces(TraceSet([TraceView("cpu", trace)]), strict=False) == TraceReview()


def test_a_match_below_the_margin_fails_a_strict_build_naming_line_and_variable() -> None:
    trace = mini()
    rec, var = next((r, v) for r in trace.records for v in r.vars if v.identity.get("status") == "match"
                    and v.identity.get("margin") is not None)
    var.identity["margin"] = var.identity["required"] * 0.9   # as a hand-edited or mis-recorded trace would say
    review = review_traces(TraceSet([TraceView("cpu", trace)]), strict=True)
    assert len(review.fatal) == 1 and f"{rec.file}:{rec.line}" in review.fatal[0] and f"`{var.name}`" in review.fatal[0]
    assert "margin" in review.fatal[0] and "--force" in review.fatal[0]
    assert review_traces(TraceSet([TraceView("cpu", trace)]), strict=False) == TraceReview()


def test_a_trace_without_margins_fails_a_strict_build() -> None:
    trace = mini()
    for rec in trace.records:
        for var in rec.vars:
            for key in ("margin", "required", "runner_up"):
                var.identity.pop(key, None)
    review = review_traces(TraceSet([TraceView("cpu", trace)]), strict=True)
    assert len(review.fatal) == 1 and "without an identification margin" in review.fatal[0]
