"""The traces the site shows: found under ``traces/``, loaded, labelled, and checked against the vendor.

A trace belongs to the vendored bytes it was made from. When the vendor pin or any traced file's
bytes differ from the current ``vendor/nano-vllm`` copy, its values could sit on the wrong lines,
so those files' values are withheld and the build *warns* (one line per trace). MkDocs turns a
warning into a failure under ``--strict`` — which is what ``annotate build`` and ``make site`` use —
so a stale trace is refused there; ``annotate trace --if-stale`` (the Makefile's ``trace`` step)
re-runs the default traces, so the default flow never meets one. ``annotate build --no-strict``
shows the fresh files and marks the stale ones.

Traces of format 2 carry per-line hashes: their records are placed on today's lines through a line
map (annotate/trace/format/placement.py) instead of being withheld, and the lines that are gone are shown
as "recorded at <pin>". A committed device (GPU) trace cannot be recorded again on this machine, so
its warning is a notice: the strict build reports it and goes on (`TraceSet.notices`), while a stale
CPU trace is still refused (`TraceSet.refusals`).

A truncated or wrong-version ``trace.json`` raises the store's one-line :class:`UserError`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from annotate.project import Project
from annotate.trace.format.store import Trace, find_traces, load_trace
from annotate.trace.format.validate import non_finite, weak_identity
from annotate.vendoring.lock import VENDOR_DIR, sha256_bytes
from annotate.vendoring.sync import local_hashes

DEFAULT_KEY = "cpu"   # the Makefile's default trace: traces/cpu (bfloat16)
DEVICE_NAMES = {"cpu": "CPU", "cuda": "CUDA"}
#: the logger of what a build reports about traces without failing (outside MkDocs' loggers, so even a
#: strict build only prints it): stale device traces, lesson values a non-default trace lacks
NOTICE_LOGGER = "annotate.traces"


@dataclass
class TraceView:
    """One trace as the site shows it: its key (folder name), label and stale files."""

    key: str
    trace: Trace
    stale: list[str] = field(default_factory=list)   # recorded files that changed: their values are withheld
    changed: list[str] = field(default_factory=list)  # every vendored file that changed since the trace
    pin_moved: bool = False                          # made at another upstream commit: all files stale
    with_shape: bool = False                         # the label names the shape (another trace reads the same without)

    @property
    def where(self) -> str:
        """The trace's folder as messages name it (``traces/cpu``)."""
        return f"{Project.TRACES_DIR}/{self.key}"

    @property
    def device(self) -> str:
        return str(self.trace.meta["device"])

    @property
    def dtype(self) -> str:
        return str(self.trace.meta["dtype"])

    @property
    def label(self) -> str:
        """What the trace switch shows: `CPU · bfloat16`, `H200 · CUDA · bfloat16`, `CPU · float32 · 别名演示
        aliasing run` (a float32 run whose trace flagged aliasing: the hazard it is shown for), and the shape
        (`28 层 layers × 512 词元 tokens`) when another trace of the set would read the same without it."""
        model = self.trace.meta["model"]
        extra = "" if model["name"] == "qwen3-0.6b" else f" · {model['name']}"
        tp = f" · TP={self.trace.tp}" if self.trace.tp > 1 else ""
        alias = " · 别名演示 aliasing run" if self.dtype == "float32" and self.aliasing_run else ""
        return f"{self.device_words} · {self.dtype}{extra}{tp}{alias}" + (f" · {self.shape_words}" if self.with_shape else "")

    @property
    def device_words(self) -> str:
        """`CPU`, or a device trace's GPU and backend: `H200 · CUDA` (the maker's name dropped)."""
        if self.device == "cpu":
            return "CPU"
        gpu = str(self.trace.meta.get("device_name") or "").removeprefix("NVIDIA ").strip()
        backend = DEVICE_NAMES.get(self.device, self.device.upper())
        return f"{gpu} · {backend}" if gpu else backend

    @property
    def shape_words(self) -> str:
        """`28 层 layers × 512 词元 tokens`: the run's depth and length, Chinese first."""
        meta = self.trace.meta
        return f"{meta['model']['layers']} 层 layers × {meta['input']['tokens']} 词元 tokens"

    @property
    def aliasing_run(self) -> bool:
        """Whether the trace flagged aliasing (float32's `.float()` returning the same tensor)."""
        return any(f.get("kind") == "aliasing" for f in self.trace.flags)

    @property
    def rule_note(self) -> str | None:
        """For a device trace (it cannot be recorded again here), Chinese first: its identities are the ones
        the identification rule of its recording decided (the rule version in ``meta.reference`` when the
        trace names one; none named means the rule before versions were recorded). None for a CPU trace."""
        if self.rerecordable:
            return None
        ref = self.trace.meta.get("reference") or {}
        version = ref.get("rule")   # meta.reference.rule, written by the pipeline since rule 2
        which = f"规则 {version} " if version else "旧规则"
        which_en = f"rule {version}" if version else "the rule before rule versions were recorded"
        return (f"此轨迹的身份由录制时的{which}判定，在本机无法重录；用 GPU 重新录制才会应用当前规则 — identities decided by "
                f"{which_en}, at recording; this device trace cannot be recorded again here (a GPU re-recording applies "
                "the current one)")

    @property
    def placed(self) -> bool:
        """Whether the trace carries line hashes (format 2), so its records sit on today's lines even
        after the vendored files changed (annotate/trace/format/placement.py) instead of being withheld."""
        return bool(self.trace.vendor.get("line_hashes")) and self.trace.placement is not None

    @property
    def rerecordable(self) -> bool:
        """A CPU trace can be recorded again here (`make site`); a device trace (GPU) cannot."""
        return self.device == "cpu"

    @property
    def pin(self) -> str:
        return str((self.trace.vendor.get("upstream") or {}).get("commit") or "?")

    def gone(self) -> dict[str, list[int]]:
        """Recorded lines that no longer exist in today's vendored files (per file)."""
        placement = self.trace.placement
        return placement.gone() if placement is not None and self.placed else {}

    def fresh_for(self, path: str) -> bool:
        """Whether this trace's values may be shown on the page of vendored file `path`."""
        if self.placed:
            return True
        return not self.pin_moved and path not in self.stale

    def status(self) -> str:
        """The trace's state for readers, Chinese first: current, placed from another pin, or stale."""
        if not self.warning():
            return "当前 current"
        if self.placed:
            gone = sum(len(v) for v in self.gone().values())
            return (f"记录于 {self.pin[:10]}，已按行映射放到今天的行上"
                    + (f"；{gone} 行已不存在" if gone else "")
                    + f" — recorded at {self.pin[:10]}, placed on today's lines through the line map"
                    + (f"; {gone} recorded line(s) no longer exist" if gone else ""))
        return "过期 stale"

    def file_notice(self, path: str) -> str | None:
        """For the page of `path`, Chinese first: this trace was recorded at another pin or on other
        bytes and placed on today's lines; which recorded lines are gone. None when nothing moved."""
        placement = self.trace.placement
        if placement is None or not self.placed or path not in self.trace.files():
            return None
        fp = placement.files.get(path)
        if fp is None or not (fp.moved or fp.gone or self.pin_moved or path in self.changed):
            return None
        gone = sorted(fp.gone)
        lines = ", ".join(f"L{n}" for n in gone[:8]) + (" …" if len(gone) > 8 else "")
        return (f"{self.where}（{self.label}）记录于 {self.pin[:10]}，已按行映射放到今天的行上"
                + (f"；记录时的 {lines} 今天已不存在，其值不显示" if gone else "")
                + f" — recorded at {self.pin[:10]} and placed on today's lines through the line map"
                + (f"; recorded {lines} no longer exist, their values are not shown" if gone else ""))

    def warning(self) -> str | None:
        """One line for the build log when (part of) this trace is stale, else None."""
        if not self.pin_moved and not self.changed:
            return None
        if self.placed:
            gone = self.gone()
            lost = "; ".join(f"{f}: line(s) {', '.join(map(str, ls[:6]))}" for f, ls in gone.items())
            again = (f" — rerun `annotate trace --out {self.where} --force` to record it again"
                     if self.rerecordable else " — a device trace: it cannot be recorded again here")
            return (f"{self.where}: recorded at {self.pin[:12]} ({self.device}), placed on today's lines "
                    f"through the line map" + (f"; gone, shown as recorded at {self.pin[:12]}: {lost}" if gone else "")
                    + again)
        files = self.changed
        what = ("made at another upstream commit" if self.pin_moved
                else f"made from other bytes of {', '.join(files[:4])}{' …' if len(files) > 4 else ''}")
        withheld = "all its values are withheld" if self.pin_moved else (
            f"values withheld from {len(self.stale)} page(s)" if self.stale else "its numbers may be out of date")
        return (f"{self.where}: {what}; {withheld} — rerun "
                f"`annotate trace --out {self.where} --force` (or delete it)")


