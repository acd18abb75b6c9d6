"""Which recorded names share memory: alias groups, worked out from a frame's locals.

Two names alias when their tensors live in one storage (views: q, k, v split from qkv); they are
"the same memory" when pointer, shape, strides and dtype agree too (`residual = x.to(x.dtype)`
returns `x` itself in float32). The recorder keeps each statement's locals by reference and calls
this once the forward is over; holding the tensors keeps their storages from being reused, so the
answer is the one that held at the statement.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from annotate.trace.numerics import storage_key


@dataclass
class AliasGroup:
    """Variables whose tensors share one storage.

    `same` lists the names that are literally the same memory (same pointer, shape and strides)
    as another name in the group — e.g. `residual` and `x` after `residual = x.to(orig_dtype)` in
    float32, where `.to` returns `x` itself. Views of disjoint slices (q, k, v of qkv) are not.
    """

    names: list[str]
    same: list[str]


def tensors(value: Any, name: str) -> list[tuple[str, torch.Tensor]]:
    """A tensor, or the tensors of a tuple/list, named `name` / `name[i]`."""
    if isinstance(value, torch.Tensor):
        return [(name, value)]
    if isinstance(value, (tuple, list)):
        return [(f"{name}[{i}]", v) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
    return []


def same_memory(members: list[tuple[str, torch.Tensor]]) -> list[str]:
    """Names whose tensor has the same pointer, shape and strides as another member's."""
    by_view: dict[tuple, list[str]] = {}
    for n, t in members:
        by_view.setdefault((t.data_ptr(), tuple(t.shape), t.stride(), t.dtype), []).append(n)
    return sorted(n for names in by_view.values() if len(names) > 1 for n in names)


#: storage keys by tensor identity, for one pass over snapshots (see `alias_groups`)
StorageKeys = dict[int, tuple[torch.Tensor, "tuple[torch.device, int] | None"]]


def alias_groups(f_locals: dict[str, Any], retval: Any, recorded: set[str],
                 keys: StorageKeys | None = None) -> list[AliasGroup]:
    """Names (locals and return values) sharing storage, in groups touching a recorded name.

    ``keys``: storage keys by tensor identity, shared by the calls of one pass over snapshots that
    hold their tensors (so no id is reused meanwhile): one frame's locals recur in every record of it."""
    if not recorded:
        return []
    candidates = [(k, v) for k, v in f_locals.items() if isinstance(v, torch.Tensor)]
    candidates += [(n, t) for k, v in f_locals.items() if isinstance(v, (tuple, list)) and k != "self"
                   for n, t in tensors(v, k)]
    if retval is not None:
        candidates += tensors(retval, "return")
    if len(candidates) < 2:
        return []
    return [g for g in _all_groups(candidates, {} if keys is None else keys) if any(n in recorded for n in g.names)]


def _all_groups(candidates: list[tuple[str, torch.Tensor]], keys: StorageKeys) -> list[AliasGroup]:
    """Every group of two or more of `candidates` that share a storage."""
    groups: dict[tuple[torch.device, int], list[tuple[str, torch.Tensor]]] = {}
    for n, t in candidates:
        hit = keys.get(id(t))
        if hit is None or hit[0] is not t:
            hit = keys[id(t)] = (t, storage_key(t) if t.numel() else None)
        if hit[1] is not None:
            groups.setdefault(hit[1], []).append((n, t))
    return [AliasGroup(sorted(n for n, _ in members), same_memory(members))
            for members in groups.values() if len(members) > 1]
