"""Lock I/O: facts round-trip, hashes match git, and every malformed lock is one clear error."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from annotate.errors import UserError
from annotate.vendoring.lock import LOCK_NAME, blob_id, line_hashes, lock_from_json, read_lock, write_lock

REPO = Path(__file__).resolve().parents[1]


def test_committed_lock_pins_upstream_and_wheel() -> None:
    lock = read_lock(REPO / LOCK_NAME)
    assert lock.upstream.repo == "https://github.com/GeeeekExplorer/nano-vllm"
    assert lock.upstream.commit == "2f214426530e2841e7d24c73ee0dfa914d62df56"
    assert lock.source.kind == "wheel"
    assert (lock.source.name, lock.source.version) == ("nano-vllm-fork", "20260210")
    assert lock.source.sha256 == "05b49af60882bec08d2fb530ea23cecd529f14713fae1f9ac45f18e5638a4881"
    assert "nanovllm/models/qwen3.py" in lock.source.files


def test_lock_matches_shared_upstream_facts() -> None:
    facts = REPO.parent / "shared" / "upstream" / "nano-vllm-2f214426.json"
    if not facts.is_file():
        pytest.skip("shared upstream facts not laid beside this checkout")
    shared = json.loads(facts.read_text())
    lock = read_lock(REPO / LOCK_NAME)
    for path, f in shared["files"].items():
        assert lock.upstream.files[path].blob == f["blob"]
        assert list(lock.upstream.files[path].line_hashes) == f["line_sha256_16"]


def test_round_trip(tmp_path: Path) -> None:
    lock = read_lock(REPO / LOCK_NAME)
    write_lock(tmp_path / "lock.json", lock)
    assert read_lock(tmp_path / "lock.json") == lock


def test_blob_id_equals_git_hash_object(tmp_path: Path) -> None:
    data = b"import torch\r\nx = 1\n\nno newline at end"
    (tmp_path / "f").write_bytes(data)
    expected = subprocess.run(["git", "hash-object", str(tmp_path / "f")], capture_output=True, text=True,
                              check=True).stdout.strip()
    assert blob_id(data) == expected


def test_line_hashes_exclude_line_endings() -> None:
    assert line_hashes(b"a\nb\n") == line_hashes(b"a\r\nb")
    assert len(line_hashes(b"a\n\n")) == 2
    assert line_hashes(b"")== []


def test_missing_lock(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="lock file missing"):
        read_lock(tmp_path / "nope.json")


@pytest.mark.parametrize("name", ["vllm", "transformers"])
def test_a_broken_lock_names_its_own_file_in_the_fix(tmp_path: Path, name: str) -> None:
    """Each upstream's lock says how to restore *that* lock, not nano-vllm's."""
    path = tmp_path / "vendor" / f"{name}.lock.json"
    with pytest.raises(UserError, match=rf"git checkout -- vendor/{name}\.lock\.json`$"):
        read_lock(path)
    path.parent.mkdir()
    path.write_text("{")
    with pytest.raises(UserError, match=rf"invalid JSON .*git checkout -- vendor/{name}\.lock\.json`$"):
        read_lock(path)


def test_malformed_json_names_position(tmp_path: Path) -> None:
    path = tmp_path / "lock.json"
    path.write_text('{\n "format": 1,\n "upstream": {,\n}')
    with pytest.raises(UserError, match=r"lock\.json:3:15: invalid JSON"):
        read_lock(path)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("source"), r"\$\.source: missing; expected an object"),
        (lambda d: d["upstream"].pop("commit"), r"\$\.upstream\.commit: missing"),
        (lambda d: d["source"].pop("sha256"), r"\$\.source\.sha256: missing"),
        (lambda d: d["source"].update(kind="ftp"), "source.kind 'ftp' is unknown"),
        (lambda d: d.update(format=99), "lock format 99 is not supported"),
        (lambda d: d["upstream"]["files"]["LICENSE"].pop("blob"), r"\$\.upstream\.files\.LICENSE\.blob: missing"),
        (lambda d: d["upstream"].update(repo="javascript:alert(1)//x"), r"\$\.upstream\.repo: expected an https:// URL"),
        (lambda d: d["upstream"].update(repo=None), r"\$\.upstream\.repo: expected an https:// URL.*got null"),
        (lambda d: d["upstream"].update(commit=12), r"\$\.upstream\.commit: expected a full 40-hex commit, got 12"),
        (lambda d: d["upstream"].update(files=[]), r"\$\.upstream\.files: expected an object, got a list"),
        (lambda d: d["upstream"]["files"]["LICENSE"].update(bytes="lots"), r"LICENSE\.bytes: expected an integer, got \"lots\""),
        (lambda d: d["upstream"]["files"]["LICENSE"].update(line_sha256_16=["abc"]),
         r"LICENSE\.line_sha256_16\[0\]: expected 16 lowercase hex digits"),
        (lambda d: d["upstream"]["files"].update({"../../etc/hostname": d["upstream"]["files"]["LICENSE"]}),
         r"expected a relative POSIX path inside the vendor folder"),
        (lambda d: d["source"].update(kind="git", url="--upload-pack=x", commit="0" * 40),
         r"\$\.source\.url: expected a git URL or a local path"),
        (lambda d: d["source"]["files"].pop("LICENSE"), r"\$\.source\.files: expected an entry for every upstream file"),
    ],
)
def test_missing_keys_are_named(mutate, message: str) -> None:
    data = json.loads((REPO / LOCK_NAME).read_text())
    mutate(data)
    with pytest.raises(UserError, match=message):
        lock_from_json(data)


def test_tag_pinned_locks_of_hf_and_vllm() -> None:
    """HF transformers and vLLM are pinned by wheel sha256 and tag; permalinks put the repo folder back."""
    hf = read_lock(REPO / "vendor/transformers.lock.json")
    path = "transformers/models/qwen3/modeling_qwen3.py"
    assert hf.upstream.commit == "" and hf.upstream.ref == "v4.57.6" and hf.source.include == (path,)
    assert hf.source.sha256 == "4c9e9de11333ddfe5114bc872c9f370509198acf0b87a832a0ab9458e2bd0550"
    assert hf.upstream.files[path].blob == "81b16c4ee6b6eb30acc531bf8cddd31d07065ac1"
    assert len(hf.upstream.files[path].line_hashes) == 528
    assert hf.upstream.permalink(path, 270) == (
        "https://github.com/huggingface/transformers/blob/v4.57.6/src/transformers/models/qwen3/modeling_qwen3.py#L270")
    vllm = read_lock(REPO / "vendor/vllm.lock.json")
    assert vllm.source.sha256 == "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa"
    assert vllm.upstream.built_from == "4ba787ec9" and "4ba787ec9" in vllm.upstream.pin_words
    assert vllm.upstream.files["vllm/model_executor/models/qwen3.py"].blob.startswith("31d1a094")


def test_a_lock_without_commit_needs_a_tag() -> None:
    data = json.loads((REPO / "vendor/transformers.lock.json").read_text(encoding="utf-8"))
    del data["upstream"]["tag"]
    with pytest.raises(UserError, match=r"\$\.upstream\.commit: expected a full 40-hex commit"):
        lock_from_json(data, "t.lock.json")
    data = json.loads((REPO / "vendor/transformers.lock.json").read_text(encoding="utf-8"))
    data["source"]["include"] = ["../etc/passwd"]
    with pytest.raises(UserError, match=r"include"):
        lock_from_json(data, "t.lock.json")
