"""annotate.pages.traces.kernel_flow: Triton kernel lines placed on the Python statements they compute, by analysis.

The kernels below are written for these tests in the shape Inductor gives them (pointer signature, loads
widened to float32, a masked row sum); one keeps the eager rounding as an explicit cast, one drops it, one
reads a pointer the body never names. The committed H200 trace's real kernels are read when present.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate.pages.traces import kernel_flow
from annotate.pages.traces.kernel_flow import analyse, parse_kernel, read_body, wrapper_returns
from goldens import VENDOR

REPO = Path(__file__).resolve().parents[1]
LAYERNORM = "nanovllm/layers/layernorm.py"


def _norm_kernel(middle: str, signature: str = "'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'out_ptr0': '*bf16'") -> str:
    """An RMSNorm-shaped Triton kernel over rows of 64, with `middle` between the normalising multiply and γ."""
    return f"""import triton
import triton.language as tl
from torch._inductor.runtime.triton_helpers import libdevice

@triton_heuristics.persistent_reduction(
    triton_meta={{'signature': {{{signature}, 'xnumel': 'i32', 'XBLOCK': 'constexpr'}}, 'enable_fp_fusion': False}},
)
@triton.jit
def triton_test_norm(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    R0_BLOCK: tl.constexpr = 64
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_1 = r0_index
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (r0_1 + 64*x0), xmask, other=0.0).to(tl.float32)
    tmp9 = tl.load(in_ptr1 + (r0_1), None).to(tl.float32)
    tmp1 = tmp0 * tmp0
    tmp2 = tl.where(xmask, tmp1, 0)
    tmp3 = tl.sum(tmp2, 1)[:, None]
    tmp4 = tl.full([1, 1], 64.0, tl.float32)
    tmp5 = tmp3 / tmp4
    tmp6 = tl.full([1, 1], 1e-06, tl.float32)
    tmp7 = libdevice.rsqrt(tmp5 + tmp6)
    tmp8 = tmp0 * tmp7
{middle}
    tmp11 = tmp10 * tmp9
    tl.store(out_ptr0 + (r0_1 + 64*x0), tmp11, xmask)
