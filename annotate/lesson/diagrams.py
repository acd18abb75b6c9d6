"""The element-level diagrams as data: cells, what each depends on, its arithmetic, counterexamples.

Pure Python over the computed claims (:mod:`annotate.lesson.table`): no torch, no HTML. Every value
is a claim computed from the vendored code (``swiglu.*``, ``rmsnorm.*``, ``counter.*``, ``traced.*``);
the arithmetic shown next to a cell (``out[2] = Σⱼ p[j]·W_d[2, j] = …``) is re-done here from the
displayed operands and must land on the vendored value, so a diagram never shows a sum that does
not add up. A claim that is missing, failed or no longer holds, or arithmetic that does not add up,
is a :class:`annotate.claims.ClaimError` naming the diagram and the number (the build stops).

``deps`` of a cell are the operands of its formula, exactly: the page highlights those.
"""
from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from annotate.claim_text import ClaimError, format_value
from annotate.project import DOCS_FOLDER

if TYPE_CHECKING:  # the table is imported where it is used, as in annotate.claims
    from annotate.lesson.table import Table

PAGE = "diagrams.md"
ARITHMETIC_TOL = 1e-4


@dataclass(frozen=True)
class Cell:
    """One element of a drawn vector or matrix."""

    id: str                     # "out.2", "wd.2.5": unique within its diagram
    value: float
    deps: tuple[str, ...] = ()  # ids of the operands of its formula (empty: an input)
    formula: str = ""           # the arithmetic with numbers ('' for inputs and weights)
    shown: str = ""             # how the cell prints its value when not n(value) (e.g. ε = 1e-06)

    @property
    def interactive(self) -> bool:
        return bool(self.formula)


@dataclass(frozen=True)
class Block:
    """A drawn vector or matrix: rows of cell ids, axis names (rows, columns) and index labels."""

    key: str
    title: str                  # Chinese · English
    symbol: str                 # e.g. "W_gu"
    shape: str                  # e.g. "[2F, H] = [12, 4]"
    row_axis: str
    col_axis: str
    row_labels: list[str]
    col_labels: list[str]
    rows: list[list[str]]
    row_groups: dict[int, str] = field(default_factory=dict)  # row index -> a group caption before it


@dataclass(frozen=True)
class Comparison:
    """One row of a counterexample: the right reading's value and the wrong one's."""

    label: str
    right: str
    wrong: str


@dataclass(frozen=True)
class Counterexample:
    """A wrong reading, run: its title carries no number (the page numbers them in its order, NUMBERS)."""

    key: str
    title: str       # Chinese
    title_en: str    # English
    claim: str       # the wrong reading, both languages
    rows: list[Comparison]
    verdict: str     # the measured outcome, both languages
    why: str         # why the reading fails, both languages


@dataclass
class Diagram:
    key: str
    title: str
    blocks: list[Block]
    cells: dict[str, Cell]
    counterexamples: list[Counterexample] = field(default_factory=list)
    notice: str = ""   # shown instead of the blocks when the diagram cannot be drawn (bilingual)

    def deps(self) -> dict[str, list[str]]:
        """Cell id -> its operands, for every interactive cell (what the page highlights)."""
        return {c.id: list(c.deps) for c in self.cells.values() if c.interactive}


# ---------------------------------------------------------------- reading claims

class Claims:
    """Claim values of one table, each lookup failing as one line naming the diagram."""

    def __init__(self, table: Any, diagram: str) -> None:
        self.table, self.diagram = table, diagram

    def __call__(self, name: str) -> Any:
        claim = self.table.claims.get(name)
        where = f"diagram {self.diagram}"
        if claim is None:
            why = self.table.failure(name)
            detail = f"could not be computed from the vendored code ({why})" if why else "is unknown"
            raise ClaimError(f"{where}: claim {name} {detail}; fix the diagram or annotate/lesson/")
        if claim.problem:
            raise ClaimError(f"{where}: claim {name} no longer holds: {claim.problem}; the vendored code "
                             "changed — update the diagram and its check in annotate/lesson/")
        return claim.value


def n(value: float) -> str:
    """A number as the page prints it (4 decimals at most, like the lesson)."""
    return format_value(float(value))


def term(value: float) -> str:
    """A number as a factor: parenthesised when negative."""
    return f"({n(value)})" if value < 0 else n(value)


