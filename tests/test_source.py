"""The tree-sitter model on the real vendored files: symbols, statements, targets, find(), errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from annotate.source import AnchorError, load, normalise, parse

REPO = Path(__file__).resolve().parents[1]
VENDOR = REPO / "vendor/nano-vllm"
LAYERNORM = "nanovllm/layers/layernorm.py"
ACTIVATION = "nanovllm/layers/activation.py"
QWEN3 = "nanovllm/models/qwen3.py"


@pytest.fixture(scope="module")
def layernorm():
    return load(VENDOR / LAYERNORM, LAYERNORM)


@pytest.fixture(scope="module")
def qwen3():
    return load(VENDOR / QWEN3, QWEN3)


def test_add_rms_forward_spans_its_decorator(layernorm) -> None:
    sym = layernorm.symbol("RMSNorm.add_rms_forward")
    assert sym.span == (28, 40)
    assert sym.def_line == 29
    assert sym.decorators == ("torch.compile",) and sym.decorator_lines == (28,)
    assert sym.kind == "method"


def test_residual_cast_is_line_36(layernorm) -> None:
    assert layernorm.find("RMSNorm.add_rms_forward", "residual = x.to(orig_dtype)") == (36, 36)
    stmt = layernorm.statement_at(36)
    assert stmt is not None and stmt.bound_names == ("residual",) and stmt.symbol == "RMSNorm.add_rms_forward"


def test_in_place_calls_are_recorded_as_mutations(layernorm) -> None:
    assert layernorm.statement_at(38).bound_names == ("x",)   # a bare in-place call: x changed


def test_decoder_line_156_assigns_both_variables(qwen3) -> None:
    stmt = qwen3.statement_at(156)
    assert stmt.symbol == "Qwen3DecoderLayer.forward"
    assert stmt.bound_names == ("hidden_states", "residual")
    assert qwen3.find("Qwen3DecoderLayer.forward",
                      "hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)") == (156, 156)


def test_symbols_of_the_three_files(layernorm, qwen3) -> None:
    activation = load(VENDOR / ACTIVATION, ACTIVATION)
    assert {"SiluAndMul", "SiluAndMul.__init__", "SiluAndMul.forward"} <= set(activation.symbols)
    assert activation.symbol("SiluAndMul.forward").span == (11, 14)  # @torch.compile on 11
    assert activation.find("SiluAndMul.forward", "x, y = x.chunk(2, -1)") == (13, 13)
    assert {"RMSNorm.rms_forward", "RMSNorm.add_rms_forward", "RMSNorm.forward"} <= set(layernorm.symbols)
    assert qwen3.symbol("Qwen3Model.forward").span == (172, 182)
    assert qwen3.symbol("Qwen3ForCausalLM.embed_tokens").start_line == 206  # @property line


def test_multi_line_statement_spans_all_its_lines(qwen3) -> None:
    span = qwen3.find("Qwen3MLP.__init__",
                      "self.gate_up_proj = MergedColumnParallelLinear(hidden_size, [intermediate_size] * 2, bias=False)")
    assert span == (99, 103)


def test_compound_headers_are_statements(layernorm) -> None:
    assert layernorm.find("RMSNorm.forward", "if residual is None") == (47, 47)
    assert layernorm.find("RMSNorm.forward", "else") == (49, 49)


def test_symbol_without_statement_gives_its_span(layernorm) -> None:
    assert layernorm.find("RMSNorm.rms_forward") == (16, 26)


@pytest.mark.parametrize("raw, expected", [
    ("x  =   x.float()", "x = x.float()"),
    ("f(\n    a,\n    b,\n)", "f(a, b)"),
    ("y = g(a) # a comment", "y = g(a)"),
    ("if residual is None:", "if residual is None"),
    ("t = [ 1, 2 ]", "t = [1, 2]"),
    ("z = a \\\n    + b", "z = a + b"),
])
def test_normalise(raw: str, expected: str) -> None:
    assert normalise(raw) == expected


def test_rewrapped_statement_still_matches() -> None:
    src = parse("class A:\n    def f(self):\n        y = g(\n            1,\n            2,\n        )\n", "t.py")
    assert src.find("A.f", "y = g(1, 2)") == (3, 6)


def test_nth_counts_repeats_within_the_symbol() -> None:
    src = parse("def f():\n    x = 1\n    x = 1\n", "t.py")
    assert src.find("f", "x = 1") == (2, 2)
    assert src.find("f", "x = 1", nth=1) == (3, 3)
    with pytest.raises(AnchorError, match=r"nth=2.*2 matches"):
        src.find("f", "x = 1", nth=2)


def test_unknown_symbol_and_statement_are_errors(layernorm) -> None:
    with pytest.raises(AnchorError, match="symbol 'RMSNorm.nope' not found"):
        layernorm.find("RMSNorm.nope", "x = 1")
    with pytest.raises(AnchorError, match="not found in RMSNorm.forward"):
        layernorm.find("RMSNorm.forward", "return 42")


def test_nearest_ranks_similar_statements(layernorm) -> None:
    near = layernorm.nearest("RMSNorm.add_rms_forward", "residual = x.to(torch.bfloat16)", k=2)
    assert near[0].text == "residual = x.to(orig_dtype)"


def test_module_level_statements_have_no_symbol(qwen3) -> None:
    assert qwen3.statement_at(1).symbol is None
    assert qwen3.find(None, "import torch") == (1, 1)


# ---------------------------------------------------------------- what the trace recorder reads

RECORDED = '''\
def f(self, x, ys, k):
    for a, (b, *c) in ys:
        x.mul_(2)
        x.float().add_(1)
        y = x.add_(1)
        for i in a:
            q = q.view(-1)
        else:
            z = i
        def g(t):
            return t
    with torch.autocast("cpu") as (w, self.h), open(k) as m:
        self.f(x)
        x.f()
    a = b = c
    self.x = y
    x[0] = 1
    t: int = 3
    n += 1
    r = f(*ys)
    s = x.view(2, out=y)
    u = x.view(**k)
    v = x.a.b(2)
    e = x.view(y.size(0))
    if x.any():
        pass
    return x, y
'''


@pytest.fixture(scope="module")
def recorded():
    model = parse(RECORDED, "t.py")
    return {s.text: s for s in model.statements}


def test_bound_names_are_the_local_variables_a_frame_holds_after_the_statement(recorded) -> None:
    assert recorded["for a, (b, *c) in ys"].bound_names == ("a", "b", "c")
    assert recorded["x.mul_(2)"].bound_names == ("x",)                 # in place: torch's trailing `_`
    assert recorded["x.float().add_(1)"].bound_names == ()             # changes a temporary, not x
    assert recorded["y = x.add_(1)"].bound_names == ("y",)
    assert recorded["a = b = c"].bound_names == ("a", "b")             # every target of a chain
    assert recorded["self.x = y"].bound_names == ()
    assert recorded["x[0] = 1"].bound_names == ()
    assert recorded["t: int = 3"].bound_names == ("t",) and recorded["n += 1"].bound_names == ("n",)
    with_header = recorded['with torch.autocast("cpu") as (w, self.h), open(k) as m']
    assert with_header.bound_names == ("w", "m") and with_header.is_header
    assert recorded["if x.any()"].bound_names == () and recorded["return x, y"].bound_names == ()


def test_loop_targets_are_the_enclosing_for_headers_of_the_same_function(recorded) -> None:
    assert recorded["for a, (b, *c) in ys"].loop_targets == ()        # a header is not inside itself
    assert recorded["x.mul_(2)"].loop_targets == ("a", "b", "c")
    assert recorded["q = q.view(-1)"].loop_targets == ("a", "b", "c", "i")
    assert recorded["z = i"].loop_targets == ("a", "b", "c", "i")      # a loop's `else:` runs with its names
    assert recorded["def g(t)"].loop_targets == ("a", "b", "c")
    assert recorded["return t"].loop_targets == ()                    # another frame: its own loops only
    assert recorded["a = b = c"].loop_targets == ()


def test_method_is_the_sole_call_on_a_plain_name_with_known_arguments(recorded) -> None:
    assert recorded["q = q.view(-1)"].method == ("q", "view")
    assert recorded["self.f(x)"].method == ("self", "f")
    assert recorded["x.f()"].method == ("x", "f")
    assert recorded["if x.any()"].method == ("x", "any")               # a header: its condition
    assert recorded['with torch.autocast("cpu") as (w, self.h), open(k) as m'].method is None   # two calls
    for text in ("r = f(*ys)", "s = x.view(2, out=y)", "u = x.view(**k)", "v = x.a.b(2)",
                 "e = x.view(y.size(0))", "a = b = c"):
        assert recorded[text].method is None, text


def test_a_header_counts_only_its_own_calls() -> None:
    model = parse("def f(x):\n    for i in x.split(2):\n        g(i)\n        h(i)\n", "t.py")
    header = model.statement_at(2)
    assert header is not None and header.method == ("x", "split") and header.is_header


def test_returns_are_marked(recorded) -> None:
    assert recorded["return x, y"].is_return and recorded["return t"].is_return
    assert not recorded["y = x.add_(1)"].is_return and not recorded["if x.any()"].is_return


def test_definitions_keep_every_definition_of_a_name() -> None:
    src = "class A:\n    @property\n    def p(self):\n        return 1\n    @p.setter\n    def p(self, v):\n        pass\n"
    model = parse(src, "t.py")
    assert model.symbol("A.p").def_line == 6                         # the dict keeps the last
    assert [(s.qualname, s.start_line) for s in model.definitions] == [("A", 1), ("A.p", 2), ("A.p", 5)]


def test_the_vendored_in_place_normalisation_binds_x(layernorm) -> None:
    stmt = layernorm.statement_at(38)
    assert stmt is not None and stmt.bound_names == ("x",) and stmt.loop_targets == () and stmt.method is None
