"""Trace files: a versioned JSON summary plus optional safetensors, written atomically.

A trace is a directory (default `traces/cpu`):

    <trace>/trace.json            format "annotate-trace", version 3 — everything the site shows,
                                  and no source text: statements are referred to by file, line and
                                  the vendored files' line hashes (annotate/trace/format/placement.py)
    <trace>/tensors.safetensors   optional full tensors, keyed by the `tensor` field of a variable
    <trace>/bandwidth.json        optional timings of the fused kernel (scripts/gpu-check.sh)

The JSON layout is documented in docs/trace-format.md. This module is the only reader and writer:
`load_trace()` validates the format and version (one-line `UserError` otherwise) and returns a
`Trace` with a small query API; `write_trace()` stages the trace in a hidden folder beside it
(`.<name>.new-XXXX`) and swaps it in with `annotate.atomic.replace_dir`, so a reader never sees half a
trace and a failed swap puts the previous trace back. `find_traces()` skips folders whose name starts
with "." (staging and swap-aside folders a killed run can leave). Loading needs no torch (tensors
load lazily).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from annotate import codec
from annotate.atomic import replace_dir
from annotate.errors import UserError
from annotate.trace.format import placement
from annotate.trace.format import schema, validate
from annotate.trace.format.schema import TRACE_FIX, LineRecord
from annotate.trace.format.tensorfile import save_tensors
from annotate.project import Project
from annotate.vendoring.lock import VENDOR_DIR
from annotate.vendoring.sync import local_hashes

TRACE_FORMAT = "annotate-trace"
VERSION = 3
#: versions this reader accepts: 1 (statement text inside, no line hashes) is still read, its text
#: ignored; 2 has no identification margin (no runner-up, no "ambiguous": read, but a strict build
#: refuses its ≡) and no `ranks` / `parallel` (one rank)
READABLE = (1, 2, 3)
JSON_NAME = "trace.json"
TENSORS_NAME = "tensors.safetensors"
BANDWIDTH_NAME = "bandwidth.json"

#: the forwards whose flow variables the site follows (flow diagram, plots, identity flags) …
FLOW_FUNCTIONS = ("Qwen3DecoderLayer.forward", "Qwen3Model.forward")
#: … and those flow variables (`_` is the model forward's final residual)
FLOW_NAMES = ("hidden_states", "residual", "_")
#: the fused add + RMSNorm of the vendored code, by qualified name (the numerics, lesson and vLLM comparisons read it)
ADD_RMS = "RMSNorm.add_rms_forward"


@dataclass
class Trace:
    """A loaded trace. Use `at(file, line)` for the values panel of one source line."""

    path: Path
    meta: dict[str, Any]
    vendor: dict[str, Any]
    functions: list[dict[str, Any]]
    records: list[LineRecord]
    math: list[dict[str, Any]]
    compiled_checks: list[dict[str, Any]]
    kernels: list[dict[str, Any]]
    flags: list[dict[str, Any]]
    summary: dict[str, Any]
    placement: placement.Placement | None = None   # how the records sit on today's vendored lines
    #: a --tp run: the records of ranks 1…N−1 (rank 0's are `records`), and the identification of
    #: shards, partial sums and post-all_reduce values (`annotate.trace.identify.shards`); empty otherwise
    ranks: dict[int, list[LineRecord]] = field(default_factory=dict)
    parallel: dict[str, Any] = field(default_factory=dict)
    _index: dict[tuple[str, int], list[LineRecord]] = field(default_factory=dict, repr=False)
    _tensors: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for r in self.records:
            if r.placed:
                self._index.setdefault((r.file, r.line), []).append(r)
        for recs in self._index.values():
            recs.sort(key=lambda r: r.order)

    # -- queries the site uses
    def files(self) -> list[str]:
        """Vendored files (relative to the vendor root) that have records."""
        return sorted({r.file for r in self.records})

    def lines(self, file: str) -> list[int]:
        """Line numbers of `file` that have records."""
        return sorted({line for f, line in self._index if f == file})

    def at(self, file: str, line: int, layer: int | None | str = "any") -> list[LineRecord]:
        """Records of one source line in execution order; `layer=` filters (None = outside layers)."""
        recs = self._index.get((file, line), [])
        return recs if layer == "any" else [r for r in recs if r.layer == layer]

    @property
    def tp(self) -> int:
        """How many tensor-parallel ranks recorded this trace (1 before format 3)."""
        return int(self.parallel.get("tp", 1))

    def rank_at(self, rank: int, file: str, line: int) -> list[LineRecord]:
        """:meth:`at` for one rank of a --tp trace (rank 0: the main records)."""
        if rank == 0:
            return self.at(file, line)
        return sorted((r for r in self.ranks.get(rank, []) if r.placed and r.file == file and r.line == line),
                      key=lambda r: r.order)

    def layers(self) -> list[int]:
        """Decoder layers present in the run."""
        return list(range(int(self.meta["model"]["layers"])))

    def record(self, record_id: int) -> LineRecord:
        return self.records[record_id]

    def checks_for(self, function: str) -> list[dict[str, Any]]:
        """Fused-vs-eager distances of a compiled function, e.g. `RMSNorm.add_rms_forward`."""
        return [c for c in self.compiled_checks if c["function"] == function]

    def kernels_for(self, function: str) -> list[dict[str, Any]]:
        """Inductor output modules (with their kernels) compiled from `function`."""
        return [k for k in self.kernels if k["function"] == function]

    def function(self, name: str) -> dict[str, Any] | None:
        """Static facts about a traced/compiled function: file, def line, statements."""
        return next((f for f in self.functions if f["name"] == name), None)

    def provenance(self) -> str:
        """One line for the panel: device, dtype, model, torch, attention, date."""
        m = self.meta
        return (f"{m['device_name']} ({m['device']}), {m['dtype']}, {m['model']['name']} "
                f"{m['model']['layers']} layers × {m['input']['tokens']} tokens, torch {m['versions']['torch']}, "
                f"attention {m['attention']}, {m['created'][:10]}")

    def vendor_mismatch(self, root: Path | str, here: dict[str, str] | None = None) -> list[str]:
        """Files whose bytes under `<root>/vendor/nano-vllm` differ from those the trace was made
        from (or exist on one side only): values on those files' lines may be pinned to wrong lines.

        ``here`` (the local hashes, e.g. computed once for several traces) skips re-hashing."""
        traced: dict[str, str] = self.vendor.get("files", {})
        if here is None:
            here = local_hashes(Path(root) / self.vendor.get("root", VENDOR_DIR))
        return sorted(k for k in set(traced) | set(here) if traced.get(k) != here.get(k))

    def bandwidth(self) -> dict[str, Any] | None:
        """`bandwidth.json` next to trace.json (fused vs eager vs copy timings, written by
        scripts/gpu-check.sh), or None."""
        path = self.path / BANDWIDTH_NAME
        if not path.is_file():
            return None
        return validate.check_bandwidth(path)

    def tensor(self, key: str) -> Any:
        """A saved full tensor (torch), or KeyError when the trace kept summaries only."""
        if self._tensors is None:
            path = self.path / TENSORS_NAME
            if not path.is_file():
                raise KeyError(f"{self.path}: no {TENSORS_NAME} (run annotate trace --full-tensors)")
            from safetensors import safe_open

            self._tensors = safe_open(str(path), "pt", "cpu")
        return self._tensors.get_tensor(key)


# ---------------------------------------------------------------- loading

def trace_json(path: Path) -> Path:
    """`<trace>/trace.json` for a trace directory, or `path` itself when it is the JSON file."""
    return path / JSON_NAME if path.is_dir() else path


def read_payload(path: Path) -> dict[str, Any]:
    """A trace's JSON validated against the format's model (annotate/trace/format/schema.py): records as
    `LineRecord`s, every other block checked in place; one-line UserError otherwise."""
    jpath = trace_json(path)
    if not jpath.is_file():
        raise UserError(f"{path}: no trace here (expected {jpath}); run `annotate trace --out {path}`")
    payload = codec.read_json(jpath, fix=TRACE_FIX)
    if not isinstance(payload, dict) or payload.get("format") != TRACE_FORMAT:
        got = payload.get("format") if isinstance(payload, dict) else None
        raise UserError(f"{jpath}: not an annotate trace (format is {got!r}); {TRACE_FIX}")
    if payload.get("version") not in READABLE:
        raise UserError(f"{jpath}: trace format version {payload.get('version')!r}, this annotate reads version "
                        f"{VERSION}; {TRACE_FIX}")
    missing = [k for k in ("meta", "vendor", "records", "math") if k not in payload]
    if missing:   # all the top-level blocks named at once (check_payload would name the first field it lacks)
        raise UserError(f"{jpath}: incomplete trace (missing {', '.join(missing)}); {TRACE_FIX}")
    return schema.check_payload(payload, jpath)   # every field the site reads has its type from here on


def load_trace(path: Path | str, source_root: Path | str | None = None,
               today: Mapping[str, bytes] | None = None) -> Trace:
    """Load and validate a trace directory (or its trace.json), placed on today's vendored lines.

    `source_root` is the project whose `vendor/nano-vllm` gives the statements' text and today's line
    numbers (annotate/trace/format/placement.py); by default the nearest folder above the trace holding one,
    else the current folder. Without any vendored copy, records keep their recorded lines and no text.
    `today` (path -> bytes of `vendor/nano-vllm`'s files, when the caller read them already) saves re-reading them."""
    path = Path(path)
    payload = read_payload(path)
    records = payload["records"]
    root = path if path.is_dir() else path.parent
    functions, summary = payload.get("functions", []), payload.get("summary", {})
    where = Path(source_root) if source_root is not None else (
        placement.find_source_root(root.resolve()) or placement.find_source_root(Path.cwd()))
    ranks = {int(b["rank"]): list(b["records"]) for b in payload.get("ranks", [])}
    validate.check_tensors(root, records, TENSORS_NAME, ranks)
    placed = _place(payload["vendor"], records + [r for rs in ranks.values() for r in rs], functions, summary,
                    where, today)
    return Trace(root, payload["meta"], payload["vendor"], functions, records, payload["math"],
                 payload.get("compiled_checks", []), payload.get("kernels", []), payload.get("flags", []),
                 summary, placed, ranks=ranks, parallel=payload.get("parallel", {}))


def _place(vendor: dict[str, Any], records: list[LineRecord], functions: list[dict[str, Any]],
           summary: dict[str, Any], root: Path | None,
           today: Mapping[str, bytes] | None = None) -> placement.Placement | None:
    """Move records, statements and flow rows to today's lines and fill their text from the vendored files."""
    if root is None:
        return None
    files = {r.file for r in records} | {f["file"] for f in functions}
    plan = placement.plan(vendor, files, root, today)
    for r in records:
        fp = plan.file(r.file)
        span = fp.span(r.line, r.end_line)
        if span is None:
            r.placed = False
            continue
        r.line, r.end_line = span
        r.text = fp.text(*span) if r.kind == "line" else ""
    for f in functions:
        fp = plan.file(f["file"])
        for st in f.get("statements", []):
            span = fp.span(st["line"], st["end_line"])
            st["recorded_line"] = st["line"]
            if span is not None:
                st["line"], st["end_line"] = span
            st["text"], st["placed"] = (fp.text(*span), True) if span else ("", False)
    for row in summary.get("flow", []):
        if 0 <= row.get("record", -1) < len(records):
            r = records[row["record"]]
            row.update(line=r.line, text=r.text, placed=r.placed, recorded_line=r.recorded_line)
    return plan


#: staging folders of annotate versions that staged in `<out>.tmp-<pid>` / `<out>.tmp-old-<pid>`
_LEGACY_STAGING = re.compile(r"\.tmp-(old-)?\d+$")


def find_traces(root: Path) -> list[Path]:
    """Trace directories under `<root>/traces` (those holding a trace.json), sorted.

    Folders whose name starts with "." are skipped: `write_trace` stages in `.<name>.new-XXXX` and
    `swap_dir` moves the old trace aside to `.<name>.old-XXXX`, and a killed run can leave either
    behind (possibly half-written). So are `<name>.tmp-<pid>` folders left by older versions.
    """
    base = root / Project.TRACES_DIR
    if not base.is_dir():
        return []
    return sorted(p.parent for p in base.glob(f"*/{JSON_NAME}")
                  if not p.parent.name.startswith(".") and not _LEGACY_STAGING.search(p.parent.name))


# ---------------------------------------------------------------- writing

def check_out(out: Path, force: bool, root: Path | None = None) -> None:
    """Refuse an unsafe --out (see annotate.guard), an existing one without --force, or an unwritable
    place — before any work, creating nothing."""
    from annotate.guard import refuse_uncreatable, refuse_unsafe_output

    if root is not None:
        refuse_unsafe_output(root, out, "--out", ours=is_trace_dir, home=Project.TRACES_DIR, tracked_ok=True)
    if out.exists():
        if not force:
            raise UserError(f"--out {out}: already exists; pass --force to replace it")
        if out.is_file() or (any(out.iterdir()) and not is_trace_dir(out)):
            raise UserError(f"--out {out}: exists and is not a trace directory; choose another --out")
    refuse_uncreatable(out.absolute(), "--out")


def is_trace_dir(folder: Path) -> bool:
    """A folder `annotate trace` wrote (its trace.json is the mark of a previous output)."""
    return (folder / JSON_NAME).is_file()


def write_trace(out: Path, payload: dict[str, Any], tensors: dict[str, Any] | None, force: bool) -> Path:
    """Write `payload` (+ tensors) to `out` atomically (`annotate.atomic.replace_dir`: staged in a hidden
    `.<out>.new-XXXX` beside it, then swapped in; on failure the previous trace stays at `out`)."""
    check_out(out, force)
    with replace_dir(out) as staged:
        if tensors:
            save_tensors(staged / TENSORS_NAME, {k: v.contiguous() for k, v in tensors.items()}, f"--out {out}",
                         "the previous trace, if any, is kept")
        body = json.dumps({"format": TRACE_FORMAT, "version": VERSION, **payload}, ensure_ascii=False,
                          separators=(",", ":"), allow_nan=True)
        schema.check_payload(json.loads(body), staged / JSON_NAME)  # the writer obeys the reader's model
        (staged / JSON_NAME).write_text(body, encoding="utf-8")
    return out


def payload_matches(out: Path, expected: dict[str, Any]) -> str | None:
    """None when the trace at `out` was made with `expected` inputs (`meta.inputs_key`); else why it is stale."""
    try:
        payload = read_payload(out)
    except UserError as exc:
        return str(exc)
    have = payload["meta"].get("inputs_key")
    if have != expected:
        diff = sorted(k for k in set(have or {}) | set(expected) if (have or {}).get(k) != expected.get(k))
        return f"{out}: made with other inputs ({', '.join(diff)})"
    return None