def agree(diagram: str, what: str, shown: float, vendored: float, tol: float = ARITHMETIC_TOL) -> None:
    """The arithmetic shown must land on the vendored value (else the build stops)."""
    if not math.isclose(shown, vendored, rel_tol=tol, abs_tol=tol):
        raise ClaimError(f"diagram {diagram}: {what}: the arithmetic shown gives {shown:.6g}, "
                         f"the vendored code gave {vendored:.6g}; the vendored code changed — update the diagram")


def bf16(value: float) -> float:
    """``value`` rounded to bfloat16 (round to nearest even), as a float."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def _token_block(key: str, title: str, symbol: str, ids: list[list[str]], col_axis: str, size: str) -> Block:
    """A [token, axis] matrix: one row per token."""
    return Block(key, title, symbol, f"[token, {col_axis}] = [{len(ids)}, {size}]", "token", col_axis,
                 [str(t) for t in range(len(ids))], [str(i) for i in range(len(ids[0]))], ids)


# ---------------------------------------------------------------- SwiGLU

def _swiglu_token(c: Claims, t: int) -> dict[str, Any]:
    """Token ``t``'s claims: token 0 is the lesson's walk-through, token 1 its neighbour in one batch."""
    pre = "swiglu." if t == 0 else "swiglu.tok1."
    return {k: c(pre + k) for k in ("x", "gate_up", "gate", "up", "silu", "product", "out")}


def swiglu(table: Any) -> Diagram:
    """Two tokens through the vendored Qwen3MLP(H=4, F=6): x, W_gu, gate_up, gate/up, SiLU, p, W_d, out.

    Every formula of token t reads token t's row only: the MLP mixes H (and F), never tokens."""
    c = Claims(table, "swiglu")
    h, f, nt = int(c("swiglu.h")), int(c("swiglu.f")), int(c("swiglu.tokens"))
    w_gu = [c(f"swiglu.w_gate_row{j}") for j in range(f)] + [c(f"swiglu.w_up_row{j}") for j in range(f)]
    w_d = [c(f"swiglu.w_down_row{i}") for i in range(h)]
    tokens = [_swiglu_token(c, t) for t in range(nt)]
    cells: dict[str, Cell] = {}
    for j in range(2 * f):
        for i in range(h):
            cells[f"wgu.{j}.{i}"] = Cell(f"wgu.{j}.{i}", w_gu[j][i])
    for i in range(h):
        for j in range(f):
            cells[f"wd.{i}.{j}"] = Cell(f"wd.{i}.{j}", w_d[i][j])
    for t, tok in enumerate(tokens):
        cells.update(_swiglu_cells(t, tok, w_gu, w_d, h, f))
    idx = lambda k: [str(i) for i in range(k)]  # noqa: E731
    rows = lambda key, k: [[f"{key}.{t}.{j}" for j in range(k)] for t in range(nt)]  # noqa: E731
    blocks = [
        _token_block("x", "输入 Input x（每行一个 token one row per token）", "x", rows("x", h), "H", str(h)),
        Block("wgu", "合并权重 Merged weight gate_up_proj", "W_gu", f"[2F, H] = [{2 * f}, {h}]", "2F", "H",
              idx(2 * f), idx(h), [[f"wgu.{j}.{i}" for i in range(h)] for j in range(2 * f)],
              {0: "W_g（gate_proj，第 0 片 shard 0）", f: "W_u（up_proj，第 1 片 shard 1）"}),
        _token_block("gu", "合并投影 gate_up = x·W_guᵀ", "gate_up", rows("gu", 2 * f), "2F", str(2 * f)),
        _token_block("gate", "前半 gate = chunk[0]", "gate", rows("gate", f), "F", str(f)),
        _token_block("up", "后半 up = chunk[1]", "up", rows("up", f), "F", str(f)),
        _token_block("silu", "激活 SiLU(gate)", "SiLU(gate)", rows("silu", f), "F", str(f)),
        _token_block("p", "逐元素乘积 p = SiLU(gate) ⊙ up", "p", rows("p", f), "F", str(f)),
        Block("wd", "下投影权重 down_proj", "W_d", f"[H, F] = [{h}, {f}]", "H", "F", idx(h), idx(f),
              [[f"wd.{i}.{j}" for j in range(f)] for i in range(h)]),
        _token_block("out", "输出 out = p·W_dᵀ", "out", rows("out", h), "H", str(h)),
    ]
    return Diagram("swiglu", f"SwiGLU：{nt} 个 token，H = {h}，F = {f} · {nt} tokens", blocks, cells,
                   [swap_counterexample(table, c), relu_counterexample(c)])


