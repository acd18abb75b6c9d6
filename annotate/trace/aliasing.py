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

from annotate.trace.identity import key as key_of
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
    hold their tensors (so no id is reused meanwhile): one frame's locals recur in every record of it."""
    if not recorded:
        return []
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
    if len(candidates) < 2:
        return []
    return _groups(candidates, recorded, {} if keys is None else keys)


def _groups(candidates: list[tuple[str, torch.Tensor]], recorded: set[str], keys: StorageKeys) -> list[AliasGroup]:
    """Every group of two or more of `candidates` that share a storage and hold a recorded name
    (whether they are the same memory, `_same`, is worked out for those only)."""
    facts: list[list[Any]] = []
    for _, t in candidates:
        ident = key_of(t)
        hit = keys.get(ident)
        if hit is None or hit[0] is not t:
            hit = keys[ident] = [t, storage_key(t) if t.numel() else None, None]
        facts.append(hit)
    present = [f[1] for f in facts if f[1] is not None]
    if len(set(present)) == len(present):   # no storage holds two of them: most snapshots
        return []
    groups: dict[tuple[torch.device, int], list[tuple[str, list[Any]]]] = {}
    for (n, _), fact in zip(candidates, facts):
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
