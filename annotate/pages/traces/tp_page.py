"""张量并行 · Tensor parallel: the page walking one decoder block at TP=N, and the slice labels of the
values panels (which rank holds which heads, F columns or vocabulary ids; partial and full sums).

Everything here is read from a --tp trace (`annotate.trace.identify.shards` identified it): the shapes per
rank are the recorded shapes, each slice is the one the comparison with HF found, the bytes each
all_reduce moves per token are computed from the config and set beside what the trace's reduced
tensors hold. Without a --tp trace the page says how to record one.
"""
from __future__ import annotations

from typing import Any, Callable

from annotate.pages.base.folds import fold_assets, fold_table, fold_title, folded, folds
from annotate.pages.base.trace_set import TraceSet, TraceView
from annotate.pages.base.tracefmt import esc, num
from annotate.trace.format.schema import LineRecord, VarRecord
from annotate.trace.format.store import Trace

TP_URI = "trace/tp.md"
#: the statement text of the in-place all_reduce (annotate.trace.identify.shards finds it the same way; pages stay torch-free)
_ALL_REDUCE = "all_reduce("
_PARALLEL_FUNCTIONS = ("RowParallelLinear.forward", "VocabParallelEmbedding.forward")
#: the split dimension of a shard, in words (Chinese first)
SPLIT_WORDS = {"heads": "头 heads", "inter": "F 列", "vocab": "词表 id vocab ids"}
#: what each recorded shard is, in words
SHARD_WORDS = {"qkv": "q、k、v 投影 projections", "o": "注意力输出 attention output",
               "o_proj partial": "o_proj 部分和 partial sum", "gate_up": "gate、up 投影 projections",
               "act": "SiLU(gate) ⊙ up", "down_proj partial": "down_proj 部分和 partial sum",
               "embed partial": "嵌入部分和 embedding partial sum"}

_Href = Callable[..., str]


def tp_view(traces: TraceSet) -> TraceView | None:
    """The first trace recorded on more than one rank."""
    return next((v for v in traces.views if v.trace.tp > 1 and not v.pin_moved), None)


def split_key(key: str) -> tuple[str, int]:
    """A panel view key `2@1` (layer 2 on rank 1) -> ("2", 1); a plain layer key is rank 0."""
    layer, _, rank = key.partition("@")
    return layer, int(rank) if rank else 0


def _shards(trace: Trace) -> dict[tuple[int, str | None, str, str], dict[str, Any]]:
    return {(s["rank"], s.get("module"), s.get("function", ""), s.get("var", "")): s
            for s in trace.parallel.get("shards", []) if "module" in s}


def _after_reduce(records: list[LineRecord], rec: LineRecord) -> bool:
    """Whether `rec` (in a tensor-parallel forward) comes at or after its call's all_reduce line."""
    return any(r.module == rec.module and r.call == rec.call and _ALL_REDUCE in r.text and r.order <= rec.order
               for r in records if r.function == rec.function)


def slice_label(trace: Trace, rank: int, rec: LineRecord, v: VarRecord) -> str:
    """`秩 1 / 2 rank 1 of 2: F 列 64–127` for a shard the comparison placed; `Σ over 2 ranks` after an
    all_reduce; '' for a replicated value (or a single-rank trace)."""
    tp = trace.tp
    if tp < 2:
        return ""
    records = trace.records if rank == 0 else trace.ranks.get(rank, [])
    if rec.function in _PARALLEL_FUNCTIONS and v.name == "y" and _after_reduce(records, rec):
        return f"all_reduce 之后：{tp} 个 rank 的部分和之和 — after all_reduce: Σ over {tp} ranks (replicated)"
    shard = _shards(trace).get((rank, rec.module, rec.function, v.name))
    if shard is None or list(shard["shape"]) != list(v.shape):
        return ""
    found = shard["slice"]
    how = (f"与 HF 第 {found} 片一致 matches HF's slice {found}" if found is not None
           else _undecided(shard))
    return (f"秩 {rank} / {tp} rank {rank} of {tp}: {SPLIT_WORDS.get(shard['split'], shard['split'])} "
            f"{shard['first']}–{shard['last']} · {SHARD_WORDS.get(shard['what'], shard['what'])} · {how}")