def _swiglu_cells(t: int, tok: dict[str, Any], w_gu: list[list[float]], w_d: list[list[float]],
                  h: int, f: int) -> dict[str, Cell]:
    """Token ``t``'s cells: each formula uses that token's row and the shared weights, nothing else."""
    x, gu, gate, up = tok["x"], tok["gate_up"], tok["gate"], tok["up"]
    silu, prod, out = tok["silu"], tok["product"], tok["out"]
    cells: dict[str, Cell] = {}

    def add(cell: Cell) -> None:
        cells[cell.id] = cell

    for i in range(h):
        add(Cell(f"x.{t}.{i}", x[i]))
    for j in range(2 * f):
        agree("swiglu", f"gate_up[{t}, {j}]", sum(x[i] * w_gu[j][i] for i in range(h)), gu[j])
        terms = " + ".join(f"{term(x[i])}·{term(w_gu[j][i])}" for i in range(h))
        add(Cell(f"gu.{t}.{j}", gu[j], tuple([f"x.{t}.{i}" for i in range(h)] + [f"wgu.{j}.{i}" for i in range(h)]),
                 f"gate_up[{t}, {j}] = Σᵢ x[{t}, i]·W_gu[{j}, i] = {terms} = {n(gu[j])}"))
    for j in range(f):
        agree("swiglu", f"chunk: gate[{t}, {j}] = gate_up[{t}, {j}]", gu[j], gate[j], 0.0)
        agree("swiglu", f"chunk: up[{t}, {j}] = gate_up[{t}, {f + j}]", gu[f + j], up[j], 0.0)
        s = sigmoid(gate[j])
        agree("swiglu", f"SiLU(gate[{t}, {j}])", gate[j] * s, silu[j])
        silu_text = f"SiLU(z) = z·σ(z) = {term(gate[j])}·{n(s)} = {n(silu[j])}"
        add(Cell(f"gate.{t}.{j}", gate[j], (f"gu.{t}.{j}",),
                 f"gate[{t}, {j}] = gate_up[{t}, {j}] = z = {n(gate[j])}（前半 first half）；{silu_text}"))
        add(Cell(f"up.{t}.{j}", up[j], (f"gu.{t}.{f + j}",),
                 f"up[{t}, {j}] = gate_up[{t}, {f}+{j}] = {n(up[j])}（后半 second half）"))
        add(Cell(f"silu.{t}.{j}", silu[j], (f"gate.{t}.{j}",),
                 f"SiLU(gate[{t}, {j}]) = z·σ(z) = z/(1+e^(−z)) = {term(gate[j])}·{n(s)} = {n(silu[j])}"))
        agree("swiglu", f"p[{t}, {j}]", silu[j] * up[j], prod[j])
        add(Cell(f"p.{t}.{j}", prod[j], (f"silu.{t}.{j}", f"up.{t}.{j}"),
                 f"p[{t}, {j}] = SiLU(gate[{t}, {j}])·up[{t}, {j}] = {term(silu[j])}·{term(up[j])} = {n(prod[j])}"))
    for i in range(h):
        agree("swiglu", f"out[{t}, {i}]", sum(prod[j] * w_d[i][j] for j in range(f)), out[i])
        terms = " + ".join(f"{term(prod[j])}·{term(w_d[i][j])}" for j in range(f))
        add(Cell(f"out.{t}.{i}", out[i], tuple([f"p.{t}.{j}" for j in range(f)] + [f"wd.{i}.{j}" for j in range(f)]),
                 f"out[{t}, {i}] = Σⱼ p[{t}, j]·W_d[{i}, j] = {terms} = {n(out[i])}"))
    return cells


def swap_counterexample(table: Any, c: Claims) -> Counterexample:
    right_gate, wrong_gate = c("swiglu.gate"), c("counter.swap.gate")
    right, wrong = c("counter.swap.right_out"), c("counter.swap.out")
    worst = max(abs(a - b) for a, b in zip(right, wrong))
    return Counterexample(
        "swap", "chunk 的顺序读反", "chunk in the other order",
        "错误读法：x, y = gate_up.chunk(2) 的前一半是 up、后一半是 gate。"
        " · Wrong reading: the first half of the chunk is up, the second is gate.",
        [Comparison("进入 SiLU 的一半 the half given to SiLU", format_value(right_gate), format_value(wrong_gate)),
         Comparison("SiLU(…) ⊙ 另一半 product", format_value(c("swiglu.product")), format_value(c("counter.swap.product"))),
         Comparison("MLP 输出 out", format_value(right), format_value(wrong))],
        f"把权重按反的顺序装进 vendored Qwen3MLP 再运行：输出最大相差 {n(worst)}。"
        f" · Loading the weights the other way round into the vendored Qwen3MLP: the output moves by up to {n(worst)}.",
        "SiLU 只作用在 chunk 的第一片上；加载器把 gate_proj 放进第 0 片、up_proj 放进第 1 片。"
        "读反了，SiLU 就作用在 up 投影上，得到的是另一个函数。"
        " · SiLU applies to the first piece only, and the loader puts gate_proj in shard 0; read the other way, "
        "SiLU gates the wrong projection and the MLP computes a different function.")


