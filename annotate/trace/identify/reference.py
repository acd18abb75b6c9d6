"""The independent peer: HF transformers' Qwen3 on the same checkpoint, and identification.

The peer captures, per layer ℓ, the textbook variables

    x, RMSNorm₁(x), Attn(RMSNorm₁(x)), x₁ = x + Attn(·), RMSNorm₂(x₁), MLP(RMSNorm₂(x₁)), x₂ = x₁ + MLP(·)

and the final norm output, with forward hooks (nothing in the peer is modified); and RMSNorm's own
steps for each of its three norms: mean(v²) and v/RMS(v) (normalised, before γ), where v is the norm's
input. Those two are *recomputed* from the hooked input with the very operations of HF's
``Qwen3RMSNorm.forward`` (to float32, ``pow(2).mean(-1, keepdim=True)``, ``* rsqrt(· + eps)``), since
no hook sees a value inside a forward; γ ⊙ v/RMS(v) is the norm's output itself (RMSNorm₁ etc.).

Every tensor the recorder saw is then compared with *all* candidates of its shape (a prefilter skips
the full comparison only where a sure lower bound proves a candidate cannot change the decision). It is labelled
≡ v only when v is within tolerance *and* every other candidate is clearly farther (:data:`MARGIN`);
when a second candidate is about as close, the identity is "ambiguous" and lists them. Nothing is
assumed from line numbers: if nano-vllm's `residual` holds x₁ after line 156, it is because it equals
HF's x₁ there and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from annotate.trace.model.numerics import Side, coarser, side_distance

#: ‖Δ‖₂ / ‖candidate‖₂ still called "the same variable", per compared dtype. Rounding noise is
#: ~2⁻⁹ relative in bf16; nano-vllm and HF round at different places (rope in fp32 vs bf16, the
#: unrounded vs rounded residual), and that noise grows a little per layer. Distinct variables are
#: apart by a whole increment (≳ 10 % of the norm).
TOLERANCE = {"bfloat16": 2.0 ** -4, "float16": 2.0 ** -7, "float32": 2.0 ** -12}

#: How clearly the best candidate must win for a ≡: the runner-up (the nearest candidate holding another
#: value) must be at least MARGIN times as far as the best, the best counted at no less than
#: tolerance / MARGIN — so a runner-up inside the tolerance never lets a ≡ through. The stored
#: ``margin`` of an identity is that ratio, runner-up rel / max(best rel, tolerance / MARGIN).
#: Measured on the default bf16 trace (qwen3-0.6b, 4 layers × 32 tokens, the generated checkpoint of
#: annotate/trace/model/runtime.py): every right identity sits at rel ≤ 0.0193 (rounding noise, growing per layer)
#: and its runner-up at rel ≥ 0.094 (the closest pair: mean((x₁⁽³⁾)²) vs mean((x₂⁽³⁾)²); between vectors a
#: whole increment or the normalisation, rel ≥ 0.19): margins ≥ 6.0 there. The old N(0, 1) embedding (token
#: RMS ≈ 1) put x⁽⁰⁾ and x⁽⁰⁾/RMS(x⁽⁰⁾) at rel 0.0185, inside the tolerance: margin ≤ 1.2, ambiguous.
MARGIN = 4.0

_PREFERENCE = {"x2": 0, "x": 2}  # x(ℓ) and x₂(ℓ−1) are one tensor: name the one the code produced


@dataclass(frozen=True)
class MathVarDef:
    """One textbook variable: key, unicode label template and LaTeX template ({l} = layer)."""

    key: str
    label: str
    latex: str


MATH_VARS: dict[str, MathVarDef] = {d.key: d for d in (   # in the order they arise in a layer
    MathVarDef("x", "x⁽{l}⁾", r"x^{{({l})}}"),
    # RMSNorm's own steps, per norm (1, 2, f): mean of squares and the normalised input before γ
    MathVarDef("ms1", "mean((x⁽{l}⁾)²)", r"\operatorname{{mean}}((x^{{({l})}})^2)"),
    MathVarDef("xhat1", "x⁽{l}⁾/RMS(x⁽{l}⁾)", r"x^{{({l})}}/\mathrm{{RMS}}(x^{{({l})}})"),
    MathVarDef("rmsnorm1", "RMSNorm₁(x⁽{l}⁾)", r"\mathrm{{RMSNorm}}_1(x^{{({l})}})"),
    MathVarDef("attn", "Attn(RMSNorm₁(x⁽{l}⁾))", r"\mathrm{{Attn}}(\mathrm{{RMSNorm}}_1(x^{{({l})}}))"),
    MathVarDef("x1", "x₁⁽{l}⁾", r"x_1^{{({l})}}"),
    MathVarDef("ms2", "mean((x₁⁽{l}⁾)²)", r"\operatorname{{mean}}((x_1^{{({l})}})^2)"),
    MathVarDef("xhat2", "x₁⁽{l}⁾/RMS(x₁⁽{l}⁾)", r"x_1^{{({l})}}/\mathrm{{RMS}}(x_1^{{({l})}})"),
    MathVarDef("rmsnorm2", "RMSNorm₂(x₁⁽{l}⁾)", r"\mathrm{{RMSNorm}}_2(x_1^{{({l})}})"),
    MathVarDef("mlp", "MLP(RMSNorm₂(x₁⁽{l}⁾))", r"\mathrm{{MLP}}(\mathrm{{RMSNorm}}_2(x_1^{{({l})}}))"),
    MathVarDef("x2", "x₂⁽{l}⁾", r"x_2^{{({l})}}"),
    MathVarDef("msf", "mean((x₂⁽{l}⁾)²)", r"\operatorname{{mean}}((x_2^{{({l})}})^2)"),
    MathVarDef("xhatf", "x₂⁽{l}⁾/RMS(x₂⁽{l}⁾)", r"x_2^{{({l})}}/\mathrm{{RMS}}(x_2^{{({l})}})"),
    MathVarDef("final_norm", "RMSNorm_f(x₂⁽{l}⁾)", r"\mathrm{{RMSNorm}}_f(x_2^{{({l})}})"),
)}


@dataclass
class MathValue:
    """A captured peer value: variable `key` of layer `layer` (final_norm: layer = last layer)."""

    key: str
    layer: int
    tensor: torch.Tensor

    @property
    def label(self) -> str:
        return MATH_VARS[self.key].label.format(l=self.layer)

    @property
    def latex(self) -> str:
        return MATH_VARS[self.key].latex.format(l=self.layer)


@dataclass
class Match:
    """How close a recorded tensor is to one peer variable."""

    key: str
    layer: int
    label: str
    latex: str
    max_abs: float
    max_ulps: int
    scale_ulps: float
    rel: float
    dtype: str
    token_rel: float = 0.0   # the worst token's relative distance (rule 2; see TOKEN_FACTOR)


@dataclass
class Identity:
    """`status`: "match" (`matches`: the best candidate and those holding the very same value, e.g. x⁽ℓ⁾ and
    x₂⁽ℓ−1⁾), "ambiguous" (`matches`: candidates too close to tell apart, best first; no ≡), "no match"
    (`nearest` given) or "no candidate" (no peer of that shape). `runner_up` is the nearest candidate
    holding another value than the best, `margin` how clearly the best wins (see :data:`MARGIN`,
    stored as `required`), in scores (see `Identifier`); None when there is no other candidate.
    `context`: the call (``{"layer", "norm"}``) among whose candidates the identity was decided, when
    the comparison with all of them left an ambiguity (see :class:`CallContext`); `outside`: the
    candidates that ambiguity listed from outside the call, set aside (else None and empty)."""

    status: str
    matches: list[Match] = field(default_factory=list)
    nearest: Match | None = None
    tolerance: float = 0.0
    runner_up: Match | None = None
    margin: float | None = None
    required: float = MARGIN
    context: dict[str, Any] | None = None
    outside: list[Match] = field(default_factory=list)


@dataclass
class PeerRun:
    """Everything the peer (HF transformers) produced for one prefill. (Not to be confused with a
    prose reference to code: that is `annotate.references`.)"""

    values: list[MathValue]
    attn_implementation: str
    transformers_version: str

    def get(self, key: str, layer: int) -> torch.Tensor:
        for v in self.values:
            if v.key == key and v.layer == layer:
                return v.tensor
        raise KeyError((key, layer))


def _first(x: Any) -> torch.Tensor:
    return x[0] if isinstance(x, (tuple, list)) else x


def _grab(store: dict[tuple[str, int], torch.Tensor], key: str, layer: int, t: torch.Tensor) -> None:
    store[(key, layer)] = t.detach().to("cpu").clone()


def _grab_steps(store: dict[tuple[str, int], torch.Tensor], which: str, layer: int, norm: Any, x: torch.Tensor) -> None:
    """RMSNorm's steps on its input `x`, recomputed with the operations of HF's ``Qwen3RMSNorm.forward``
    (float32, mean of squares over the last dim, times rsqrt(· + eps)): mean(x²) and x/RMS(x)."""
    h = x.detach().to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    _grab(store, f"ms{which}", layer, variance)
    _grab(store, f"xhat{which}", layer, h * torch.rsqrt(variance + norm.variance_epsilon))


def _norm_hook(store: dict[tuple[str, int], torch.Tensor], which: str, layer: int) -> Any:
    def hook(mod: Any, args: tuple[Any, ...]) -> None:
        _grab_steps(store, which, layer, mod, args[0])
    return hook


def _hooks(model: Any, store: dict[tuple[str, int], torch.Tensor]) -> list[Any]:
    """Forward hooks on the peer's modules; each stores one math variable."""
    handles = []
    layers = model.model.layers
    for i, layer in enumerate(layers):
        def pre_layer(mod, args, kwargs, i=i):
            _grab(store, "x", i, args[0] if args else kwargs["hidden_states"])
        handles.append(layer.register_forward_pre_hook(pre_layer, with_kwargs=True))
        handles.append(layer.register_forward_hook(lambda m, a, o, i=i: _grab(store, "x2", i, _first(o))))
        handles.append(layer.input_layernorm.register_forward_pre_hook(_norm_hook(store, "1", i)))
        handles.append(layer.input_layernorm.register_forward_hook(lambda m, a, o, i=i: _grab(store, "rmsnorm1", i, o)))
        handles.append(layer.self_attn.register_forward_hook(lambda m, a, o, i=i: _grab(store, "attn", i, _first(o))))
        handles.append(layer.post_attention_layernorm.register_forward_pre_hook(lambda m, a, i=i: _grab(store, "x1", i, a[0])))
        handles.append(layer.post_attention_layernorm.register_forward_pre_hook(_norm_hook(store, "2", i)))
        handles.append(layer.post_attention_layernorm.register_forward_hook(lambda m, a, o, i=i: _grab(store, "rmsnorm2", i, o)))
        handles.append(layer.mlp.register_forward_hook(lambda m, a, o, i=i: _grab(store, "mlp", i, o)))
    last = len(layers) - 1
    handles.append(model.model.norm.register_forward_pre_hook(_norm_hook(store, "f", last)))
    handles.append(model.model.norm.register_forward_hook(lambda m, a, o: _grab(store, "final_norm", last, o)))
    return handles


