"""The list of upstreams is the set of vendor/*.lock.json files; each path belongs to exactly one."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from annotate.errors import UserError
from annotate.vendoring.registry import NANO_VLLM, Registry, Vendor, vendors

REPO = Path(__file__).resolve().parents[1]


def test_the_project_lists_three_upstreams_primary_first() -> None:
    assert [v.name for v in vendors(REPO)] == ["nano-vllm", "transformers", "vllm"]
    assert (NANO_VLLM.lock_name, NANO_VLLM.dir) == ("vendor/nano-vllm.lock.json", "vendor/nano-vllm")
    assert (Vendor("vllm").lock_name, Vendor("vllm").dir) == ("vendor/vllm.lock.json", "vendor/vllm")
    reg = Registry(REPO)
    assert reg.owner("transformers/models/qwen3/modeling_qwen3.py").name == "transformers"
    assert reg.owner("vllm/model_executor/models/qwen3.py").name == "vllm"
    assert reg.owner("nanovllm/models/qwen3.py") == NANO_VLLM
    assert reg.file("vllm/ir/ops/layernorm.py") == REPO / "vendor/vllm/vllm/ir/ops/layernorm.py"


def test_two_upstreams_sharing_a_path_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "vendor").mkdir()
    shutil.copy2(REPO / NANO_VLLM.lock_name, tmp_path / NANO_VLLM.lock_name)
    hf = json.loads((REPO / "vendor/transformers.lock.json").read_text(encoding="utf-8"))
    facts = hf["upstream"]["files"].pop("transformers/models/qwen3/modeling_qwen3.py")
    hf["upstream"]["files"]["nanovllm/models/qwen3.py"] = facts
    hf["source"]["files"] = {"nanovllm/models/qwen3.py": "0" * 64}
    hf["source"]["include"] = ["nanovllm/models/qwen3.py"]
    (tmp_path / "vendor/other.lock.json").write_text(json.dumps(hf), encoding="utf-8")
    with pytest.raises(UserError, match=r"^vendor/other\.lock\.json: nanovllm/models/qwen3\.py is also vendored by "
                                        r"vendor/nano-vllm\.lock\.json; two upstreams cannot share a path"):
        Registry(tmp_path)