def relu_counterexample(c: Claims) -> Counterexample:
    """The same weights with ReLU for SiLU: a negative gate lets nothing through instead of a little."""
    gate, right, wrong = c("swiglu.gate"), c("counter.relu.right_out"), c("counter.relu.out")
    worst = max(abs(a - b) for a, b in zip(right, wrong))
    return Counterexample(
        "relu", "把 SiLU 换成 ReLU（同样的权重）", "ReLU for SiLU on the same weights",
        "错误读法：SiLU 和 ReLU 差不多，换一个激活函数，输出几乎不变。"
        " · Wrong reading: SiLU is about ReLU, so swapping the activation barely changes the output.",
        [Comparison("gate（两者相同 same in both）", format_value(gate), format_value(c("counter.relu.gate"))),
         Comparison("激活 activation：SiLU(gate) | ReLU(gate)", format_value(c("swiglu.silu")), format_value(c("counter.relu.act"))),
         Comparison("乘积 product ⊙ up", format_value(c("swiglu.product")), format_value(c("counter.relu.product"))),
         Comparison("MLP 输出 out", format_value(right), format_value(wrong))],
        f"把 vendored Qwen3MLP 的 act_fn 换成 ReLU(x)·y 再运行（同样的权重、同样的 token）：输出最大相差 {n(worst)}。"
        f" · The vendored Qwen3MLP with its act_fn replaced by ReLU(x)·y (same weights, same token): the output moves "
        f"by up to {n(worst)}.",
        "SiLU(z) = z·σ(z) 在 z < 0 时不为零（负的 gate 仍漏过一点），在 z > 0 时也比 z 小；ReLU 把负值截成 0、正值原样通过。"
        "权重是为 SiLU 训练的，换了激活就是另一个函数。"
        " · SiLU(z) = z·σ(z) is not zero for z < 0 (a negative gate still leaks a little) and is below z for z > 0; "
        "ReLU cuts negatives to 0 and passes positives unchanged. Weights trained for SiLU compute another function under ReLU.")


# ---------------------------------------------------------------- RMSNorm, the lesson's example

def rmsnorm_example(table: Any) -> Diagram:
    """Two tokens (the lesson's x = [3, 4] and a neighbour), γ = [1, 1], ε = 0 through the vendored RMSNorm:
    x², one mean and one RMS per token (over H), γ (one per channel, shared by the tokens), output."""
    c = Claims(table, "rmsnorm")
    rows, gamma, eps = c("rmsnorm.batch.x"), c("rmsnorm.example.gamma"), float(c("rmsnorm.example.eps"))
    means, rmss, outs = c("rmsnorm.batch.mean_sq"), c("rmsnorm.batch.rms"), c("rmsnorm.batch.output")
    agree("rmsnorm", "token 0 is the lesson's example", rows[0][0], c("rmsnorm.example.x")[0], 0.0)
    h = len(rows[0])
    cells: dict[str, Cell] = {}
    for t, x in enumerate(rows):
        cells.update(_norm_cells("rmsnorm", t, list(range(h)), x, gamma, outs[t], float(means[t]), float(rmss[t]),
                                 eps, h, exact=True))
    blocks = _norm_blocks(list(range(h)), h, len(rows))
    return Diagram("rmsnorm", f"RMSNorm：{len(rows)} 个 token x = {format_value(rows)}，γ = {format_value(gamma)}，ε = {n(eps)}"
                   f" · {len(rows)} tokens", blocks, cells, [layernorm_counterexample(c), axis_counterexample(c)])


