"""Computed claims: values from the vendored code, page expansion, errors, cache, and vendor edits.

The vendored code runs in a child process (annotate.lesson.compute), so a scratch project root
with an edited vendor copy and the real root can both be computed in this one test process.
"""
from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from annotate import claims
from annotate.errors import UserError
from annotate.lesson import cache
from annotate.lesson.table import load_table
from annotate.project import Project

REPO = Path(__file__).resolve().parents[1]
VENDOR = REPO / "vendor" / "nano-vllm"

needs_vendor = pytest.mark.skipif(not (VENDOR / "nanovllm" / "models" / "qwen3.py").is_file(),
                                  reason="vendor/nano-vllm is not materialised; run `annotate vendor sync`")


def value(name: str, root: Path = REPO):
    return load_table(root).claims[name].value


def scratch(tmp_path: Path) -> Path:
    """A project root holding only a copy of the vendored code and the lock."""
    root = tmp_path / "project"
    (root / "vendor").mkdir(parents=True)
    shutil.copy2(REPO / "vendor" / "nano-vllm.lock.json", root / "vendor" / "nano-vllm.lock.json")
    shutil.copytree(VENDOR, root / "vendor" / "nano-vllm", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def edit(root: Path, rel: str, old: str, new: str, count: int = 1) -> None:
    """Replace ``old`` by ``new`` in a vendored file, exactly ``count`` times."""
    path = root / "vendor" / "nano-vllm" / rel
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == count, (rel, old, text.count(old))
    path.write_text(text.replace(old, new), encoding="utf-8")


def failure(markdown: str, root: Path) -> str:
    with pytest.raises(UserError) as caught:
        claims.expand(markdown, "lesson.md", root)
    message = str(caught.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------- values from the real vendor

@needs_vendor
def test_rmsnorm_worked_example_is_computed_by_the_vendored_rmsnorm() -> None:
    assert value("rmsnorm.example.mean_sq") == 12.5
    assert value("rmsnorm.example.rms") == pytest.approx(3.5355, abs=5e-5)
    assert value("rmsnorm.example.output") == pytest.approx([0.8485, 1.1314], abs=5e-5)
    page = "均方 {{= rmsnorm.example.mean_sq }}，RMS ≈ {{= rmsnorm.example.rms }}，输出 ≈ {{= rmsnorm.example.output }}"
    assert claims.expand(page, "lesson.md", REPO) == "均方 12.5，RMS ≈ 3.5355，输出 ≈ [0.8485, 1.1314]"


@needs_vendor
def test_rmsnorm_variants_and_fused_path() -> None:
    assert value("rmsnorm.eps1.output") == pytest.approx([3 / math.sqrt(13.5), 4 / math.sqrt(13.5)], abs=1e-6)
    assert value("rmsnorm.gamma.output") == pytest.approx([2 * 3 / math.sqrt(12.5), 0.5 * 4 / math.sqrt(12.5)], abs=1e-6)
    assert value("rmsnorm.fused.residual") == [3.0, 4.0]  # bf16: the sum, kept before normalising
    assert value("rmsnorm.fused.output") == pytest.approx([0.8485, 1.1314], abs=2 ** -7)
    # float32: residual aliases x and comes back normalised (the lesson's aside)
    assert value("rmsnorm.fused_fp32.residual") == pytest.approx([0.8485, 1.1314], abs=5e-5)


@needs_vendor
def test_mlp_parameter_counts_are_3hf() -> None:
    assert value("mlp.h1024_f3072.params") == 3 * 1024 * 3072 == 9437184
    assert value("mlp.h8_f16.params") == 3 * 8 * 16 == 384
    assert value("mlp.h1024_f3072.gate_up_shape") == "6144 × 1024"
    assert value("mlp.h1024_f3072.down_shape") == "1024 × 3072"
    assert claims.expand("{{= mlp.h1024_f3072.params:, }} / {{= mlp.h8_f16.params }}", "x.md", REPO) == "9,437,184 / 384"


@needs_vendor
def test_swiglu_walkthrough_matches_plain_torch() -> None:
    import torch

    t = load_table(REPO).claims
    h, f = t["swiglu.h"].value, t["swiglu.f"].value
    assert (h, f) == (4, 6)
    x = torch.tensor([t["swiglu.x"].value])
    w_gate = torch.tensor([t[f"swiglu.w_gate_row{j}"].value for j in range(f)])
    w_up = torch.tensor([t[f"swiglu.w_up_row{j}"].value for j in range(f)])
    w_down = torch.tensor([t[f"swiglu.w_down_row{i}"].value for i in range(h)])
    gate, up = (x @ w_gate.T)[0], (x @ w_up.T)[0]
    gate_up = t["swiglu.gate_up"].value
    assert len(gate_up) == 2 * f
    assert gate_up[:f] == pytest.approx(gate.tolist(), abs=1e-6)
    assert gate_up[f:] == pytest.approx(up.tolist(), abs=1e-6)
    assert t["swiglu.gate"].value == pytest.approx(gate.tolist(), abs=1e-6)
    assert t["swiglu.up"].value == pytest.approx(up.tolist(), abs=1e-6)
    silu = gate * torch.sigmoid(gate)
    assert t["swiglu.silu"].value == pytest.approx(silu.tolist(), abs=1e-6)
    product = silu * up
    assert t["swiglu.product"].value == pytest.approx(product.tolist(), abs=1e-6)
    assert sum(t["swiglu.down_terms0"].value) == pytest.approx(t["swiglu.out"].value[0], abs=1e-6)
    assert t["swiglu.out"].value == pytest.approx((product @ w_down.T).tolist(), abs=1e-6)
    assert all(c.problem is None for c in t.values())


@needs_vendor
def test_lesson_and_reference_pages_expand_cleanly() -> None:
    assert claims.scan_claims(Project.load(REPO)) == []
    text = (REPO / "docs" / "lesson.md").read_text(encoding="utf-8")
    out = claims.expand(text, "lesson.md", REPO)
    assert "{{=" not in out.replace("`{{=", "")
    assert out.count("\n") == text.count("\n")  # one line per placeholder: [[…]] line numbers stay put


# ---------------------------------------------------------------- syntax and errors

@needs_vendor
def test_unknown_claim_names_page_line_and_claim() -> None:
    message = failure("intro\n\nRMS is {{= rmsnorm.example.rmss }}", REPO)
    assert message.startswith("docs/lesson.md:3: unknown claim rmsnorm.example.rmss")
    assert "rmsnorm.example.rms" in message  # suggestion


@needs_vendor
def test_bad_index_and_spec_are_one_line_errors() -> None:
    assert "index [9] out of range" in failure("{{= swiglu.gate[9] }}", REPO)
    assert "bad format spec" in failure("{{= vendor.commit_short:.2f }}", REPO)


def test_malformed_placeholder_fails_before_computing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "load_claims", lambda root: pytest.fail("computed"))
    message = failure("a\n{{= RMS }}", REPO)
    assert message.startswith("docs/lesson.md:2: placeholder {{= RMS }} is not")


def test_code_is_left_alone_and_pages_without_claims_compute_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "load_claims", lambda root: pytest.fail("computed"))
    page = "write `{{= mlp.h8_f16.params }}` like this\n\n```\n{{= anything.goes }}\n```\n"
    assert claims.expand(page, "writing.md", REPO) == page
    assert claims.expand("no claims here", "index.md", REPO) == "no claims here"


