"""The short text report `annotate trace` prints at the end (read from the payload, not the run).

The payload holds no source text: the statement beside each line number is read from the vendored
file the trace was made from (`<root>/vendor/nano-vllm`), or left out where it cannot be read."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from annotate.trace.format.placement import statement_text
from annotate.vendoring.lock import VENDOR_DIR

FLOW_FN = "Qwen3DecoderLayer.forward"


def _source_lines(payload: dict[str, Any], root: Path | None, file: str) -> list[str]:
    if root is None:
        return []
    path = root / payload["vendor"].get("root", VENDOR_DIR) / file
    return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []


def flow_table(payload: dict[str, Any], root: Path | None = None) -> list[str]:
    """After each line of Qwen3DecoderLayer.forward, per layer: what residual / hidden_states held.

    Read from the summary's flow rows and the function's statements, never from the records: the report
    reads a written trace (:func:`annotate.trace.format.store.read_payload`, records typed) and the payload a run
    has just written alike."""
    rows: dict[int, dict[int, str]] = {}
    fn = next((f for f in payload.get("functions", []) if f["name"] == FLOW_FN), None)
    ends = {st["line"]: st["end_line"] for st in fn["statements"]} if fn else {}
    for f in payload["summary"]["flow"]:
        if f["function"] != FLOW_FN or f["kind"] != "line" or f["layer"] is None:
            continue
        held = f["held"]
        cell = "  ".join(f"{'h' if n == 'hidden_states' else 'r'}={held[n]['label']}" for n in ("hidden_states", "residual") if n in held)
        rows.setdefault(f["line"], {})[f["layer"]] = cell
    source = _source_lines(payload, root, fn["file"]) if fn else []
    lines = [f"which math variable hidden_states (h) / residual (r) held after each line of {FLOW_FN}:"]
    for line in sorted(rows):
        lines.append(f"  {line:>4}  {statement_text(source, line, ends.get(line, line))[:70]}")
        for layer, cell in sorted(rows[line].items()):
            lines.append(f"          layer {layer}: {cell}")
    return lines


def per_layer(payload: dict[str, Any]) -> list[str]:
    """nano-vllm vs HF per layer, for the residual (x₁) and the normalised output (RMSNorm₂(x₁))."""
    best: dict[tuple[str, int], dict[str, Any]] = {}
    for m in payload["math"]:
        if m["key"] in ("x1", "rmsnorm2") and m["matched_by"]:
            best[(m["key"], m["layer"])] = min(m["matched_by"], key=lambda d: d["rel"])
    if not best:
        return []
    out = ["nano-vllm vs HF per layer (closest recorded tensor; max|Δ|, ulps of the largest value):"]
    for layer in sorted({n for _, n in best}):
        cells = [f"{name} {best[(k, layer)]['max_abs']:.3g} ({best[(k, layer)]['scale_ulps']:.1f} ulp)"
                 for k, name in (("x1", "x₁"), ("rmsnorm2", "RMSNorm₂(x₁)")) if (k, layer) in best]
        out.append(f"  layer {layer}: " + ", ".join(cells))
    return out


def numbers(payload: dict[str, Any]) -> list[str]:
    """Fused-vs-eager, nano-vllm-vs-HF, compile check and flags."""
    s, meta = payload["summary"], payload["meta"]
    out = ["fused (compiled) vs eager replay of the same body, worst over calls:"]
    for fn, outs in s["compiled_vs_eager"].items():
        cells = ", ".join(f"{n}: max|Δ| {o['max_abs']:.3g}, {o['max_ulps']} ulp" for n, o in outs.items())
        out.append(f"  {fn:<26} {cells}")
    f = s["final_vs_hf"]
    out.append(f"nano-vllm final hidden states vs HF transformers: max|Δ| {f['max_abs']:.3g} "
               f"({f['scale_ulps']:.1f} ulp of the largest value), ‖Δ‖/‖ref‖ {f['rel']:.2e}, in {f['dtype']}")
    c = meta["compiled"]
    out.append(f"compiled paths ran compiled: {'yes' if c['ran_compiled'] else 'NO'} "
               f"(compiled calls {sum(c['compiled_calls'].values())}, eager escapes {sum(c['eager_escapes'].values())}, "
               f"new graphs compiled while recording {c['dynamo_while_recording']['unique_graphs']}, "
               f"recording changed the output: {'yes' if c['recording_changed_output'] else 'no'})")
    trusted = c.get("graph_count_trusted", {})
    if trusted:
        by_count = sorted(q for q, ok in trusted.items() if ok)
        out.append("  proved by: the tracer (no frame of an original body outside a replay)"
                   + (f"; after each function's first call, Inductor's graph count ({len(by_count)} of "
                      f"{len(trusted)} functions)" if by_count else ""))
    r = meta.get("recorder")
    if r:
        out.append(f"copies of recorded tensors: {r['copies_taken']} taken; {r['copies_reused']} reused and "
                   f"{r['views_of_copies']} made as views of one, where nothing could have written the tensor in between")
        if "compiled" in r:
            out.append("recorder: its per-line modules " + ("compiled by mypyc (annotate native)" if r["compiled"] else
                                                             "ran as Python (annotate native compiles them: same records)"))
    out.append(f"attention: {meta['attention']}; kernels captured: {len(payload['kernels'])} modules")
    for flag in payload["flags"]:
        out.append(f"FLAG [{flag['kind']}] {flag['message']}")
    return out


def render(payload: dict[str, Any], out: str, root: Path | None = None) -> str:
    """The whole report."""
    meta = payload["meta"]
    head = (f"trace written to {out}: {meta['model']['name']} {meta['model']['layers']} layers, "
            f"{meta['input']['tokens']} tokens, {meta['dtype']} on {meta['device']} ({meta['device_name']}), "
            f"{len(payload['records'])} records")
    return "\n".join([head, *flow_table(payload, root), *per_layer(payload), *numbers(payload)])