def _norm_cells(diagram: str, t: int, chans: list[int], x: list[float], gamma: list[float], out: list[float],
                mean: float, rms: float, eps: float, h: int, *, exact: bool, sum_sq: float | None = None) -> dict[str, Cell]:
    """Cells x, x², mean, RMS, y of token ``t`` for the channels ``chans`` (all H when exact), and the
    shared γ and ε. The mean of token t reads token t's squares only: RMSNorm reduces over H, per token."""
    cells: dict[str, Cell] = {}
    for i in chans:
        cells[f"x.{t}.{i}"] = Cell(f"x.{t}.{i}", x[i])
        cells[f"g.{i}"] = Cell(f"g.{i}", gamma[i])
        cells[f"sq.{t}.{i}"] = Cell(f"sq.{t}.{i}", x[i] * x[i], (f"x.{t}.{i}",),
                                    f"x[{t}, {i}]² = {term(x[i])}² = {n(x[i] * x[i])}")
    cells["eps"] = Cell("eps", eps, shown=f"{eps:g}")
    if exact:
        total = sum(v * v for v in x)
        agree(diagram, f"mean of squares of token {t}", total / h, mean)
        squares = " + ".join(n(x[i] * x[i]) for i in chans)
        mean_text = f"mean[{t}] = Σᵢ x[{t}, i]²/H（沿 H，只用 token {t} 这一行 over H, token {t}'s row only）= ({squares})/{h} = {n(mean)}"
    else:
        total = float(sum_sq if sum_sq is not None else 0.0)
        agree(diagram, "mean of squares", total / h, mean)
        mean_text = (f"mean[{t}] = Σᵢ x[{t}, i]²/H，对全部 {h} 个通道 over all {h} channels（图中只画 {len(chans)} 个 "
                     f"{len(chans)} drawn）= {n(total)}/{h} = {n(mean)}")
    cells[f"mean.{t}"] = Cell(f"mean.{t}", mean, tuple(f"sq.{t}.{i}" for i in chans), mean_text)
    agree(diagram, f"RMS of token {t}", math.sqrt(mean + eps), rms)
    cells[f"rms.{t}"] = Cell(f"rms.{t}", rms, (f"mean.{t}", "eps"),
                             f"RMS[{t}] = √(mean[{t}] + ε) = √({n(mean)} + {eps:g}) = {n(rms)}")
    for i in chans:
        deps = (f"x.{t}.{i}", f"rms.{t}", f"g.{i}")
        if exact:
            agree(diagram, f"y[{t}, {i}]", gamma[i] * x[i] / rms, out[i])
            text = f"y[{t}, {i}] = γ[{i}]·x[{t}, {i}]/RMS[{t}] = {term(gamma[i])}·{term(x[i])}/{n(rms)} = {n(out[i])}"
        else:  # the model dtype: x/RMS is rounded before γ, and the product again
            scaled = bf16(x[i] / rms)
            agree(diagram, f"y[{t}, {i}]", bf16(scaled * gamma[i]), out[i], 2.0 ** -7)
            text = (f"y[{t}, {i}] = bf16(bf16(x[{t}, {i}]/RMS[{t}])·γ[{i}]) = bf16({term(x[i])}/{n(rms)}) = {n(scaled)}；"
                    f"·{term(gamma[i])} → {n(out[i])}")
        cells[f"y.{t}.{i}"] = Cell(f"y.{t}.{i}", out[i], deps, text)
    return cells


def _norm_blocks(chans: list[int], h: int, tokens: int) -> list[Block]:
    """x, x², the per-token statistics, ε, γ (shape [H]: one weight per channel, shared by every token), y."""
    labels, rows = [str(i) for i in chans], [str(t) for t in range(tokens)]
    size = f"{h}" if len(chans) == h else f"{h}（画出 {len(chans)} 个 {len(chans)} drawn）"

    def per_token(key: str, title: str, symbol: str) -> Block:
        return Block(key, title, symbol, f"[token, H] = [{tokens}, {size}]", "token", "H", rows, labels,
                     [[f"{key}.{t}.{i}" for i in chans] for t in range(tokens)])

    return [per_token("x", "输入 Input x", "x"), per_token("sq", "平方 Squares x²", "x²"),
            Block("stats", "每个 token 的均方与均方根 Mean of squares and RMS, per token", "mean, RMS",
                  f"[token] = [{tokens}]（每个 token 两个值 two values per token）", "token", "", rows, ["mean", "RMS"],
                  [[f"mean.{t}", f"rms.{t}"] for t in range(tokens)]),
            Block("eps", "常数 Constant ε", "ε", "标量 scalar", "", "", [""], ["ε"], [["eps"]]),
            Block("g", "权重 Weight γ（每个通道一个，所有 token 共用 one per channel, shared by all tokens）", "γ",
                  f"[H] = [{size}]", "", "H", [""], labels, [[f"g.{i}" for i in chans]]),
            per_token("y", "输出 Output y = γ·x/RMS", "y")]