def test_expanding_a_page_without_claims_does_not_import_torch() -> None:
    code = ("import sys; from pathlib import Path; from annotate import claims; "
            "claims.expand('plain page', 'p.md', Path('.')); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"


def test_format_value() -> None:
    assert claims.format_value(12.5) == "12.5"
    assert claims.format_value(3.5355339059327378) == "3.5355"
    assert claims.format_value(-0.0) == "0"
    assert claims.format_value([0.14999999, -0.85, 2.0]) == "[0.15, -0.85, 2]"
    assert claims.format_value([[1.0, 2.0], [3.0, 4.0]]) == "[1, 2]; [3, 4]"  # never "[[", which is a reference
    assert claims.format_value(9437184, ",") == "9,437,184"
    assert claims.format_value([1.0, 2.0], ".2f") == "[1.00, 2.00]"


# ---------------------------------------------------------------- cache

@needs_vendor
def test_cache_is_keyed_by_vendored_file_hashes_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = scratch(tmp_path)
    key, data = cache.load_claims(root)
    path = cache.cache_path(root, key)
    assert path.is_file() and json.loads(path.read_text())["claims"]["mlp.h8_f16.params"]["value"] == 384
    monkeypatch.setattr(cache, "run_child", lambda root: pytest.fail("recomputed despite the cache"))
    assert cache.load_claims(root) == (key, data)
    assert cache.cache_key(root) == key  # same bytes, same key
    (root / "vendor/nano-vllm/nanovllm/layers/activation.py").write_text(
        (root / "vendor/nano-vllm/nanovllm/layers/activation.py").read_text() + "\n# touched\n")
    assert cache.cache_key(root) != key


def test_the_key_covers_the_trace_code_the_traced_family_reads_through() -> None:
    """(It once covered only annotate/lesson/: a change to how traces are read or how the checkpoint's
    weights are regenerated kept serving the old traced.* numbers.)"""
    package = Path(cache.__file__).resolve().parents[1]
    names = {p.relative_to(package).as_posix() for p in cache.code_files()}
    assert {"lesson/traced.py", "trace/format/store.py", "trace/model/runtime.py", "trace/model/numerics.py"} <= names


@needs_vendor
def test_a_new_key_prunes_the_cache_files_of_earlier_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = scratch(tmp_path)
    stale = cache.cache_path(root, "0" * 64)
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("{}")
    other = stale.parent / "notes.json"   # not a claims file: left alone
    other.write_text("{}")
    monkeypatch.setattr(cache, "run_child", lambda root: {"claims": {}})
    key, _ = cache.load_claims(root)
    assert sorted(p.name for p in stale.parent.iterdir()) == sorted([cache.cache_path(root, key).name, "notes.json"])


def test_missing_vendor_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="vendored nano-vllm is missing"):
        claims.expand("{{= mlp.h8_f16.params }}", "lesson.md", tmp_path)


