"""A small, stable trace for golden tests: a real trace cut down to a few records, ids renumbered.

The goldens of the values panel, flow diagram and trace pages are made from these committed files
(tests/golden/values/{bf16,f32}/trace.json), not from traces/ (which `make site` regenerates with
today's date and this machine's CPU). No upstream code is committed: statement texts are blanked
(tests/values_fixtures.py puts them back from the vendored copy) and kernel sources replaced by a
placeholder. Regenerate them from real traces with

    .venv/bin/python tests/trace_mini.py traces/cpu traces/cpu-float32-qwen3-0.6b-4L-32T

then re-run the tests with UPDATE_GOLDEN=1 and review the diff.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent / "golden" / "values"
FLOW_FUNCS = ("Qwen3DecoderLayer.forward", "Qwen3Model.forward")
PLACEHOLDER = "// generated kernel source: left out of the test fixture\n"
FIRST_CALL_OF = ("RMSNorm.add_rms_forward", "RMSNorm.rms_forward", "SiluAndMul.forward")


def keep(records: list[dict[str, Any]]) -> list[int]:
    """Ids kept: every decoder/model-forward record; the first call of each compiled body in layer 1 and outside."""
    seen: dict[tuple, tuple] = {}
    out = []
    for r in records:
        if r["function"] in FLOW_FUNCS:
            out.append(r["id"])
        elif r["function"] in FIRST_CALL_OF and r["layer"] in (1, None):
            key = (r["function"], r["layer"])
            first = seen.setdefault(key, (r["module"], r["call"]))
            if first == (r["module"], r["call"]):
                out.append(r["id"])
    return out


def cut(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload with only the kept records, every record reference renumbered, kernels shortened."""
    ids = keep(payload["records"])
    new = {old: i for i, old in enumerate(ids)}
    records = []
    for old in ids:
        r = dict(payload["records"][old], id=new[old], text="")
        r["vars"] = [dict(v, identity=_short(v.get("identity")), same_copy_as=_renumbered(v.get("same_copy_as"), new))
                     for v in r["vars"]]
        records.append(r)
    math = [dict(m, matched_by=[dict(x, record=new[x["record"]]) for x in m.get("matched_by", []) if x["record"] in new])
            for m in payload["math"]]
    flags = [dict(f, records=[new[x] for x in f.get("records", []) if x in new]) for f in payload.get("flags", [])]
    summary = dict(payload.get("summary", {}))
    summary["flow"] = [dict(f, record=new[f["record"]], text="") for f in summary.get("flow", []) if f["record"] in new]
    kernels = [dict(k, code=PLACEHOLDER, kernels=[dict(x, source=PLACEHOLDER) for x in k["kernels"]])
               for k in payload.get("kernels", [])]
    functions = [dict(f, statements=[dict(st, text="") for st in f.get("statements", [])])
                 for f in payload.get("functions", [])]
    meta = dict(payload["meta"], created="2026-01-01T00:00:00+00:00", device_name="TEST CPU", tensors_saved=False)
    for r in records:   # the fixture has no tensors.safetensors: no variable may point into one
        r["vars"] = [dict(v, tensor=None) for v in r["vars"]]
    math = [dict(m, tensor=None) for m in math]
    # no line hashes: the stale-trace tests exercise a trace that is withheld (not placed) when its file changes
    vendor = {k: v for k, v in payload["vendor"].items() if k != "line_hashes"}
    return dict(payload, meta=meta, vendor=vendor, functions=functions, records=records, math=math, flags=flags,
                summary=summary, kernels=kernels)


def _renumbered(same: dict[str, Any] | None, new: dict[int, int]) -> dict[str, Any] | None:
    """A `same_copy_as` pointing into the kept records, renumbered (dropped if its record is cut)."""
    return dict(same, record=new[same["record"]]) if same and same["record"] in new else None


def _short(identity: dict[str, Any] | None) -> dict[str, Any] | None:
    """An identity with at most two matches (the panel shows them all; two keep `x₂⁽ℓ⁾ = x⁽ℓ⁺¹⁾`)."""
    return identity if not identity else dict(identity, matches=(identity.get("matches") or [])[:2])


def main(argv: list[str]) -> int:
    for src, name in zip(argv, ("bf16", "f32")):
        payload = json.loads((Path(src) / "trace.json").read_text(encoding="utf-8"))
        out = GOLDEN / name / "trace.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(cut(payload), ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        print(f"{out}: {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