def layernorm_counterexample(c: Claims) -> Counterexample:
    return Counterexample(
        "layernorm", "当成 LayerNorm（先减均值）", "LayerNorm instead of RMSNorm",
        "错误读法：RMSNorm 和 LayerNorm 一样，先减去均值再除以标准差。"
        " · Wrong reading: RMSNorm subtracts the mean first and divides by the standard deviation, like LayerNorm.",
        [Comparison("减去的均值 mean subtracted", "0（不减 none）", n(c("counter.layernorm.mean"))),
         Comparison("被除的行 row divided", format_value(c("rmsnorm.example.x")), format_value(c("counter.layernorm.centred"))),
         Comparison("除数 divisor", f"RMS = {n(c('rmsnorm.example.rms'))}", f"σ = {n(c('counter.layernorm.rms'))}"),
         Comparison("输出 output", format_value(c("counter.layernorm.rmsnorm_output")), format_value(c("counter.layernorm.output")))],
        "两个输出都由 vendored RMSNorm 算出（LayerNorm 一栏是它作用在 x − mean 上，并与 torch 的 layer_norm 核对）：结果不同。"
        " · Both outputs come from the vendored RMSNorm (the LayerNorm column runs it on x − mean, checked against "
        "torch's layer_norm): they differ.",
        "rms_forward 里没有减均值这一步：它只按均方根缩放，保留 x 的方向（输出与 x 成比例）；"
        "LayerNorm 先把均值移走，[3, 4] 就变成了 [−1, 1]。"
        " · rms_forward has no mean subtraction: it only rescales by the root mean square and keeps x's direction "
        "(the output is proportional to x); LayerNorm removes the mean first and turns [3, 4] into [−1, 1].")


def axis_counterexample(c: Claims) -> Counterexample:
    """The two tokens normalised over the token axis (per channel) instead of over H (per token)."""
    rows, right, wrong = c("rmsnorm.batch.x"), c("counter.axis.right_output"), c("counter.axis.output")
    rms_t, rms_c = c("rmsnorm.batch.rms"), c("counter.axis.rms")
    table = [Comparison("求均方的轴 axis of the mean", "H：每个 token 一个 one per token", "token：每个通道一个 one per channel"),
             Comparison("除数 RMS", f"每个 token per token {format_value(rms_t)}", f"每个通道 per channel {format_value(rms_c)}")]
    table += [Comparison(f"token {t} 的输出 output（输入 input {format_value(x)}）", format_value(right[t]), format_value(wrong[t]))
              for t, x in enumerate(rows)]
    return Counterexample(
        "axis", "沿 token 轴归一化（轴取错）", "normalising over tokens (the wrong axis)",
        "错误读法：RMSNorm 对每个通道，沿 token 方向求均方再归一化。"
        " · Wrong reading: RMSNorm takes each channel's mean of squares over the tokens.",
        table,
        "把两个 token 转置后交给 vendored RMSNorm（这样它沿 token 轴求均方），再乘 γ：两个 token 的输出都变了。"
        " · The two tokens, transposed, through the vendored RMSNorm (so it averages over the token axis), times γ: "
        "both tokens' outputs change.",
        "rms_forward 沿最后一维（dim=-1，即 H）求均方：每个 token 各自归一化，与同一批里有哪些别的 token 无关。"
        "沿 token 轴求均值，一个 token 的输出就取决于它的邻居和批大小（解码时一批只有一个 token）。"
        " · rms_forward's mean runs over the last dimension, H: each token is normalised on its own, whatever else is in "
        "the batch. Averaging over tokens would make a token's output depend on its neighbours and on the batch size.")


# ---------------------------------------------------------------- RMSNorm on one recorded token

MISSING = ("没有可用的轨迹，这张图和它的两个反例暂缺：{why}。运行 `make site`（或 `annotate trace --preset tiny`）会录一条。"
           " · No usable trace, so this diagram and its two counterexamples are missing: {why}. "
           "`make site` (or `annotate trace --preset tiny`) records one.")