@dataclass
class TraceSet:
    """Every trace under ``traces/``, the default first."""

    views: list[TraceView] = field(default_factory=list)

    @property
    def default(self) -> TraceView | None:
        return self.views[0] if self.views else None

    def for_file(self, path: str) -> list[TraceView]:
        """Fresh traces that recorded something in `path`."""
        return [v for v in self.views if v.fresh_for(path) and path in v.trace.files()]

    def stale_for(self, path: str) -> list[TraceView]:
        """Traces that recorded `path` but whose values are withheld because the file changed."""
        return [v for v in self.views if not v.fresh_for(path) and path in v.trace.files()]

    def find(self, device: str | None = None, dtype: str | None = None) -> TraceView | None:
        """The first fresh-pinned trace with this device and/or dtype."""
        return next((v for v in self.views if not v.pin_moved and (device is None or v.device == device)
                     and (dtype is None or v.dtype == dtype)), None)

    def warnings(self) -> list[str]:
        return [w for w in (v.warning() for v in self.views) if w]

    def refusals(self) -> list[str]:
        """Warnings a strict build fails on: stale traces that can be recorded again here (CPU)."""
        return [w for w in (v.warning() for v in self.views if v.rerecordable) if w]

    def notices(self) -> list[str]:
        """Warnings a strict build only reports: committed device traces that cannot be re-recorded here."""
        return [w for w in (v.warning() for v in self.views if not v.rerecordable) if w]


