"""Turn a recorded run (raw clones, checks, peer values, kernels) into the trace payload.

Pure data shaping: summaries, identities, aliasing per variable, flags, and the summary tables
the report and the site read. Identification happens here, by comparison with the peer.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch

from annotate.trace.model.kernels import KernelCapture
from annotate.trace.record.identity import storage_key
from annotate.trace.model.numerics import distance, summarize
from annotate.trace.record.recorder import RawRecord, Recorder
from annotate.trace.identify.reference import Identifier, Identity, PeerRun, call_context
from annotate.trace.format.schema import identity_label
from annotate.trace.format.store import FLOW_FUNCTIONS, FLOW_NAMES

#: recorded tensors are saved in full below this total (or always with --full-tensors)
AUTO_SAVE_BYTES = 16 * 2**20


def total_bytes(records: list[RawRecord]) -> int:
    """Bytes of the distinct recorded copies. The recorder shares one copy among the records that
    saw the same, provably unchanged tensor, and views of a copied tensor are views of its copy,
    so this counts storages."""
    storages = {storage_key(v.tensor): v.tensor.untyped_storage().nbytes() for r in records for v in r.vars}
    return sum(storages.values())


def _own(t: torch.Tensor) -> torch.Tensor:
    """`t` as a tensor with a storage of its own (safetensors refuses tensors that share memory)."""
    whole = t.is_contiguous() and t.storage_offset() == 0 and \
        t.untyped_storage().nbytes() == t.numel() * t.element_size()
    return t if whole else t.clone(memory_format=torch.contiguous_format)


def _identity_payload(identity: Identity) -> dict[str, Any]:
    """An identity as the trace stores it: `context` and `outside` only where the call's context decided."""
    out = asdict(identity)
    if out["context"] is None:
        del out["context"], out["outside"]
    return out


class _PerCopy:
    """Summary, identity and tensor key worked out once per distinct copy, and who held it first.
    The identities of all copies are worked out together first (`Identifier.identify_many`: the
    prefilter's products for many copies in one matrix product), once per copy and call context
    (:func:`~annotate.trace.identify.reference.call_context`: a copy held in two calls is decided in each)."""

    def __init__(self, ident: Identifier, save: bool, tensors: dict[str, torch.Tensor], raws: list[RawRecord],
                 prefix: str = "") -> None:
        self.save, self.tensors, self.prefix = save, tensors, prefix
        copies = {(id(v.tensor), call_context(r.layer, r.module)): v.tensor for r in raws for v in r.vars}
        found = ident.identify_many(list(copies.values()), [ctx for _, ctx in copies])
        self._identities = {k: _identity_payload(i) for k, i in zip(copies, found)}
        self._done: dict[int, tuple[Any, str | None, dict[str, Any]]] = {}

    def __call__(self, rid: int, record: RawRecord,
                 raw: Any) -> tuple[Any, dict[str, Any], str | None, dict[str, Any]]:
        hit = self._done.get(id(raw.tensor))
        if hit is None:
            key = None
            if self.save:   # the first record that holds this copy names it; later ones point to it
                key = f"{self.prefix}r{rid}/{raw.name}"
                self.tensors[key] = _own(raw.tensor.cpu())
            hit = self._done[id(raw.tensor)] = (summarize(raw.tensor), key, {"record": rid, "var": raw.name})
        identity = self._identities[(id(raw.tensor), call_context(record.layer, record.module))]
        return hit[0], identity, hit[1], hit[2]


def _var_payload(rid: int, raw: Any, done: tuple[Any, dict[str, Any], str | None, dict[str, Any]],
                 aliases: list[Any]) -> dict[str, Any]:
    s, identity, key, first = done
    group = next((g for g in aliases if raw.name in g.names), None)
    return {"name": raw.name, "role": raw.role, "shape": list(s.shape), "dtype": s.dtype, "norm": s.norm,
            "mean": s.mean, "absmax": s.absmax, "head": list(s.head), "tensor": key, "identity": identity,
            "aliases": [n for n in group.names if n != raw.name] if group else [],
            "same_memory": [n for n in group.same if n != raw.name] if group and raw.name in group.same else [],
            # the recorder reused this copy: proved unchanged since that (earlier) record took it
            "same_copy_as": first if first["record"] != rid else None}