def run_reference(checkpoint: Path, layers: int, dtype: torch.dtype, device: torch.device,
                  input_ids: torch.Tensor, attn_implementation: str = "eager") -> PeerRun:
    """Load HF's Qwen3ForCausalLM from `checkpoint` (cut to `layers`) and capture the math variables."""
    import transformers
    from transformers import Qwen3ForCausalLM

    transformers.logging.set_verbosity_error()
    model = Qwen3ForCausalLM.from_pretrained(
        str(checkpoint), torch_dtype=dtype, num_hidden_layers=layers, attn_implementation=attn_implementation,
    ).to(device).eval()
    store: dict[tuple[str, int], torch.Tensor] = {}
    handles = _hooks(model, store)
    try:
        with torch.inference_mode():
            ids = input_ids.to(device)[None]
            model.model(input_ids=ids, position_ids=torch.arange(ids.shape[1], device=device)[None], use_cache=False)
    finally:
        for h in handles:
            h.remove()
    order = list(MATH_VARS)
    values = [MathValue(k, n, t[0] if t.dim() == 3 else t) for (k, n), t in
              sorted(store.items(), key=lambda kv: (kv[0][1], order.index(kv[0][0])))]
    return PeerRun(values, attn_implementation, transformers.__version__)


def one_tensor(a: MathValue, b: MathValue) -> bool:
    """Whether two peer variables are one tensor by construction: a layer's output x₂⁽ℓ⁾ is the next layer's
    input x⁽ℓ⁺¹⁾. (Two variables that merely hold equal values at some checkpoint, like x and x/RMS(x) when
    a token's RMS is 1, are not: that is an ambiguity, not a second name.)"""
    pair = {(a.key, a.layer), (b.key, b.layer)}
    return any(pair == {("x2", v.layer), ("x", v.layer + 1)} for v in (a, b))


