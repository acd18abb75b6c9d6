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

from annotate.trace.numerics import Side, coarser, side_distance

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
#: annotate/trace/runtime.py): every right identity sits at rel ≤ 0.0193 (rounding noise, growing per layer)
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


@dataclass
class Identity:
    """`status`: "match" (`matches`: the best candidate and those holding the very same value, e.g. x⁽ℓ⁾ and
    x₂⁽ℓ−1⁾), "ambiguous" (`matches`: candidates too close to tell apart, best first; no ≡), "no match"
    (`nearest` given) or "no candidate" (no peer of that shape). `runner_up` is the nearest candidate
    holding another value than the best, `margin` how clearly the best wins (see :data:`MARGIN`,
    stored as `required`); None when there is no other candidate."""

    status: str
    matches: list[Match] = field(default_factory=list)
    nearest: Match | None = None
    tolerance: float = 0.0
    runner_up: Match | None = None
    margin: float | None = None
    required: float = MARGIN


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


#: candidates × elements up to which one vectorised comparison with every candidate costs no more than
#: the prefilter's own steps (its float64 products, top-k and rounds); 0 runs it whatever the size.
#: Measured with bench_trace.py: at the tiny shape's 4 layers (38 × 768) both cost alike (within the
#: noise), at its 28 layers (254 × 768) the prefilter is the faster by ~10 %
_WHOLE_STACK = 1 << 13

#: candidates compared in full first (the nearest by bound), to bound what the decision reads
_CHUNK = 4

#: the prefilter's lower bounds are shrunk by this much before they rule a candidate out, so that
#: the float32 rounding of the full comparison (cascade sums: ~1e-6 relative) can never make a
#: candidate nearer than its bound says
_BOUND_SLACK = 1e-3

#: float64's unit roundoff: the products' rounding error is bounded with it (see `Identifier._bounds`)
_UNIT_ROUNDOFF = 2.0 ** -53

#: recorded elements (tensors × elements each) whose prefilter products `identify_many` makes in one
#: matrix product (float64: 32 MiB)
_BATCH_ELEMENTS = 1 << 22


@dataclass
class _Candidates:
    """All peer values of one shape, rounded to one dtype and flattened: the full stack and each
    candidate's norm (float32, as the full comparison reads them), and for the prefilter the same
    stack in float64 with its squared norms, computed once per stack rather than once per pair."""

    stack: torch.Tensor
    values: list[MathValue]
    norms: torch.Tensor
    stack64: torch.Tensor
    squares64: torch.Tensor