def _undecided(shard: dict[str, object]) -> str:
    """A shard no single slice is named for: several within the margin, or none within tolerance."""
    close = shard.get("ambiguous") or []
    if isinstance(close, list) and close:
        names = "、".join(str(i) for i in close)
        return f"无法区分 ambiguous：第 {names} 片 slices {names} (margin below {shard.get('required')})"
    return "与 HF 的任何一片都不一致 matches no slice of HF"


def slice_html(trace: Trace, rank: int, rec: LineRecord, v: VarRecord) -> str:
    label = slice_label(trace, rank, rec, v)
    return f'<div class="an-slice" data-rank="{rank}">{esc(label)}</div>' if label else ""


# ---------------------------------------------------------------- the page

def render(traces: TraceSet, href: _Href) -> str:
    """The 张量并行 page from the first --tp trace (or how to record one)."""
    view = tp_view(traces)
    head = "---\ntitle: 张量并行 Tensor parallel\n---\n# 张量并行 · Tensor parallel\n\n"
    if view is None:
        return head + ("`traces/` 里没有多 rank 的轨迹 — no trace recorded on several ranks under `traces/`: run "
                       "`make site` (its `annotate trace` steps include `--preset tiny --tp 2`).\n")
    t = view.trace
    return head + "\n\n".join([_intro(view), _shapes(t, href, view.key), _reduces(t), _bytes(t), _shard_table(t),
                               _sums(t), _versus(t), fold_assets(TP_URI)]) + "\n"


def _intro(view: TraceView) -> str:
    t = view.trace
    return (f"nano-vllm 把每个投影切到 {t.tp} 个 rank 上：`QKVParallelLinear` 按注意力头切，`MergedColumnParallelLinear` "
            "按 F 切，`RowParallelLinear` 每个 rank 算一个部分和再 `all_reduce`，`VocabParallelEmbedding` 只查自己那段词表，"
            "其余置零后 `all_reduce`。因为 SwiGLU 在 F 上逐元素，"
            r"$\mathrm{MLP}(x)=\sum_r [\mathrm{SiLU}(x W_{g,r}^\top)\odot(x W_{u,r}^\top)]\,W_{d,r}^\top$，"
            "`all_reduce` 就是这个 Σ。下面的每个数都来自真实运行 "
            f"`traces/{esc(view.key)}`（{esc(t.provenance())}），每一片都是与 HF transformers 的张量比较后找到的。"
            f" nano-vllm splits every projection across {t.tp} ranks: heads for QKV, F for gate/up, a partial sum per "
            "rank then `all_reduce` for o_proj and down_proj, a vocabulary slice per rank for the embedding. SwiGLU is "
            "elementwise in F, so the MLP is a sum over ranks and the all_reduce is that Σ. Every number below is from "
            "the recorded run, and every slice was found by comparison with HF transformers' tensors.")


def _first(records: list[LineRecord], function: str, module: str, name: str) -> VarRecord | None:
    for r in records:
        if r.function == function and r.module == module and r.kind == "line" and r.source == "traced":
            v = r.var(name)
            if v is not None:
                return v
    return None


def _line_of(records: list[LineRecord], function: str, module: str, name: str) -> LineRecord | None:
    for r in records:
        if r.function == function and r.module == module and r.kind == "line" and r.var(name) is not None:
            return r
    return None


def _shapes(t: Trace, href: _Href, key: str) -> str:
    """One decoder block (layer 1, or 0), each step's recorded shape on every rank."""
    layer = 1 if t.layers()[1:] else 0
    attn, mlp = f"model.layers.{layer}.self_attn", f"model.layers.{layer}.mlp"
    steps = [("qkv = qkv_proj(x)", "Qwen3Attention.forward", attn, "qkv", "按头切 split by heads"),
             ("o = attn(q, k, v)", "Qwen3Attention.forward", attn, "o", "每个 rank 自己的头 own heads"),
             ("y = o W_o,rᵀ", "RowParallelLinear.forward", f"{attn}.o_proj", "y", "部分和 partial, all_reduce → 全和 full"),
             ("gate_up = x [W_g,r; W_u,r]ᵀ", "Qwen3MLP.forward", mlp, "gate_up", "按 F 切 split by F"),
             ("y = act W_d,rᵀ", "RowParallelLinear.forward", f"{mlp}.down_proj", "y", "部分和 partial, all_reduce → 全和 full")]
    ranks = [t.records] + [t.ranks.get(r, []) for r in range(1, t.tp)]
    head = "| 步骤 step | " + " | ".join(f"秩 rank {r}" for r in range(t.tp)) + " | |\n|" + " --- |" * (t.tp + 2) + "\n"
    rows = []
    for text, fn, module, name, note in steps:
        cells = []
        for r, recs in enumerate(ranks):
            v, rec = _first(recs, fn, module, name), _line_of(recs, fn, module, name)
            link = f"{esc(v.shape)}" if v else "—"
            if v and rec is not None:
                url = href(rec.file, rec.line, layer=layer, trace=key) + (f"&rank={r}" if r else "")
                link = f'<a href="{esc(url)}">{esc(v.shape)}</a>'   # raw HTML: MkDocs leaves `#L…&…` links alone
            cells.append(link)
        rows.append(f"| `{text}` | " + " | ".join(cells) + f" | {note} |")
    return (f"## 一个解码层，每个 rank 的形状 · One decoder block (layer {layer}), shapes per rank\n\n"
            "点击形状打开该秩（rank）的值面板。Click a shape to open that rank's values panel.\n\n" + head + "\n".join(rows))