def separation(best_rel: float, runner_rel: float, tolerance: float) -> float:
    """How clearly the best candidate wins: runner-up rel / max(best rel, tolerance / MARGIN). A ≡ needs
    at least :data:`MARGIN`, i.e. a runner-up MARGIN times as far as the best and beyond the tolerance."""
    return runner_rel / max(best_rel, tolerance / MARGIN)


#: The identification rule a trace's identities were decided by, stored as ``meta.reference.rule``
#: (a trace without it was decided by rule 1). Rule 1: relative L2 over the whole tensor, every
#: candidate rounded to the dtype of the peer's first value (bf16 in a bf16 run, so float32 means of
#: squares were compared in bf16), no call context. Rule 2 (this module): each candidate in its own
#: compared dtype, the whole tensor and its worst token (:data:`TOKEN_FACTOR`), and the call's
#: context breaking a tie the comparison leaves (:class:`CallContext`).
RULE = 2

#: The second criterion of a comparison: the worst token's relative distance
#: max_i ‖t_i − c_i‖ / ‖c_i‖ (i: the first axis, the tokens) is held to TOKEN_FACTOR × the tolerance.
#: Over the whole tensor the tokens of large norm decide; per token, a candidate that differs clearly at
#: some tokens is told apart even when it agrees over the tensor. Measured on a 28-layer bf16 trace of
#: the tiny shape (32 tokens, generated checkpoint): right identities' worst token ≤ 2.7 × their
#: whole-tensor distance and ≤ 0.048 in all (MLP(·) of layer 27), 2.6 × inside 2 × 2⁻⁴.
TOKEN_FACTOR = 2.0