# ---------------------------------------------------------------- change the vendored file, watch the claims

@needs_vendor
def test_a_bias_in_the_vendored_mlp_fails_the_3hf_claim(tmp_path: Path) -> None:
    root = scratch(tmp_path)
    before = cache.cache_key(root)
    edit(root, "nanovllm/models/qwen3.py", "            intermediate_size,\n            hidden_size,\n            bias=False,",
         "            intermediate_size,\n            hidden_size,\n            bias=True,")
    assert cache.cache_key(root) != before  # the edit invalidates the cache
    message = failure("{{= mlp.h1024_f3072.params }}", root)
    assert message.startswith("docs/lesson.md:1: claim mlp.h1024_f3072.params no longer holds:")
    assert "gives 9438208, but 3·H·F is 9437184" in message
    assert "gives 392" in failure("{{= mlp.h8_f16.params }}", root)
    # the real project root, computed in the same test process, is untouched
    assert value("mlp.h1024_f3072.params", REPO) == 9437184
    # non-strict builds show a marker instead of failing
    marked = claims.expand("x {{= mlp.h8_f16.params }}", "lesson.md", root, strict=False)
    assert 'class="an-claim-broken"' in marked and "no longer holds" in marked


@needs_vendor
def test_a_changed_eps_use_in_the_vendored_rmsnorm_fails_the_eps_claim(tmp_path: Path) -> None:
    root = scratch(tmp_path)
    edit(root, "nanovllm/layers/layernorm.py", "torch.rsqrt(var + self.eps)", "torch.rsqrt(var + 2 * self.eps)", count=2)
    # ε = 0 in the main example: still true, same numbers
    assert claims.expand("{{= rmsnorm.example.output }}", "lesson.md", root) == "[0.8485, 1.1314]"
    # ε = 1: the vendored code now computes 1/√14.5, the formula says 1/√13.5
    assert value("rmsnorm.eps1.output", root) == pytest.approx([3 / math.sqrt(14.5), 4 / math.sqrt(14.5)], abs=1e-6)
    message = failure("a\nb\n输出 ≈ {{= rmsnorm.eps1.output }}", root)
    assert message.startswith("docs/lesson.md:3: claim rmsnorm.eps1.output no longer holds: the vendored RMSNorm gives [0.7878, 1.0505]")
    assert "the closed form" in message and "[0.8165, 1.0887]" in message


@needs_vendor
def test_a_vendored_mlp_that_no_longer_builds_names_the_claim_and_the_cause(tmp_path: Path) -> None:
    root = scratch(tmp_path)
    edit(root, "nanovllm/models/qwen3.py", 'assert hidden_act == "silu"', 'assert hidden_act == "gelu"')
    message = failure("{{= swiglu.out }}", root)
    assert message.startswith("docs/lesson.md:1: claim swiglu.out could not be computed from the vendored code")
    assert "AssertionError" in message and "models/qwen3.py:" in message
    assert claims.expand("{{= rmsnorm.example.mean_sq }}", "lesson.md", root) == "12.5"  # other families still hold