class Identifier:
    """Compares recorded tensors with every peer variable of the same shape.

    A recorded tensor t is compared in full only with the candidates that could matter. For every
    candidate c, ‖t − c‖² = ‖t‖² − 2⟨t, c⟩ + ‖c‖² in float64 (one matrix product for a batch of
    same-shaped tensors and the whole stack, :meth:`identify_many`; the inputs are float32 values,
    exact in float64) gives ‖t − c‖ up to a rounding error that is bounded, so a sure lower bound of
    the relative distance. Candidates are compared in full in the order of that bound until the
    bound of every other one exceeds everything the decision reads (the best, the runner-up, and,
    when the best is within tolerance, every value inside the ambiguity band); the rest could not
    change it. So a tensor is compared in full with a few candidates whatever the depth (the
    products cost a multiply-add per element and candidate, with no temporary copy of the stack),
    and identification is linear in layers. The distances an identity reports convert each
    candidate once (:class:`~annotate.trace.numerics.Side`), not once per pair. ``exhaustive``
    compares with every candidate (the unfiltered path, kept to test that both decide alike)."""

    def __init__(self, reference: PeerRun, exhaustive: bool = False, prefilter_above: int | None = None) -> None:
        """``prefilter_above``: candidates × elements above which the prefilter runs (default
        :data:`_WHOLE_STACK`; 0: always, as the tests and the bench force it)."""
        self.values = reference.values
        self.exhaustive = exhaustive
        self.prefilter_above = _WHOLE_STACK if prefilter_above is None else prefilter_above
        self._shapes = {tuple(v.tensor.shape) for v in self.values}
        self._stacks: dict[tuple[tuple[int, ...], torch.dtype], _Candidates] = {}
        self._sides: dict[tuple[int, torch.dtype], Side] = {}   # (id of a candidate, dtype) → its side
        self.compared = 0   # full comparisons made so far (the bench and tests read it)

    def _stack(self, shape: tuple[int, ...], dtype: torch.dtype) -> _Candidates:
        """All candidates of one shape, rounded to `dtype`, stacked (for one vectorised comparison)."""
        key = (shape, dtype)
        if key not in self._stacks:
            cands = [v for v in self.values if tuple(v.tensor.shape) == shape]
            stack = torch.stack([v.tensor.to(dtype).float().reshape(-1) for v in cands])
            stack64 = stack.double()
            self._stacks[key] = _Candidates(stack, cands, torch.linalg.vector_norm(stack, dim=1),
                                            stack64, (stack64 * stack64).sum(dim=1))
        return self._stacks[key]

    @staticmethod
    def _rels(c: _Candidates, flat: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        """‖c − t‖ / ‖c‖ for the given rows (all when None), as the unfiltered comparison computes it."""
        stack, norms = (c.stack, c.norms) if rows is None else (c.stack[rows], c.norms[rows])
        diff = torch.linalg.vector_norm(stack - flat, dim=1)
        rel = torch.where(norms > 0, diff / norms.clamp_min(1e-30), diff * float("inf"))
        return torch.nan_to_num(rel, nan=0.0)

    @staticmethod
    def _bounds(c: _Candidates, flats: torch.Tensor) -> torch.Tensor:
        """Lower bounds of the relative distance of each of the m flattened tensors `flats` (m × elements,
        float32 values) to each candidate: m × candidates (0 where none can be given).

        ‖t − c‖² = ‖t‖² − 2⟨t, c⟩ + ‖c‖², each term a float64 sum of n exact products (float32 × float32
        fits float64's mantissa): its rounding error is at most γ = (n + 4)·u·(‖t‖ + ‖c‖)² in all (u:
        float64's unit roundoff; the standard bound for n-term sums, plus the three operations that
        combine them), doubled here for good measure; so ‖t − c‖ ≥ √max(0, computed − 2γ). Shrunk by
        :data:`_BOUND_SLACK` on top. One matrix product for all m tensors and all candidates."""
        t = flats.double()
        tt = (t * t).sum(dim=1, keepdim=True)
        gamma = 2 * (t.shape[1] + 4) * _UNIT_ROUNDOFF * (tt.sqrt() + c.squares64.sqrt()) ** 2
        lower = (tt - 2 * (t @ c.stack64.T) + c.squares64 - gamma).clamp_min(0).sqrt()
        bound = (lower * (1 - _BOUND_SLACK) / c.norms.double().clamp_min(1e-30)).float()
        return torch.where(torch.isfinite(bound) & (c.norms > 0), bound, torch.zeros_like(bound))

    @staticmethod
    def _needed(rel: list[float], tol: float) -> float:
        """The largest distance the decision reads, from the distances known so far: the nearest
        value farther than the best (≥ the runner-up's), and when the best is within tolerance
        (a ≡ or an ambiguity) also the tolerance and MARGIN × the best (the ambiguity band).
        Infinite while every known candidate is as near as the best. Knowing more candidates never
        changes it when each of them is farther than it (see `_compare`). (Every value here is a
        float32 one, so comparing in Python decides as comparing float32 tensors would.)"""
        best = min(rel)
        farther = [r for r in rel if r != best]
        if not farther:
            return float("inf")
        if best > tol:   # no match: the nearest and the runner-up are all it reports
            return min(farther)
        return max(min(farther), tol, MARGIN * best)

    def _prefiltered(self, c: _Candidates, flat: torch.Tensor) -> bool:
        """Whether `flat` is compared through the prefilter (else with every candidate, in one go)."""
        return not self.exhaustive and len(c.values) * c.stack.shape[1] > self.prefilter_above \
            and bool(torch.isfinite(flat).all())

    def _compare(self, c: _Candidates, flat: torch.Tensor, tol: float,
                 bounds: tuple[torch.Tensor, list[int]] | None) -> dict[int, float]:
        """Relative distances of every candidate that can matter to the decision (see the class):
        those within :meth:`_needed` of the nearest. `bounds`: the prefilter's, when it runs, and
        the candidates with the :data:`_CHUNK` smallest.

        With the prefilter: those nearest few by bound first, then every candidate whose bound is
        within what the decision reads of those known, again until none is. Then every candidate
        not compared is farther than that distance, so the best, the runner-up and the distance
        itself are those of all candidates, and the decision is the exhaustive one."""
        if bounds is None:
            rows, rel = list(range(len(c.values))), self._rels(c, flat, None).tolist()
        else:
            row_bounds, rows = bounds
            rel = self._rels(c, flat, torch.tensor(rows)).tolist()
            while True:
                known = set(rows)
                near = [i for i in (row_bounds <= self._needed(rel, tol)).nonzero().flatten().tolist() if i not in known]
                if not near:
                    break
                rows, rel = rows + near, rel + self._rels(c, flat, torch.tensor(near)).tolist()
        self.compared += len(rows)
        needed = self._needed(rel, tol)
        return {i: r for i, r in zip(rows, rel) if r <= needed}

    def identify(self, t: torch.Tensor) -> Identity:
        """What `t` equals: a ≡ (best within tolerance, every other value clearly farther), ambiguous
        (another value about as close: all listed), no match (the nearest given) or no candidate."""
        return self.identify_many([t])[0]

    def identify_many(self, tensors: list[torch.Tensor]) -> list[Identity]:
        """:meth:`identify` of each tensor, the prefilter's products for many tensors of one shape in
        one matrix product (up to :data:`_BATCH_ELEMENTS` recorded elements at a time)."""
        out: list[Identity] = []
        batch: list[torch.Tensor] = []
        elements = 0
        for t in tensors:
            if batch and elements + t.numel() > _BATCH_ELEMENTS:
                out += self._identify_batch(batch)
                batch, elements = [], 0
            batch.append(t)
            elements += t.numel()
        return out + self._identify_batch(batch)

    def _identify_batch(self, tensors: list[torch.Tensor]) -> list[Identity]:
        prepared = [self._prepare(t) for t in tensors]
        groups: dict[int, list[int]] = {}   # id of a candidate stack → the tensors it prefilters
        for i, p in enumerate(prepared):
            if p is not None and self._prefiltered(p[0], p[1]):
                groups.setdefault(id(p[0]), []).append(i)
        bounds: dict[int, tuple[torch.Tensor, list[int]]] = {}
        for members in groups.values():
            parts = [p for p in (prepared[i] for i in members) if p is not None]
            matrix = self._bounds(parts[0][0], torch.cat([p[1] for p in parts]))
            nearest = torch.topk(matrix, min(_CHUNK, matrix.shape[1]), dim=1, largest=False).indices
            bounds.update(zip(members, zip(matrix, nearest.tolist())))
        return [Identity("no candidate") if p is None else self._decide(t, *p, bounds.get(i))
                for i, (t, p) in enumerate(zip(tensors, prepared))]

    def _prepare(self, t: torch.Tensor) -> tuple[_Candidates, torch.Tensor, float] | None:
        """The candidates of `t`'s shape in the compared dtype, `t` flattened in it (1 × elements,
        float32), and the tolerance; None when there is no candidate."""
        shape = tuple(t.shape)
        if not t.is_floating_point() or shape not in self._shapes:
            return None
        dtype = coarser(t.dtype, self.values[0].tensor.dtype)
        flat = t.detach().to("cpu", dtype).float().reshape(1, -1)
        return self._stack(shape, dtype), flat, TOLERANCE[str(dtype).removeprefix("torch.")]

    def _decide(self, t: torch.Tensor, c: _Candidates, flat: torch.Tensor, tol: float,
                bounds: tuple[torch.Tensor, list[int]] | None) -> Identity:
        """`t`'s identity among the candidates `c` (see :meth:`identify`)."""
        cands, stack = c.values, c.stack
        rels = self._compare(c, flat, tol, bounds)
        order = sorted(sorted(rels), key=lambda i: (rels[i], _PREFERENCE.get(cands[i].key, 1)))
        best = order[0]
        same = [i for i in order if i == best or (one_tensor(cands[i], cands[best]) and torch.equal(stack[i], stack[best]))]
        others = [i for i in order if i not in same]
        runner = others[0] if others else None
        margin = None if runner is None else separation(rels[best], rels[runner], tol)
        sides: dict[torch.dtype, Side] = {}   # t in each dtype it is measured in, converted once
        found = Identity("no match", tolerance=tol, margin=margin,
                         runner_up=None if runner is None else self._match(t, cands[runner], sides))
        if rels[best] > tol:
            found.nearest = self._match(t, cands[best], sides)
        elif margin is None or margin >= MARGIN:
            found.status, found.matches = "match", [self._match(t, cands[i], sides) for i in same]
        else:   # the best and every value about as close: within tolerance or within the margin of the best
            close = max(tol, MARGIN * rels[best])
            found.status = "ambiguous"
            found.matches = [self._match(t, cands[i], sides) for i in order if rels[i] <= close]
        return found

    def _match(self, t: torch.Tensor, cand: MathValue, sides: dict[torch.dtype, Side]) -> Match:
        """`t` against one candidate (:func:`~annotate.trace.numerics.distance`), each side converted
        once: `t`'s in `sides`, the candidate's for the whole identification."""
        dtype = coarser(t.dtype, cand.tensor.dtype)
        if dtype not in sides:
            sides[dtype] = Side(t, dtype)
        key = (id(cand), dtype)
        if key not in self._sides:
            self._sides[key] = Side(cand.tensor, dtype)
        d = side_distance(sides[dtype], self._sides[key])
        return Match(cand.key, cand.layer, cand.label, cand.latex, d.max_abs, d.max_ulps, d.scale_ulps, d.rel, d.dtype)