def records_payload(rec: Recorder, ident: Identifier, save: bool) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    """Every record with summaries and identities; full tensors into `tensors` when `save` (one
    entry per distinct copy: variables that share a copy share its key)."""
    return raw_records_payload(rec.records, ident, save)


def raw_records_payload(raws: list[RawRecord], ident: Identifier, save: bool,
                        prefix: str = "") -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    """:func:`records_payload` of records recorded elsewhere (another rank of a --tp run); tensor
    keys start with ``prefix`` (`rank1/`) so that every rank's tensors share one file."""
    tensors: dict[str, torch.Tensor] = {}
    per_copy = _PerCopy(ident, save, tensors, raws, prefix)
    out = []
    for rid, r in enumerate(raws):
        vars_ = [_var_payload(rid, v, per_copy(rid, r, v), r.aliases) for v in r.vars]
        out.append({"id": rid, "function": r.function, "file": r.file, "line": r.line, "end_line": r.end_line,
                    "kind": r.kind, "source": r.source, "layer": r.layer, "module": r.module, "call": r.call,
                    "hit": r.hit, "order": r.order, "vars": vars_,
                    "aliases": [{"names": g.names, "same": g.same} for g in r.aliases]})
    return out, tensors


def math_payload(ref: PeerRun, records: list[dict[str, Any]], save: bool,
                 tensors: dict[str, torch.Tensor]) -> list[dict[str, Any]]:
    """The peer's variables with summaries, and which recorded variables were identified as each."""
    matched: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in records:
        for v in r["vars"]:
            for m in v["identity"].get("matches", []):
                matched.setdefault((m["key"], m["layer"]), []).append(
                    {"record": r["id"], "var": v["name"], "rel": m["rel"], "max_ulps": m["max_ulps"],
                     "scale_ulps": m["scale_ulps"], "max_abs": m["max_abs"]})
    out = []
    for mv in ref.values:
        key = f"math/{mv.key}/{mv.layer}" if save else None
        if key:
            tensors[key] = mv.tensor.cpu()
        out.append({"key": mv.key, "layer": mv.layer, "label": mv.label, "latex": mv.latex,
                    "summary": asdict(summarize(mv.tensor)), "tensor": key,
                    "matched_by": matched.get((mv.key, mv.layer), [])})
    return out


def checks_payload(rec: Recorder) -> list[dict[str, Any]]:
    """Fused-vs-eager distances per compiled call."""
    return [{"function": c.function, "file": c.file, "line": c.line, "module": c.module, "layer": c.layer,
             "call": c.call, "outputs": [{"name": n, **asdict(d)} for n, d in c.outputs]} for c in rec.checks]


def kernels_payload(rec: Recorder, capture: KernelCapture, first_index: int) -> list[dict[str, Any]]:
    """Inductor's generated modules per compiled function: those compiled during this run
    (index ≥ first_index); when the process had compiled a function before (a second trace in one
    process), all of that function's modules, marked `this_run: false`."""
    out = []
    for _, _, qual in rec.compiled_targets:
        orig = rec.originals[qual]
        code = orig.__code__
        mods = capture.for_function(code.co_filename, code.co_firstlineno)
        mine = [m for m in mods if m.index >= first_index]
        for m in mine or mods:
            out.append({"function": qual, "file": rec._file_of(orig), "line": code.co_firstlineno,
                        "compile_index": m.index, "this_run": bool(mine),
                        "languages": sorted({k.language for k in m.kernels}),
                        "code": m.code, "kernels": [asdict(k) for k in m.kernels]})
    return out