"""


def _body(function: str = "RMSNorm.rms_forward") -> kernel_flow.PythonBody:
    body = read_body((VENDOR / LAYERNORM).read_text(encoding="utf-8"), function, {"x": "model", "residual": "model"})
    assert body is not None
    return body


def _line_of(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), start=1) if ln.strip().startswith(text))


def _statement(text: str) -> int:
    """The vendored line of rms_forward whose statement starts with `text` (found, not typed)."""
    lines = (VENDOR / LAYERNORM).read_text(encoding="utf-8").splitlines()
    start = next(i for i, ln in enumerate(lines) if "def rms_forward" in ln)
    return next(i for i, ln in enumerate(lines[start:], start=start + 1) if ln.strip().startswith(text))


def test_each_kernel_line_lands_on_the_statement_that_builds_its_value() -> None:
    src = _norm_kernel("    tmp10 = tmp8.to(tl.float32)")
    m = analyse(parse_kernel("triton_test_norm", src), _body())
    assert m.binding == {"in_ptr0": "x", "in_ptr1": "self.weight"} and m.outputs == {"out_ptr0": 0}
    placed = {ln: where for where, lines in m.statements.items() for ln in lines}
    assert placed[_line_of(src, "tmp0 =")] == (_statement("x = x.float()"),)            # the widening load of x
    assert placed[_line_of(src, "tmp1 =")] == placed[_line_of(src, "tmp3 =")] == placed[_line_of(src, "tmp5 =")] \
        == (_statement("var ="),)                                                        # square, row sum, ÷ n
    assert placed[_line_of(src, "tmp7 =")] == placed[_line_of(src, "tmp8 =")] == (_statement("x.mul_("),)
    assert placed[_line_of(src, "tmp11 =")] == placed[_line_of(src, "tmp9 =")] == (_statement("x = x.to("),)
    assert placed[_line_of(src, "tl.store")] == (_statement("return x"),)
    assert m.lines[_line_of(src, "tmp1 =")].kind == "square" and m.lines[_line_of(src, "tmp3 =")].kind == "sum"
    assert m.unmatched == []


def test_a_dropped_rounding_is_found_where_the_kernel_stays_float32() -> None:
    src = _norm_kernel("    tmp10 = tmp8.to(tl.float32)")
    m = analyse(parse_kernel("triton_test_norm", src), _body())
    fates = [(r.where, r.fate, r.kernel_line) for r in m.roundings]
    to_line = _statement("x = x.to(")
    assert fates == [((to_line,), "absent", _line_of(src, "tmp10 =")),       # x/RMS(x) never rounded to bf16
                     ((to_line,), "store", _line_of(src, "tl.store"))]       # the product rounds at the one store


def test_a_kept_rounding_is_found_as_the_cast_that_does_it() -> None:
    src = _norm_kernel("    tmp10 = tmp8.to(tl.bfloat16)")
    m = analyse(parse_kernel("triton_test_norm", src), _body())
    assert [r.fate for r in m.roundings] == ["cast", "store"]
    assert m.roundings[0].kernel_line == _line_of(src, "tmp10 =")


def test_a_kernel_the_body_does_not_explain_says_so() -> None:
    """An extra operation (γ added instead of multiplied) matches no statement and is listed, not hidden."""
    src = _norm_kernel("    tmp10 = tmp8.to(tl.float32)").replace("tmp11 = tmp10 * tmp9", "tmp11 = tmp10 + tmp9")
    m = analyse(parse_kernel("triton_test_norm", src), _body())
    assert _line_of(src, "tmp11 =") in m.unmatched and m.outputs == {}


def test_text_without_a_jit_function_is_none() -> None:
    assert parse_kernel("k", "def f(:") is None and parse_kernel("k", "x = 1\n") is None


def test_the_wrapper_names_which_return_value_each_store_writes() -> None:
    kernel = parse_kernel("triton_k", "@triton.jit\ndef triton_k(in_ptr0, out_ptr0, out_ptr1, xnumel, XBLOCK):\n"
                                      "    tmp0 = tl.load(in_ptr0 + (x0), None)\n")
    kernel.signature = {"in_ptr0": "*bf16", "out_ptr0": "*bf16", "out_ptr1": "*bf16", "xnumel": "i32"}
    code = "def call(args):\n    triton_k.run(arg0_1, buf4, buf2, 32, stream=stream0)\n    return (buf2, buf4, )\n"
    assert wrapper_returns(code, kernel) == ["out_ptr1", "out_ptr0"]
    assert wrapper_returns("def call(args):\n    return (buf2, )\n", kernel) is None


CUDA = REPO / "traces" / "cuda" / "trace.json"


@pytest.mark.skipif(not CUDA.is_file(), reason="traces/cuda (the H200 trace) is not committed in this checkout")
def test_the_h200_kernels_drop_exactly_the_roundings_behind_the_one_ulp_gaps() -> None:
    """rms_forward, add_rms_forward and SiluAndMul each lose one eager rounding; rotary keeps all of its own."""
    payload = json.loads(CUDA.read_text(encoding="utf-8"))
    absent: dict[str, int] = {}
    for mod in payload["kernels"]:
        text = (VENDOR / mod["file"]).read_text(encoding="utf-8")
        entry = next(r for r in payload["records"] if r["function"] == mod["function"] and r["kind"] == "entry")
        kinds = {v["name"]: "int" if "int" in v["dtype"] else "model" for v in entry["vars"] if v["role"] == "argument"}
        body = read_body(text, mod["function"], kinds)
        for k in mod["kernels"]:
            parsed = parse_kernel(k["name"], k["source"])
            m = analyse(parsed, body, wrapper_returns(mod["code"], parsed))
            assert m.unmatched == [] and m.outputs, (mod["function"], k["name"])
            absent[mod["function"]] = absent.get(mod["function"], 0) + sum(r.fate == "absent" for r in m.roundings)
    assert absent == {"RMSNorm.rms_forward": 2, "RMSNorm.add_rms_forward": 1, "SiluAndMul.forward": 1,
                      "RotaryEmbedding.forward": 0}