def _reduces(t: Trace) -> str:
    """How many all_reduces ran per layer on rank 0, counted from the recorded lines."""
    per_layer: dict[int | None, int] = {}
    for r in t.records:
        if r.function in _PARALLEL_FUNCTIONS and _ALL_REDUCE in r.text:
            per_layer[r.layer] = per_layer.get(r.layer, 0) + 1
    rows = "\n".join(f"| {'嵌入 embedding' if k is None else f'第 {k} 层 layer {k}'} | {n} |"
                     for k, n in sorted(per_layer.items(), key=lambda kv: -1 if kv[0] is None else kv[0]))
    return ("## 每层两次 all_reduce · Two all_reduces per layer\n\n"
            "轨迹里执行过的 `dist.all_reduce(y)` 行数（秩 0 rank 0）。 Executed `all_reduce` lines in the trace (rank 0).\n\n"
            "| 位置 where | all_reduce |\n| --- | --- |\n" + rows)


def _bytes(t: Trace) -> str:
    b = t.parallel.get("bytes", {})
    measured = b.get("measured_per_all_reduce", [])
    ok = measured == [b.get("per_all_reduce")]
    check = ("✓ 与轨迹一致 matches the trace" if ok else f"✗ 轨迹中是 the trace holds {measured}")
    hidden = int(t.meta["model"]["config"]["hidden_size"])
    width = int(b.get("per_all_reduce", 0)) // max(hidden, 1)
    return ("## 每个 token 传多少字节 · Bytes per token\n\n"
            f"每次 all_reduce 归约一个 H 维向量：H × dtype 字节 = {hidden} × {width}"
            f" = **{num(b.get('per_all_reduce'))} B**（{check}）；每层两次 = {num(b.get('per_layer'))} B；"
            f"整个前向 {num(b.get('all_reduces'))} 次（含嵌入）。环形 all_reduce 每个 rank 发送 2(N−1)/N 倍 = "
            f"{num(b.get('ring_per_rank_per_all_reduce'))} B。"
            f" Each all_reduce reduces one H-vector per token: {num(b.get('per_all_reduce'))} B from the config "
            f"({'the recorded reduced tensors hold the same' if ok else 'the trace differs'}); two per layer; a ring "
            "all_reduce sends 2(N−1)/N of it per rank.")


#: what the fold outside the layers holds on this page
_OUTSIDE = "(embedding, lm_head)"
#: the columns of the shard table and of the after-all_reduce table
_SHARD_HEAD = ("秩 rank", "张量 tensor", "切片 slice", "形状 shape", "匹配 found", "相对差 rel")
_VERSUS_HEAD = ("模块 module", "函数 function", "变量 var", "max |Δ|", "ulp", "容差内 within")


def _by_layer(rows: list[dict[str, Any]]) -> list[tuple[int | None, list[dict[str, Any]]]]:
    """``rows`` grouped by their ``layer`` (None, outside the layers, first), each group in its order."""
    layers = sorted({r.get("layer") for r in rows}, key=lambda k: -1 if k is None else int(k))
    return [(k, [r for r in rows if r.get("layer") == k]) for k in layers]