#: what a strict build says after the stale traces it refuses
REFUSAL_FIX = ("(a strict build refuses stale traces; `annotate build --no-strict` "
               "builds with their values withheld from the changed files)")


@dataclass(frozen=True)
class TraceReview:
    """What a build does about its traces: ``fatal`` lines fail it (one message), ``warnings`` go to the
    build log, ``notices`` are reported without failing even a strict build (device traces)."""

    fatal: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()


def review_traces(traces: TraceSet, strict: bool) -> TraceReview:
    """The policy for stale, non-finite and weakly identified traces: a strict build refuses a trace with a
    non-finite value (the first one found), any stale CPU trace (it can be recorded again here), then a ≡
    claimed below the identification margin (annotate.trace.format.validate.weak_identity); a build without strict
    shows stale ones with their values withheld and warns. A stale device trace is only a notice."""
    notices = tuple(traces.notices())
    for view in traces.views if strict else ():
        if problem := non_finite(view.trace):
            return TraceReview(fatal=(problem,), notices=notices)
    stale = tuple(traces.refusals())
    if stale and strict:
        return TraceReview(fatal=(*stale, REFUSAL_FIX), notices=notices)
    for view in traces.views if strict else ():
        if problem := weak_identity(view.trace):
            return TraceReview(fatal=(problem,), notices=notices)
    return TraceReview(warnings=stale, notices=notices)


def _order(view: TraceView) -> tuple:
    """Default trace first, one-rank traces before --tp ones, then CPU before GPU, bfloat16 before the others, then by key."""
    return (view.key != DEFAULT_KEY, view.trace.tp > 1, view.device != "cpu", view.dtype != "bfloat16", view.key)


def load_traces(root: Path, upstream_commit: str | None, today: Mapping[str, bytes] | None = None) -> TraceSet:
    """Load every trace under `<root>/traces`; a bad trace file raises its one-line UserError.

    ``today`` is the bytes of every file of ``vendor/nano-vllm`` when the caller has them (the build's
    snapshot does): their hashes are what the traces are compared with. Without them the folder is
    hashed once for all traces, and each trace reads the files it places its records on."""
    views = []
    here = local_hashes(root / VENDOR_DIR) if today is None else {p: sha256_bytes(d) for p, d in today.items()}
    for folder in find_traces(root):
        trace = load_trace(folder, root, today)
        traced_commit = (trace.vendor.get("upstream") or {}).get("commit")
        moved = bool(upstream_commit and traced_commit and traced_commit != upstream_commit)
        changed = trace.vendor_mismatch(root, here)
        recorded = set(trace.files())
        views.append(TraceView(folder.name, trace, [f for f in changed if f in recorded], changed, moved))
    return TraceSet(sorted(_shapes_where_needed(views), key=_order))


def _shapes_where_needed(views: list[TraceView]) -> list[TraceView]:
    """Name the shape in the labels of traces that would otherwise read alike (`cpu` and a full-depth CPU trace)."""
    seen: dict[str, int] = {}
    for v in views:
        seen[v.label] = seen.get(v.label, 0) + 1
    for v in views:
        v.with_shape = seen[v.label] > 1
    return views