@dataclass(frozen=True)
class CallContext:
    """The call a tensor was recorded in: its decoder layer (None outside the layers) and which of the
    peer's norms the call is (``"1"`` input_layernorm, ``"2"`` post_attention_layernorm, ``"f"`` the
    final norm; None outside a norm).

    It restricts, never decides: candidates in context are the layer's own and the previous layer's
    values (a layer's norm completes the previous layer's x₂), and a norm's steps (mean(v²), v/RMS(v))
    only inside that norm's call. Only when the comparison with every candidate leaves an ambiguity
    whose best candidate is in context is the identity decided again among the in-context candidates,
    by the same tolerance and margin; the candidates set aside are kept (``Identity.outside``). A
    tensor whose nearest candidate lies outside its call keeps the decision among all candidates."""

    layer: int | None
    norm: str | None


_NORM_MODULES = {"input_layernorm": "1", "post_attention_layernorm": "2"}


def call_context(layer: int | None, module: str | None) -> CallContext:
    """The context of a record in `module` (``model.layers.3.input_layernorm``) at `layer`."""
    tail = (module or "").rsplit(".", 1)[-1]
    return CallContext(layer, _NORM_MODULES.get(tail) or ("f" if module == "model.norm" else None))


def _norm_step(key: str) -> str | None:
    """Which norm a variable is a step of (``ms2`` → ``"2"``), None when it is no norm's step."""
    for prefix in ("ms", "xhat"):
        if key.startswith(prefix):
            return key[len(prefix):]
    return None


def in_context(value: MathValue, ctx: CallContext) -> bool:
    """Whether a peer variable belongs to the call `ctx` (see :class:`CallContext`)."""
    step = _norm_step(value.key)
    if step is not None:
        return step == ctx.norm and (ctx.layer is None or value.layer == ctx.layer)
    return ctx.layer is None or value.layer in (ctx.layer - 1, ctx.layer)


#: candidates × elements up to which every candidate is compared in full (no prefilter): below it the
#: prefilter's own steps cost about as much as the comparisons they save; 0 prefilters whatever the size
_WHOLE_STACK = 1 << 13

#: candidates compared in full first (the nearest by bound), to bound what the decision reads
_CHUNK = 4

#: the prefilter's lower bounds are shrunk by this much before they rule a candidate out, so that
#: the rounding of the full comparison can never make a candidate nearer than its bound says
_BOUND_SLACK = 1e-3

#: float64's unit roundoff: the products' rounding error is bounded with it (see `Identifier._bounds`)
_UNIT_ROUNDOFF = 2.0 ** -53

#: recorded elements (tensors × elements each) identified in one batch (the prefilter's products in one
#: matrix product, the full comparisons of a round in one pass)
_BATCH_ELEMENTS = 1 << 22

#: elements of the pairwise differences one full-comparison pass holds at a time
_PAIR_ELEMENTS = 1 << 23


@dataclass
class _Pool:
    """Every peer value of one shape, as recorded tensors of one dtype are compared with it: row r is
    candidate r rounded to its compared dtype (the coarser of the two), as float32 on the identifier's
    device, with its tolerance, its L2 norm and its tokens' norms; for the prefilter the same rows in
    float64 with their squared norms. Built once per (shape, recorded dtype)."""

    values: list[MathValue]
    dtypes: list[torch.dtype]        # the distinct compared dtypes
    row_dtype: torch.Tensor          # per row: index into `dtypes`
    tols: torch.Tensor               # per row: tolerance (float64)
    stack: torch.Tensor              # rows × elements, float32
    norms: torch.Tensor              # rows, float64
    token_norms: torch.Tensor        # rows × tokens, float64
    stack64: torch.Tensor
    squares64: torch.Tensor
    tokens: int
    device: torch.device

    def equal(self, a: int, b: int) -> bool:
        """Whether rows `a` and `b` hold the very same values in the very same dtype."""
        return self.dtypes[int(self.row_dtype[a])] == self.dtypes[int(self.row_dtype[b])] and \
            torch.equal(self.stack[a], self.stack[b])


