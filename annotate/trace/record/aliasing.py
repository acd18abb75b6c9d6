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

from annotate.trace.record.identity import key as key_of, storage_key


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


def _view(t: torch.Tensor) -> tuple[Any, ...]:
    """What makes two tensors literally the same memory: pointer, shape, strides and dtype."""
    return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype)


def _same(views: list[tuple[str, tuple[Any, ...]]]) -> list[str]:
    """Names whose tensor has the same view (`_view`: pointer, shape, strides, dtype) as another's."""
    by_view: dict[tuple[Any, ...], list[str]] = {}
    for n, v in views:
        by_view.setdefault(v, []).append(n)
    return sorted(n for names in by_view.values() if len(names) > 1 for n in names)


#: what one pass over snapshots learns of each tensor, by identity (`identity.key`; see
#: `alias_groups`): [the tensor, its storage key (None when empty), its `_view` once asked for]
StorageKeys = dict[int, list[Any]]


def alias_groups(f_locals: dict[str, Any], retval: Any, recorded: set[str],
                 keys: StorageKeys | None = None) -> list[AliasGroup]:
    """Names (locals and return values) sharing storage, in groups touching a recorded name.

    ``keys``: storage keys by tensor identity, shared by the calls of one pass over snapshots that
    hold their tensors (so no id is reused meanwhile): one frame's locals recur in every record of it.

    One pass over the candidates (plain tensors, then the tensors of tuples and lists, then the
    return value's) notes whether any storage holds two of them; most snapshots have none, and
    return before any grouping (this runs for every record of a trace)."""
    if not recorded:
        return []
    keys = {} if keys is None else keys
    candidates: list[tuple[str, torch.Tensor]] = []
    inside: list[tuple[str, torch.Tensor]] = []   # the tensors of tuples and lists, after the plain ones
    for k, v in f_locals.items():
        if isinstance(v, torch.Tensor):
            candidates.append((k, v))
        elif isinstance(v, (tuple, list)) and k != "self":
            inside += tensors(v, k)
    candidates += inside
    if retval is not None:
        candidates += tensors(retval, "return")
    names: list[str] = []
    facts: list[list[Any]] = []
    seen: set[tuple[torch.device, int]] = set()
    shared = False
    for k, t in candidates:
        fact = _fact(t, keys)
        names.append(k)
        facts.append(fact)
        sk = fact[1]
        if sk is not None:
            if sk in seen:
                shared = True
            else:
                seen.add(sk)
    if not shared:   # no storage holds two of them: most snapshots
        return []
    return _groups(names, facts, recorded)


def _fact(t: torch.Tensor, keys: StorageKeys) -> list[Any]:
    """What this pass knows of `t` (see :data:`StorageKeys`), worked out on first sight."""
    hit = keys.get(key_of(t))
    if hit is None or hit[0] is not t:
        hit = keys[key_of(t)] = [t, storage_key(t) if t.numel() else None, None]
    return hit


def _groups(names: list[str], facts: list[list[Any]], recorded: set[str]) -> list[AliasGroup]:
    """Every group of two or more candidates (`names` with their `facts`) that share a storage and
    hold a recorded name (whether they are the same memory, `_same`, is worked out for those only)."""
    groups: dict[tuple[torch.device, int], list[tuple[str, list[Any]]]] = {}
    for n, fact in zip(names, facts):
        if fact[1] is not None:
            groups.setdefault(fact[1], []).append((n, fact))
    out = []
    for members in groups.values():
        if len(members) > 1 and any(n in recorded for n, _ in members):
            for _, fact in members:
                if fact[2] is None:
                    fact[2] = _view(fact[0])
            out.append(AliasGroup(sorted(n for n, _ in members), _same([(n, fact[2]) for n, fact in members])))
    return out