def traced_norm(table: Any) -> Diagram:
    """One recorded token through the vendored add_rms_forward: the TOP channels of largest |x|."""
    c = Claims(table, "traced")
    if not c("traced.available"):
        return Diagram("traced", "RMSNorm：轨迹中的一个 token · one recorded token", [], {},
                       notice=MISSING.format(why=c("traced.missing")))
    chans, h = list(c("traced.norm.channels")), int(c("traced.norm.hidden_size"))
    x, gamma, out = c("traced.norm.x"), c("traced.norm.gamma"), c("traced.norm.output")
    cells = _norm_cells("traced", 0, chans, x, gamma, out, float(c("traced.norm.mean_sq")), float(c("traced.norm.rms")),
                        float(c("traced.norm.eps")), h, exact=False, sum_sq=float(c("traced.norm.sum_sq")))
    title = (f"RMSNorm：轨迹 {c('traced.norm.trace')} 第 {c('traced.norm.layer')} 层 input_layernorm，"
             f"token {c('traced.norm.token')}，H = {h}，画出 |x| 最大的 {len(chans)} 个通道"
             f" · layer {c('traced.norm.layer')}, token {c('traced.norm.token')}, the {len(chans)} channels of largest |x|")
    return Diagram("traced", title, _norm_blocks(chans, h, 1), cells,
                   [x2_counterexample(c), order_counterexample(c)])


def x2_counterexample(c: Claims) -> Counterexample:
    chans, layer, tol = c("traced.x2.channels"), c("traced.x2.layer"), float(c("traced.x2.tolerance"))
    rows = [Comparison(f"通道 channel {i}：x₂ = {n(v)}", f"residual + hidden = {n(s)}", f"hidden_states = {n(hh)}")
            for i, v, s, hh in zip(chans, c("traced.x2.x2"), c("traced.x2.sum"), c("traced.x2.hidden"))]
    rows.append(Comparison("‖· − x₂‖/‖x₂‖（容差 tolerance "f"{n(tol)}）", n(c("traced.x2.rel_sum")), n(c("traced.x2.rel_hidden"))))
    found = c("traced.x2.found_at")
    return Counterexample(
        "x2", f"把第 {layer} 层返回的 hidden_states 当成 x₂", "the returned hidden_states as x₂",
        f"错误读法：Qwen3DecoderLayer.forward 返回的 hidden_states 就是 x₂⁽{layer}⁾。"
        f" · Wrong reading: the hidden_states layer {layer} returns is x₂⁽{layer}⁾.",
        rows,
        f"与轨迹里 HF 算出的 x₂⁽{layer}⁾ 相比，hidden_states 的相对误差是 {n(c('traced.x2.rel_hidden'))}，"
        f"residual + hidden_states 只有 {n(c('traced.x2.rel_sum'))}。轨迹把返回的 hidden_states 认作 "
        f"{c('traced.x2.hidden_label')}，residual 认作 {c('traced.x2.residual_label')}；等于 x₂⁽{layer}⁾ 的变量出现在 "
        f"{found}（相对距离 {n(c('traced.x2.found_rel'))}）。"
        f" · Against the trace's x₂⁽{layer}⁾ (HF's), hidden_states is off by {n(c('traced.x2.rel_hidden'))} (relative), "
        f"residual + hidden_states by {n(c('traced.x2.rel_sum'))}. The trace identified the returned hidden_states as "
        f"{c('traced.x2.hidden_label')} and the residual as {c('traced.x2.residual_label')}; x₂⁽{layer}⁾ itself turns "
        f"up at {found}.",
        "一层返回的是 (MLP 增量 m, x₁)：加法被推迟到下一层的 input_layernorm 里做。"
        " · A layer returns (the MLP increment m, x₁): the addition is deferred to the next layer's input_layernorm.")


def order_counterexample(c: Claims) -> Counterexample:
    differ = c("traced.order.differ")
    res, y, y_hf, ulps = c("traced.order.residual"), c("traced.norm.output"), c("traced.order.output_hf"), c("traced.order.ulps")
    rows = [Comparison(f"通道 channel {i}：bf16 残差 residual = {n(res[i])}", n(y[i]), f"{n(y_hf[i])}（差 {ulps[i]} ulp）")
            for i in differ]
    nd, total, mx = c("traced.order.n_diff"), c("traced.order.numel"), c("traced.order.max_ulps")
    return Counterexample(
        "order", "归一化舍入后的 bf16 残差", "normalising the rounded bf16 residual",
        "错误读法：add_rms_forward 归一化的就是它返回的那个 bf16 residual（HF 的顺序）。"
        " · Wrong reading: add_rms_forward normalises the bf16 residual it returns (HF's order).",
        rows or [Comparison("—", "—", "—")],
        f"在录下的参数上重跑 vendored 的 add_rms_forward（与轨迹逐位相同），再用 vendored 的 rms_forward 归一化舍入后的残差："
        f"{total} 个元素里有 {nd} 个不同，最多差 {mx} ulp；本 token 有 {c('traced.order.token_diff')} 个通道不同。"
        f" · Re-running the vendored add_rms_forward on the recorded arguments (bit-identical to the trace), then the "
        f"vendored rms_forward on the rounded residual: {nd} of {total} elements differ, by at most {mx} ulp; "
        f"{c('traced.order.token_diff')} channels of this token differ.",
        "nano-vllm 对 float32 的未舍入和做归一化，只把舍入后的副本存进 residual；舍入改变了和的末位，"
        "所以两种顺序的输出在一些通道上差 1–2 个 bf16 ulp。"
        " · nano-vllm normalises the unrounded float32 sum and only stores the rounded copy in residual; the "
        "rounding changes the sum's last bits, so the two orders' outputs differ by an ulp or two in some channels.")


