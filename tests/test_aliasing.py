"""annotate.trace.record.aliasing: names sharing one storage, and names that are one tensor."""
from __future__ import annotations

import torch

from annotate.trace.record.aliasing import alias_groups, tensors


def test_views_alias_without_being_the_same_memory() -> None:
    qkv = torch.zeros(4, 6)
    q, k, v = qkv.split([2, 2, 2], dim=-1)
    (group,) = alias_groups({"qkv": qkv, "q": q, "k": k, "v": v, "x": torch.ones(3)}, None, {"q"})
    assert group.names == ["k", "q", "qkv", "v"] and group.same == []


def test_to_the_same_dtype_is_the_same_memory() -> None:
    x = torch.zeros(3)
    residual = x.to(torch.float32)               # returns x itself: nano-vllm's float32 hazard
    (group,) = alias_groups({"x": x, "residual": residual}, None, {"residual"})
    assert group.same == ["residual", "x"]


def test_only_groups_touching_a_recorded_name_and_return_values_count() -> None:
    a = torch.zeros(4)
    b = a.view(2, 2)
    c = torch.ones(2)
    assert alias_groups({"a": a, "b": b}, None, {"z"}) == []
    (group,) = alias_groups({"c": c}, (c, a), {"c"})
    assert group.names == ["c", "return[0]"] and group.same == ["c", "return[0]"]
    assert alias_groups({"e": torch.zeros(0), "f": torch.zeros(0)}, None, {"e"}) == []


def test_tensors_of_a_value() -> None:
    t = torch.zeros(1)
    assert tensors(t, "x") == [("x", t)]
    assert [n for n, _ in tensors((t, 3, t), "out")] == ["out[0]", "out[2]"]
    assert tensors(None, "x") == []


def test_shared_storage_keys_give_the_same_groups() -> None:
    """Keys kept across the snapshots of one pass (one frame's locals recur) change no group,
    and a snapshot with nothing recorded has none."""
    qkv = torch.arange(12.0).reshape(3, 4)
    q, k = qkv.split(2, dim=-1)
    snapshots = [({"qkv": qkv, "q": q}, None, {"q"}), ({"qkv": qkv, "q": q, "k": k}, (q, k), {"k"}),
                 ({"qkv": qkv, "q": q}, None, set())]
    keys: dict = {}
    shared = [alias_groups(f, r, names, keys) for f, r, names in snapshots]
    assert shared == [alias_groups(f, r, names) for f, r, names in snapshots]
    assert shared[1][0].names == ["k", "q", "qkv", "return[0]", "return[1]"] and shared[2] == []
    assert len(keys) == 3