@dataclass
class _Scored:
    """What the full comparison of one recorded tensor with one candidate found."""

    score: float      # max(rel, token_rel / TOKEN_FACTOR) / tolerance: ≤ 1 within tolerance
    rel: float        # ‖t − c‖ / ‖c‖ in the compared dtype
    token_rel: float  # max over tokens of ‖t_i − c_i‖ / ‖c_i‖


def _ratio(dist: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
    """dist / norm, 0 where both are 0 and inf where only the norm is."""
    safe = torch.where(norm > 0, dist / norm.clamp_min(1e-300), torch.where(dist > 0, torch.inf, 0.0))
    return torch.nan_to_num(safe, nan=torch.inf)


def _tokens(shape: tuple[int, ...]) -> int:
    """Tokens of a recorded shape: its first axis (a tensor of fewer than two axes is one token)."""
    return shape[0] if len(shape) >= 2 else 1


class Identifier:
    """Compares recorded tensors with every peer variable of the same shape.

    A comparison measures the recorded tensor t against a candidate c in their coarser dtype (a float32
    mean of squares against the peer's float32 one, a bf16 residual against its bf16 one) by two
    relative distances: over the whole tensor, ‖t − c‖/‖c‖, and at the worst token (:data:`TOKEN_FACTOR`);
    its *score* is the larger of the two, each over what it may be, so score ≤ 1 is "within tolerance".
    The decision (:meth:`identify`) reads scores only: a ≡ needs the best within tolerance and the
    nearest other value MARGIN times as far (the best counted at no less than 1/MARGIN).

    The tolerance is that of the coarser of the compared dtype and the run's (the peer's coarsest) dtype.
    A float32 value of a bf16 run is computed from bf16 inputs, and those agree only to within the
    rounding both frameworks do at different places: nano-vllm's add_rms_forward normalises the
    unrounded float32 sum where HF normalises the bf16-rounded residual, and the residuals already
    differ by 1–3 ulp from layer 0 (attention). Measured on the 28-layer tiny trace: x/RMS(x) (float32)
    sits at rel ≤ 0.018 from its peer, as far as x itself (bf16); mean(x²) (float32) at ≤ 0.0061
    (0.0016 on the H200's 28 × 512 run). Only layer 0's first norm has the very same bf16 input in both
    (measured distance 0): a float32 tolerance (2⁻¹²) there would hold, but would refuse every later
    float32 value, so a bf16 run keeps 2⁻⁴ for its float32 values too. What tells mean((x₁⁽¹⁹⁾)²) from
    mean((x⁽²⁰⁾)²) (rel 0.024 apart, 4.9 × the drift on the tiny shape) is then the call's context
    (:class:`CallContext`), the last step of the decision.

    Speed: candidates are compared in full only where they could matter. For every candidate,
    ‖t − c‖² = ‖t‖² − 2⟨t, c⟩ + ‖c‖² in float64 (one matrix product for a batch of same-shaped tensors
    and all candidates; the float32 inputs are exact in float64) gives a sure lower bound of the
    whole-tensor distance, hence of the score. Candidates are compared in full in the order of that
    bound until the bound of every other one exceeds everything the decision reads (the best, the
    runner-up, and, when the best is within tolerance, every score inside the ambiguity band); the
    full comparisons of a batch run together, in rounds. Everything runs on `device` (the trace's).
    ``exhaustive`` compares with every candidate (the unfiltered path, kept to test that both decide
    alike)."""

    def __init__(self, reference: PeerRun, exhaustive: bool = False, prefilter_above: int | None = None,
                 device: torch.device | str | None = None) -> None:
        """``prefilter_above``: candidates × elements above which the prefilter runs (default
        :data:`_WHOLE_STACK`; 0: always, as the tests force it). ``device``: where comparisons run (default:
        the device of the recorded tensors, i.e. the trace's)."""
        self.values = reference.values
        self.exhaustive = exhaustive
        self.prefilter_above = _WHOLE_STACK if prefilter_above is None else prefilter_above
        self.device = None if device is None else torch.device(device)
        self.run_dtype = torch.float32
        for v in self.values:
            self.run_dtype = coarser(self.run_dtype, v.tensor.dtype)
        self._shapes = {tuple(v.tensor.shape) for v in self.values}
        self._pools: dict[tuple[tuple[int, ...], torch.dtype, torch.device], _Pool] = {}
        self._sides: dict[tuple[int, torch.dtype], Side] = {}   # (id of a candidate, dtype) → its side
        self.compared = 0   # full comparisons made so far (the bench and tests read it)

    def tolerance(self, dtype: torch.dtype) -> float:
        """The tolerance of a comparison in `dtype` (see the class: never finer than the run's dtype)."""
        return TOLERANCE[str(coarser(dtype, self.run_dtype)).removeprefix("torch.")]

    def _pool(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> _Pool:
        """All candidates of one shape as recorded tensors of `dtype` are compared with them, on `device`."""
        key = (shape, dtype, device)
        if key not in self._pools:
            cands = [v for v in self.values if tuple(v.tensor.shape) == shape]
            compared = [coarser(dtype, v.tensor.dtype) for v in cands]
            dtypes = sorted(set(compared), key=str)
            stack = torch.stack([v.tensor.to(device, d).float().reshape(-1) for v, d in zip(cands, compared)])
            stack64 = stack.double()
            tokens = _tokens(shape)
            self._pools[key] = _Pool(
                cands, dtypes, torch.tensor([dtypes.index(d) for d in compared], device=device),
                torch.tensor([self.tolerance(d) for d in compared], dtype=torch.float64, device=device),
                stack, torch.linalg.vector_norm(stack64, dim=1),
                torch.linalg.vector_norm(stack64.reshape(len(cands), tokens, -1), dim=2),
                stack64, (stack64 * stack64).sum(dim=1), tokens, device)
        return self._pools[key]

    def _flats(self, pool: _Pool, tensors: list[torch.Tensor]) -> torch.Tensor:
        """The recorded tensors in each compared dtype of `pool`: dtypes × tensors × elements, float32."""
        return torch.stack([torch.stack([t.detach().to(pool.device, d).float().reshape(-1) for t in tensors])
                            for d in pool.dtypes])

    def _score_pairs(self, pool: _Pool, flats: torch.Tensor, pairs: list[tuple[int, int]]) -> list[_Scored]:
        """The full comparison of each (tensor, row) pair, many pairs in one pass. The distances are
        summed in float64 and then rounded to float32, so that a pair's result does not depend on which
        other pairs share its pass."""
        out: list[_Scored] = []
        n = pool.stack.shape[1]
        step = max(1, _PAIR_ELEMENTS // max(n, 1))
        for start in range(0, len(pairs), step):
            chunk = pairs[start:start + step]
            idx = torch.tensor([i for i, _ in chunk], device=pool.device)
            rows = torch.tensor([r for _, r in chunk], device=pool.device)
            diff = (flats[pool.row_dtype[rows], idx] - pool.stack[rows]).reshape(len(chunk), pool.tokens, -1)
            per_token = torch.linalg.vector_norm(diff, dim=2, dtype=torch.float64)
            whole = per_token.square().sum(dim=1).sqrt()
            rel = _ratio(whole, pool.norms[rows]).float().double()
            token_rel = _ratio(per_token, pool.token_norms[rows]).amax(dim=1).float().double()
            score = (torch.maximum(rel, token_rel / TOKEN_FACTOR) / pool.tols[rows]).float()
            out += [_Scored(s, r, tr) for s, r, tr in zip(score.tolist(), rel.tolist(), token_rel.tolist())]
        self.compared += len(pairs)
        return out

    def _bounds(self, pool: _Pool, flats: torch.Tensor) -> torch.Tensor:
        """Lower bounds of the score of each of the m tensors in `flats` (dtypes × m × elements) against
        each candidate: m × rows, float64 (0 where none can be given).

        ‖t − c‖² = ‖t‖² − 2⟨t, c⟩ + ‖c‖², each term a float64 sum of n exact products (float32 × float32
        fits float64's mantissa): its rounding error is at most γ = (n + 4)·u·(‖t‖ + ‖c‖)² in all (u:
        float64's unit roundoff; the standard bound for n-term sums, plus the three operations that
        combine them), doubled here for good measure; so ‖t − c‖ ≥ √max(0, computed − 2γ). Shrunk by
        :data:`_BOUND_SLACK` on top, divided by ‖c‖ and the row's tolerance (the score is at least the
        whole-tensor distance over the tolerance). One matrix product per compared dtype."""
        t = flats.double()                                    # dtypes × m × n
        tt = (t * t).sum(dim=2)                               # dtypes × m
        shape = (t.shape[1], len(pool.values))
        dots = torch.empty(shape, dtype=torch.float64, device=pool.device)   # ⟨t, c⟩ in each row's dtype
        tt_r = torch.empty(shape, dtype=torch.float64, device=pool.device)   # ‖t‖² in each row's dtype
        for d in range(len(pool.dtypes)):
            cols = (pool.row_dtype == d).nonzero().flatten()
            dots[:, cols] = t[d] @ pool.stack64[cols].T
            tt_r[:, cols] = tt[d][:, None]
        gamma = 2 * (t.shape[2] + 4) * _UNIT_ROUNDOFF * (tt_r.sqrt() + pool.squares64.sqrt()) ** 2
        lower = (tt_r - 2 * dots + pool.squares64 - gamma).clamp_min(0).sqrt()
        bound = lower * (1 - _BOUND_SLACK) / pool.norms.clamp_min(1e-300) / pool.tols
        return torch.where(torch.isfinite(bound) & (pool.norms > 0), bound, torch.zeros_like(bound))

    @staticmethod
    def _needed(scores: list[float]) -> float:
        """The largest score the decision reads, from the scores known so far: the nearest value farther
        than the best (≥ the runner-up's), and when the best is within tolerance (a ≡ or an ambiguity)
        also 1 (the tolerance) and MARGIN × the best (the ambiguity band). Infinite while every known
        candidate is as near as the best. Knowing more candidates never changes it when each of them is
        farther than it. (Every score is a float32 value, so comparing in Python decides as float32 would.)"""
        best = min(scores)
        farther = [s for s in scores if s != best]
        if not farther:
            return float("inf")
        if best > 1.0:   # no match: the nearest and the runner-up are all it reports
            return min(farther)
        return max(min(farther), 1.0, MARGIN * best)

    def _prefiltered(self, pool: _Pool, flat: torch.Tensor) -> bool:
        """Whether a tensor (`flat`: its images) is compared through the prefilter (else with every candidate)."""
        return not self.exhaustive and len(pool.values) * pool.stack.shape[1] > self.prefilter_above \
            and bool(torch.isfinite(flat).all())

    def _compare(self, pool: _Pool, flats: torch.Tensor, allowed: list[list[bool] | None],
                 known: list[dict[int, _Scored]]) -> list[dict[int, _Scored]]:
        """Scores of every allowed candidate that can matter to each tensor's decision: those within
        :meth:`_needed` of the nearest (`allowed[i]`: per row, whether tensor i may be compared with it,
        None: all; `known`: comparisons already made, reused). A prefiltered tensor is compared first with
        the :data:`_CHUNK` nearest by bound, then with every allowed row whose bound is within what its
        decision reads of those known, again until none is: every row not compared is then farther than
        that, so the decision is the exhaustive one. All tensors' comparisons of a round run in one pass."""
        m, rows = flats.shape[1], len(pool.values)
        masks = [[True] * rows if a is None else a for a in allowed]
        chosen = [i for i in range(m) if self._prefiltered(pool, flats[:, i])]
        pending: dict[int, list[int]] = {i: [r for r in range(rows) if masks[i][r]] for i in range(m) if i not in chosen}
        bounds: dict[int, torch.Tensor] = {}
        if chosen:
            matrix = self._bounds(pool, flats[:, chosen])
            matrix = torch.where(torch.tensor([masks[i] for i in chosen], device=pool.device), matrix, torch.inf)
            nearest = torch.topk(matrix, min(_CHUNK, rows), dim=1, largest=False).indices.tolist()
            for i, row, near in zip(chosen, matrix, nearest):
                bounds[i] = row
                pending[i] = [r for r in near if masks[i][r]]
        while pending:
            pairs = [(i, r) for i, rs in pending.items() for r in rs if r not in known[i]]
            for (i, r), s in zip(pairs, self._score_pairs(pool, flats, pairs)):
                known[i][r] = s
            pending = {}
            for i in chosen:
                needed = self._needed([s.score for r, s in known[i].items() if masks[i][r]])
                more = [r for r in (bounds[i] <= needed).nonzero().flatten().tolist() if r not in known[i]]
                if more:
                    pending[i] = more
        out = []
        for i in range(m):
            mine = {r: s for r, s in known[i].items() if masks[i][r]}
            needed = self._needed([s.score for s in mine.values()])
            out.append({r: s for r, s in mine.items() if s.score <= needed})
        return out

    def identify(self, t: torch.Tensor, context: CallContext | None = None) -> Identity:
        """What `t` equals: a ≡ (best within tolerance, every other value clearly farther), ambiguous
        (another value about as close: all listed), no match (the nearest given) or no candidate.
        `context`: the call `t` was recorded in (see :class:`CallContext`)."""
        return self.identify_many([t], [context])[0]

    def identify_many(self, tensors: list[torch.Tensor],
                      contexts: list[CallContext | None] | None = None) -> list[Identity]:
        """:meth:`identify` of each tensor (with `contexts[i]`, when given), tensors of one shape and dtype
        together: the prefilter's products in one matrix product, the full comparisons in rounds
        (up to :data:`_BATCH_ELEMENTS` recorded elements at a time)."""
        ctxs = list(contexts) if contexts is not None else [None] * len(tensors)
        out: list[Identity | None] = [None] * len(tensors)
        groups: dict[tuple[tuple[int, ...], torch.dtype, torch.device], list[int]] = {}
        for i, t in enumerate(tensors):
            shape = tuple(t.shape)
            if not t.is_floating_point() or shape not in self._shapes:
                out[i] = Identity("no candidate")
            else:
                groups.setdefault((shape, t.dtype, self.device or t.device), []).append(i)
        for (shape, dtype, device), members in groups.items():
            per = max(1, _BATCH_ELEMENTS // max(1, tensors[members[0]].numel()))
            for start in range(0, len(members), per):
                batch = members[start:start + per]
                found = self._identify_batch(self._pool(shape, dtype, device), [tensors[i] for i in batch],
                                             [ctxs[i] for i in batch])
                for i, identity in zip(batch, found):
                    out[i] = identity
        return [o if o is not None else Identity("no candidate") for o in out]

    def _identify_batch(self, pool: _Pool, tensors: list[torch.Tensor],
                        ctxs: list[CallContext | None]) -> list[Identity]:
        """Identities of tensors of one pool: the decision among all candidates, then, where it leaves an
        ambiguity whose best is in the tensor's context, among the in-context candidates."""
        flats = self._flats(pool, tensors)
        known: list[dict[int, _Scored]] = [{} for _ in tensors]
        scored = self._compare(pool, flats, [None] * len(tensors), known)
        found = [self._decide(t, pool, s) for t, s in zip(tensors, scored)]
        again = [i for i, (f, c) in enumerate(zip(found, ctxs)) if c is not None and f.status == "ambiguous"
                 and in_context(pool.values[self._order(pool, scored[i])[0]], c)]
        if again:
            masks: list[list[bool] | None] = [[in_context(v, c) for v in pool.values]
                                              for c in (ctxs[i] for i in again) if c is not None]
            rescored = self._compare(pool, flats[:, again], masks, [known[i] for i in again])
            for i, s in zip(again, rescored):
                ctx = ctxs[i]
                assert ctx is not None
                before = found[i]
                found[i] = self._decide(tensors[i], pool, s)
                found[i].context = {"layer": ctx.layer, "norm": ctx.norm}
                found[i].outside = [m for m in before.matches if not in_context(self._value(m), ctx)]
        return found

    def _value(self, m: Match) -> MathValue:
        return next(v for v in self.values if v.key == m.key and v.layer == m.layer)

    @staticmethod
    def _order(pool: _Pool, scored: dict[int, _Scored]) -> list[int]:
        """Rows by score, ties broken by :data:`_PREFERENCE` and then by row."""
        return sorted(sorted(scored), key=lambda r: (scored[r].score, _PREFERENCE.get(pool.values[r].key, 1)))

    def _decide(self, t: torch.Tensor, pool: _Pool, scored: dict[int, _Scored]) -> Identity:
        """`t`'s identity from the scores of the candidates that matter (see :meth:`identify`)."""
        cands = pool.values
        order = self._order(pool, scored)
        best = order[0]
        same = [r for r in order if r == best or (one_tensor(cands[r], cands[best]) and pool.equal(r, best))]
        others = [r for r in order if r not in same]
        runner = others[0] if others else None
        margin = None if runner is None else separation(scored[best].score, scored[runner].score, 1.0)
        tol = float(pool.tols[best])
        sides: dict[torch.dtype, Side] = {}   # t in each dtype it is measured in, converted once
        found = Identity("no match", tolerance=tol, margin=margin,
                         runner_up=None if runner is None else self._match(t, cands[runner], sides, scored[runner]))
        if scored[best].score > 1.0:
            found.nearest = self._match(t, cands[best], sides, scored[best])
        elif margin is None or margin >= MARGIN:
            found.status, found.matches = "match", [self._match(t, cands[r], sides, scored[r]) for r in same]
        else:   # the best and every value about as close: within tolerance or within the margin of the best
            close = max(1.0, MARGIN * scored[best].score)
            found.status = "ambiguous"
            found.matches = [self._match(t, cands[r], sides, scored[r]) for r in order if scored[r].score <= close]
        return found

    def _match(self, t: torch.Tensor, cand: MathValue, sides: dict[torch.dtype, Side], scored: _Scored) -> Match:
        """`t` against one candidate (:func:`~annotate.trace.model.numerics.distance`), each side converted
        once: `t`'s in `sides`, the candidate's for the whole identification; `token_rel` from the
        comparison that decided."""
        dtype = coarser(t.dtype, cand.tensor.dtype)
        if dtype not in sides:
            sides[dtype] = Side(t, dtype)
        key = (id(cand), dtype)
        if key not in self._sides:
            self._sides[key] = Side(cand.tensor, dtype)
        d = side_distance(sides[dtype], self._sides[key])
        return Match(cand.key, cand.layer, cand.label, cand.latex, d.max_abs, d.max_ulps, d.scale_ulps, d.rel, d.dtype,
                     scored.token_rel)