BUILDERS = {"swiglu": swiglu, "rmsnorm": rmsnorm_example, "traced": traced_norm}
#: the page's order of diagrams, and each diagram's counterexamples in the order it draws them: the one home
#: of a counterexample's number (1, 2, … in page order), which the lesson cites as ``{{counterexample KEY}}``
PAGE_ORDER = ("swiglu", "rmsnorm", "traced")
COUNTEREXAMPLES = {"swiglu": ("swap", "relu"), "rmsnorm": ("layernorm", "axis"), "traced": ("x2", "order")}
#: a counterexample's number in prose: ``反例 {{counterexample swap}}``
COUNTEREXAMPLE_REF = re.compile(r"\{\{counterexample ([a-z0-9_]+)\}\}")


def counterexample_numbers() -> dict[str, int]:
    """Counterexample key -> its number on the page (1-based, in page order)."""
    keys = [k for d in PAGE_ORDER for k in COUNTEREXAMPLES[d]]
    return {k: i + 1 for i, k in enumerate(keys)}


def order_problem(placed: list[str], where: str) -> str | None:
    """One line when a page places diagrams out of PAGE_ORDER (the numbers would not follow the page)."""
    known = [k for k in placed if k in PAGE_ORDER]
    if known == sorted(known, key=PAGE_ORDER.index):
        return None
    return (f"{where}: diagrams placed in the order {', '.join(known)}; place them as {', '.join(PAGE_ORDER)} "
            "(counterexamples are numbered in that order) or change PAGE_ORDER in annotate/lesson/diagrams.py")


def ref_problems(text: str, where: str) -> list[str]:
    """One line per ``{{counterexample KEY}}`` whose key no diagram draws."""
    numbers = counterexample_numbers()
    return [f"{where}: unknown counterexample {key!r}; known: {', '.join(numbers)}"
            for key in COUNTEREXAMPLE_REF.findall(text) if key not in numbers]
#: a page places a diagram with a line of its own: ``{{diagram swiglu}}``
DIAGRAM_LINE = re.compile(r"^\{\{diagram ([a-z0-9_]+)\}\}\s*$", re.M)


def all_diagrams(table: Any, folder: str = DOCS_FOLDER) -> dict[str, Diagram]:
    """Every diagram of the page by key (each raising ClaimError when its numbers no longer hold);
    ``folder`` names the docs folder in messages (Project.docs_label)."""
    return {key: drawn(key, table, f"{folder}/{PAGE}") for key in BUILDERS}


def drawn(key: str, table: Any, where: str) -> Diagram:
    """One diagram; a number that no longer holds is one ClaimError line starting with ``where`` (the page)."""
    try:
        return BUILDERS[key](table)
    except ClaimError as exc:
        raise ClaimError(f"{where}: {exc}") from None


def page_problems(markdown: str, page: str, table: Callable[[], Table], folder: str = DOCS_FOLDER) -> list[str]:
    """One line per diagram placed on a page that cannot be drawn (for `annotate check`); ``folder`` names
    the docs folder in messages (Project.docs_label); ``table`` gives the claims, called only when the page
    places a diagram."""
    refs = ref_problems(markdown, f"{folder}/{page}")
    keys = DIAGRAM_LINE.findall(markdown)
    if not keys:
        return refs
    order = order_problem(keys, f"{folder}/{page}")
    claims, out = table(), refs + ([order] if order else [])
    for key in keys:
        if key not in BUILDERS:
            out.append(f"{folder}/{page}: unknown diagram {key!r}; known: {', '.join(BUILDERS)}")
            continue
        try:
            drawn(key, claims, f"{folder}/{page}")
        except ClaimError as exc:
            out.append(str(exc))
    return out