def functions_payload(rec: Recorder) -> list[dict[str, Any]]:
    """Static facts about each function: file, def line, statements (lines and what they assign; no
    text: a trace holds no upstream code, pages read the statement from the vendored file)."""
    out = []
    for info in rec.code_infos():
        kind = "traced" if info.code in rec.traced else ("compiled" if info.qualname in rec.originals else "helper")
        stmts = {t.statement.start_line: t.statement for t in info.statements.values()}
        out.append({"name": info.qualname, "file": info.file, "def_line": info.def_line, "kind": kind,
                    "statements": [{"line": s.start_line, "end_line": s.end_line, "targets": list(s.bound_names)}
                                   for s in sorted(stmts.values(), key=lambda s: s.start_line)]})
    return out


def _span(layers: list[int | None]) -> str:
    ls = sorted({n for n in layers if n is not None})
    return "layers " + ", ".join(map(str, ls)) if ls else "outside the layers"


def _lines(lines: list[int]) -> str:
    return ", ".join(map(str, sorted(set(lines))))


def flags_payload(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hazards found in the data, one flag per function and names: distinct names that are one
    tensor (aliasing), and flow variables matching no peer variable (identity)."""
    groups: dict[tuple, dict[str, list]] = {}

    def add(key: tuple, r: dict[str, Any]) -> None:
        g = groups.setdefault(key, {"lines": [], "layers": [], "records": []})
        g["lines"].append(r["line"])
        g["layers"].append(r["layer"])
        g["records"].append(r["id"])

    for r in records:
        for a in r["aliases"]:
            names = [n for n in a["same"] if not n.startswith("return")]
            if len(names) > 1:
                add(("aliasing", r["function"], r["file"], tuple(names)), r)
        if r["function"] in FLOW_FUNCTIONS and r["kind"] == "line" and r["source"] == "traced":
            for v in r["vars"]:
                if v["name"] in FLOW_NAMES and v["identity"].get("status") == "no match":
                    add(("identity", r["function"], r["file"], (v["name"],)), r)
    out = []
    for (kind, fn, file, names), g in groups.items():
        where = f"{file} lines {_lines(g['lines'])} ({fn}), {_span(g['layers'])}"
        if kind == "aliasing":
            msg = f"{' and '.join(names)} are the same tensor after {where}: an in-place update of one changes the other"
        else:
            msg = f"{names[0]} matches no math variable of the peer after {where}"
        out.append({"kind": kind, "function": fn, "file": file, "names": list(names),
                    "lines": sorted(set(g["lines"])), "layers": sorted({n for n in g["layers"] if n is not None}),
                    "records": g["records"], "message": msg})
    return out


def flow_payload(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per executed line of the decoder/model forwards: which math variable each flow variable held."""
    out = []
    for r in records:
        if r["function"] in FLOW_FUNCTIONS and r["source"] == "traced":
            held = {v["name"]: {"label": identity_label(v["identity"]), "matches": v["identity"].get("matches", [])[:2]}
                    for v in r["vars"] if v["name"] in FLOW_NAMES}
            if held:
                out.append({"record": r["id"], "function": r["function"], "file": r["file"], "line": r["line"],
                            "kind": r["kind"], "layer": r["layer"], "held": held})
    return out


def compiled_summary(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """Worst fused-vs-eager distance per compiled function and output."""
    out: dict[str, Any] = {}
    for c in checks:
        for o in c["outputs"]:
            cur = out.setdefault(c["function"], {}).setdefault(o["name"], {"max_abs": 0.0, "max_ulps": 0, "n_diff": 0, "calls": 0})
            cur["max_abs"] = max(cur["max_abs"], o["max_abs"])
            cur["max_ulps"] = max(cur["max_ulps"], o["max_ulps"])
            cur["n_diff"] += o["n_diff"]
            cur["calls"] += 1
    return out


def final_summary(nano_out: torch.Tensor, ref: PeerRun, layers: int) -> dict[str, Any]:
    """nano-vllm's final hidden states vs the peer's final norm output."""
    return asdict(distance(nano_out, ref.get("final_norm", layers - 1)))