def _shard_table(t: Trace) -> str:
    """Every shard against every slice of HF's tensor, one fold a layer whose summary counts the found ones."""
    blocks = []
    for layer, shards in _by_layer(t.parallel.get("shards", [])):
        rows, found = [], 0
        for s in shards:
            d = s["distances"][s["slice"]] if s.get("slice") is not None else None
            found += d is not None
            what = f"第 {s['slice']} 片 slice {s['slice']}" if d is not None else _undecided(s)
            rows.append(f"<tr><td>{s['rank']}</td><td>{esc(SHARD_WORDS.get(s['what'], s['what']))}</td>"
                        f"<td>{esc(SPLIT_WORDS.get(s.get('split', ''), ''))} {s.get('first', '')}–{s.get('last', '')}</td>"
                        f"<td>{esc(s['shape'])}</td><td>{what}</td><td>{num(d['rel'], 2) if d else '—'}</td></tr>")
        count = (f"{len(shards)} 片全部认出 · all {len(shards)} shards found" if found == len(shards)
                 else f"{len(shards)} 片中 {len(shards) - found} 片未认出 · {len(shards) - found} of {len(shards)} not found")
        blocks.append(folded("an-tp-layer", fold_title(layer, _OUTSIDE), count,
                             fold_table("an-tp-rows", _SHARD_HEAD, rows)))
    return ("## 每一片都由比较找到 · Every shard, identified by comparison\n\n"
            "每个 rank 记录的分片与 HF 张量的**每一片**比较（相对 L2），列出在容差内、"
            "且次近的一片至少远出裕度倍数的那一片（与每个 ≡ 同一规则）。每层折叠，点开即见。"
            " Each recorded shard is compared with every rank's slice of HF's tensor (relative L2); the slice "
            "within tolerance is listed, when the next-nearest slice is at least the margin farther (as for every ≡). "
            "One fold a layer: tap to open.\n\n" + folds(blocks, switch=False))


def _sums(t: Trace) -> str:
    names = {"attn": "Attn 增量 increment", "mlp": "MLP 增量 increment", "x": "x⁽⁰⁾"}
    rows = [f"| `{esc(s['module'])}` | {esc(names.get(s['peer'], s['peer']))} | {num(s['max_abs'])} | "
            f"{num(s['scale_ulps'], 2)} | {'✓' if s['within'] else '✗'} |" for s in t.parallel.get("sums", [])]
    return ("## Σ 部分和 = 增量 · Σ of the partial sums = the increments\n\n"
            "| 模块 module | HF 变量 peer | max \\|Δ\\| | ulp（最大值的）ulps of the largest | 容差内 within |\n"
            "| --- | --- | --- | --- | --- |\n" + "\n".join(rows))


def _versus(t: Trace) -> str:
    rows = t.parallel.get("vs_tp1", [])
    worst = max((r["scale_ulps"] for r in rows), default=0)
    exact = sum(1 for r in rows if r["max_abs"] == 0)
    blocks = []
    for layer, mine in _by_layer(rows):
        differ = [r for r in mine if r["max_abs"] > 0]
        cells = [f"<tr><td><code>{esc(r['module'])}</code></td><td>{esc(r['function'])}</td><td><code>{esc(r['name'])}</code>"
                 f"</td><td>{num(r['max_abs'])}</td><td>{num(r['scale_ulps'], 2)}</td><td>{'✓' if r['within'] else '✗'}</td></tr>"
                 for r in differ]
        most = max((r["scale_ulps"] for r in differ), default=0)
        count = (f"{len(mine)} 个中 {len(differ)} 个不同，最多 {num(most, 2)} ulp · {len(differ)} of {len(mine)} differ, "
                 f"at most {num(most, 2)} ulps" if differ else f"{len(mine)} 个全部逐位相同 · all {len(mine)} bit-identical")
        blocks.append(folded("an-tp-layer", fold_title(layer, _OUTSIDE), count,
                             fold_table("an-tp-rows", _VERSUS_HEAD, cells)
                             if cells else '<p class="an-fold-none">这一层没有不同的张量 · nothing here differs.</p>'))
    return ("## all_reduce 之后 vs `--tp 1` · After all_reduce vs `--tp 1`\n\n"
            f"all_reduce 之后的 {len(rows)} 个张量中 {exact} 个与单 rank 运行逐位相同；其余因求和顺序不同而舍入不同，"
            f"最多差最大值的 **{num(worst, 2)} ulp**。下面每层只列不同的张量。"
            f" Of {len(rows)} tensors after an all_reduce, {exact} are bit-identical to the one-rank run; the others "
            f"round differently because the sum runs in another order: at most **{num(worst, 2)} ulps** of the "
            "largest value. Each layer's fold lists the ones that differ.\n\n" + folds(blocks, switch=False))
