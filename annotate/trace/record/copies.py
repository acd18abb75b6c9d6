"""Copies of recorded tensors, reused while the tensor provably has not changed.

The recorder keeps a copy of every tensor it records, because a later in-place update (nano-vllm
has several: `add_`, `mul_`, compiled bodies that write into their inputs) would otherwise change
what an earlier line shows. Most of those copies repeat one taken a moment before: the tensor a
callee returns is recorded by the callee's `return`, then as the caller's assigned variable, then
as the next callee's argument. Copying it again each time is most of the recorder's cost on CPU.

Reuse has to be exact, and the forward runs under `torch.inference_mode` (as nano-vllm's runner
does), where tensors carry no version counter that could say "unchanged". So reuse is decided
from the code instead: between two recorder events, a copy is kept only when the code that ran in
between is known to write to no tensor —

* the rest of a statement with no call at all (`return x`, `if residual is None:`; see
  `TracedStatement.effect`),
* a one-call statement whose call is a torch.Tensor method that by torch's contract writes
  nothing (`q.view(…)`, `qkv.split(…)`: views, reshapes, dtype conversions; in-place methods end
  in `_`), checked at run time on the actual receiver, with no torch function or dispatch mode
  installed that could reroute it, or
* the part of a one-call statement before or after its call, when that call goes straight to a
  recorded frame or a wrapped compiled function (through nn.Module's call machinery only, with no
  hooks installed anywhere, so that machinery runs nothing else).

Anything else — a call into code the recorder does not see, a compiled function (it may write to
its inputs), an exception — forgets every copy. Copies are keyed by tensor identity (`identity.key`); the table
holds the tensor itself, so its id cannot be handed to another tensor while the entry lives.

A view of a tensor whose copy is still valid (q, k, v split from qkv) is not copied again: its
copy is the same view of the copy (same strides, same offset from the start), which holds the same
bytes.
"""
from __future__ import annotations

from typing import Any

import torch

from annotate.trace.record.identity import key as key_of, storage_key
from annotate.trace.record.sourcemap import TracedStatement

#: torch.Tensor methods that, by torch's naming contract (in-place methods end in `_`), write no
#: tensor: views, reshapes and dtype conversions
READ_ONLY_METHODS = frozenset({
    "view", "view_as", "reshape", "reshape_as", "split", "chunk", "unbind", "flatten", "unflatten",
    "transpose", "permute", "unsqueeze", "squeeze", "expand", "expand_as", "narrow", "select",
    "contiguous", "float", "half", "bfloat16", "double", "to", "type_as", "t",
})


def reads_only(receiver: object, method: str) -> bool:
    """`receiver.method(…)` is a torch.Tensor method that writes nothing (a subclass could override it)."""
    return type(receiver) is torch.Tensor and method in READ_ONLY_METHODS


def clone(t: torch.Tensor) -> torch.Tensor:
    """A copy that later in-place updates cannot reach (no `detach` op unless it is needed:
    under inference mode nothing requires grad, and each op costs microseconds per line)."""
    return t.detach().clone() if t.requires_grad else t.clone()


class CopyCache:
    """Copies taken since the last point where a tensor may have been written, by tensor identity.

    The recorder reports its events in order; each says whether the code run since the previous
    event is proven to write no tensor, and the table is emptied when it is not."""

    def __init__(self, share: bool = True) -> None:
        self.share = share
        #: a negative control for tests only: True keeps copies across possible writes, which is wrong
        #: (tests/test_copies.py shows the stale values it would record)
        self.keep_across_writes = False
        self._copies: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._storages: dict[tuple[torch.device, int], tuple[torch.Tensor, torch.Tensor]] = {}
        self._last: tuple[str, Any] = ("opaque", None)
        self.taken = 0
        self.reused = 0
        self.derived = 0

    def take(self, t: torch.Tensor) -> torch.Tensor:
        """The copy of `t` as it is now: reused if one was taken since the last possible write."""
        ident = key_of(t)
        hit = self._copies.get(ident)
        if hit is not None and hit[0] is t:
            self.reused += 1
            return hit[1]
        if not self.share:
            self.taken += 1
            return clone(t)
        key = storage_key(t)
        copy = self._view_of_copy(t, key) if self._storages else None
        if copy is None:
            copy = clone(t)
            self.taken += 1
            if t.is_contiguous():
                self._storages[key] = (t, copy)
        else:
            self.derived += 1
        self._copies[ident] = (t, copy)
        return copy

    def _view_of_copy(self, t: torch.Tensor, key: tuple[torch.device, int]) -> torch.Tensor | None:
        """`t` (whose storage key is `key`) seen through the copy of a contiguous tensor of the same
        storage that covers it."""
        hit = self._storages.get(key)
        if hit is None:
            return None
        base, copy = hit
        if base.dtype != t.dtype or t.numel() == 0:
            return None
        start = t.storage_offset() - base.storage_offset()
        if start < 0:
            return None
        shape, stride = t.shape, t.stride()
        last = start
        for n, st in zip(shape, stride):   # a plain loop: it runs during the forward
            if st < 0:
                return None
            last += (n - 1) * st
        if last >= base.numel():
            return None
        return copy.as_strided(shape, stride, copy.storage_offset() + start)

    def forget(self) -> None:
        """Something the recorder cannot see ran: no copy may be reused."""
        if self.keep_across_writes:
            return
        self._drop()
        self._last = ("opaque", None)

    def _drop(self) -> None:
        """Empty both tables (by tensor and by storage)."""
        self._copies.clear()
        self._storages.clear()

    # ------------------------------------------------------------ recorder events

    def line(self, frame: Any, finished: TracedStatement | None, read_only_call: bool = False) -> None:
        """A new statement starts in `frame` (or the frame returns); `finished` is the statement
        that just completed there (None at the first line). `read_only_call`: its one call was
        found (at its start) to be a Tensor method that writes nothing. Call before recording
        `finished`."""
        kind, who = self._last
        if who is not frame:
            quiet = False
        elif finished is None:
            quiet = kind == "entry"                      # nothing runs between entry and first line
        elif kind == "line":                             # the whole statement ran since
            quiet = finished.effect == "pure" or (read_only_call and finished.effect == "one-call")
        else:
            quiet = kind == "returned" and finished.effect == "one-call"   # only its tail ran since
        if not quiet:
            self._drop()
        self._last = ("line", frame)

    def entered(self, frame: Any, caller: Any, direct: bool) -> None:
        """A recorded frame (or a wrapped compiled function) starts, called from `caller`'s
        current statement; `direct`: through nn.Module's call machinery at most."""
        kind, who = self._last
        stmt = getattr(caller, "current", None)
        quiet = direct and who is caller and kind == "line" and stmt is not None and stmt.effect == "one-call"
        if not quiet:
            self._drop()
        self._last = ("entry", frame)

    def returned(self, caller: Any, direct: bool) -> None:
        """A recorded frame (or wrapped function) has produced its result for `caller`."""
        self._last = ("returned", caller) if direct and caller is not None else ("opaque", None)

    def clear(self) -> None:
        """Start afresh (a new recording, or a replay)."""
        self.forget()
        self.taken = self.reused = self.derived = 0
