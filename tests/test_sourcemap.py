"""annotate.trace.sourcemap: statements of the traced functions, and what their bytecode may do.

Statements are found by their text in the vendored code, never by line number."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from annotate.trace.sourcemap import code_info
from conftest import ROOT, _need_vendor


def _by_text(info) -> dict[str, object]:
    return {s.text: s for s in info.statements.values()}


@pytest.fixture(scope="module")
def mods():
    _need_vendor()
    from annotate.trace import runtime

    return runtime.import_vendored(ROOT, "cpu")


def _info(fn, name):
    from annotate.trace import runtime

    return code_info(fn, name, runtime.vendor_root(ROOT))


def test_effects_of_the_decoder_layer_statements(mods) -> None:
    stmts = _by_text(_info(mods["qwen3"].Qwen3DecoderLayer.forward, "Qwen3DecoderLayer.forward"))
    assert stmts["if residual is None:"].effect == "pure"
    assert stmts["hidden_states = self.mlp(hidden_states)"].effect == "one-call"
    assert stmts["return hidden_states, residual"].effect == "pure"
    assert stmts["hidden_states = self.mlp(hidden_states)"].targets == ("hidden_states",)


def test_loops_and_nested_calls_are_not_taken_as_quiet(mods) -> None:
    model = _by_text(_info(mods["qwen3"].Qwen3Model.forward, "Qwen3Model.forward"))
    assert model["for layer in self.layers:"].effect == "other"          # iteration runs code
    attn = _by_text(_info(mods["qwen3"].Qwen3Attention.forward, "Qwen3Attention.forward"))
    assert attn["output = self.o_proj(o.flatten(1, -1))"].effect == "other"   # two calls
    assert attn["if not self.qkv_bias:"].effect == "pure"                     # a truth test
    assert attn["q = q.view(-1, self.num_heads, self.head_dim)"].method == ("q", "view")


def test_effects_of_a_local_function(tmp_path: Path) -> None:
    src = tmp_path / "mod.py"
    src.write_text(textwrap.dedent("""\
        def f(x, y):
            a = x
            b = (x,
                 y)
            x.add_(1)
            c = x + y
            d = x.view(2, out=y)
            if not a:
                pass
            return g(a)
        def g(a):
            return a
        """), encoding="utf-8")
    ns: dict = {}
    exec(compile(src.read_text(), str(src), "exec"), ns)
    info = code_info(ns["f"], "f", tmp_path)
    effects = {s.text: s.effect for s in info.statements.values()}
    assert effects == {"a = x": "pure", "b = (x, y)": "pure", "x.add_(1)": "one-call",
                       "c = x + y": "other", "d = x.view(2, out=y)": "one-call", "if not a:": "pure",
                       "pass": "pure", "return g(a)": "one-call"}
    methods = {s.text: s.method for s in info.statements.values()}
    assert methods["x.add_(1)"] == ("x", "add_") and methods["d = x.view(2, out=y)"] is None
    assert methods["return g(a)"] is None
    assert info.statements[4] is info.statements[3]          # a two-line statement is one statement
    assert info.file == "mod.py" and info.params == ("x", "y")


def test_recorder_statements_agree_with_the_notes_statements(mods) -> None:
    """The recorder splits functions into statements with `ast`; notes and pages use tree-sitter
    (annotate/source.py). Values are shown on the lines notes are pinned to only if both agree, so
    they must — spans, and the names each statement binds or changes in place — on every function
    the recorder traces or replays, apart from the two kinds of lines only tree-sitter calls
    statements: the `def` header and a bare `else:`."""
    from annotate import source
    from annotate.trace import runtime
    from annotate.trace.recorder import unwrap_compiled

    q, ln, act, rope = mods["qwen3"], mods["layernorm"], mods["activation"], mods["rotary"]
    functions = {
        "Qwen3Model.forward": q.Qwen3Model.forward, "Qwen3DecoderLayer.forward": q.Qwen3DecoderLayer.forward,
        "Qwen3Attention.forward": q.Qwen3Attention.forward, "Qwen3MLP.forward": q.Qwen3MLP.forward,
        "RMSNorm.forward": ln.RMSNorm.forward, "RMSNorm.rms_forward": unwrap_compiled(ln.RMSNorm, "rms_forward"),
        "RMSNorm.add_rms_forward": unwrap_compiled(ln.RMSNorm, "add_rms_forward"),
        "SiluAndMul.forward": unwrap_compiled(act.SiluAndMul, "forward"),
        "RotaryEmbedding.forward": unwrap_compiled(rope.RotaryEmbedding, "forward"),
        "apply_rotary_emb": rope.apply_rotary_emb,
    }
    root = runtime.vendor_root(ROOT)
    for qual, fn in functions.items():
        info = code_info(fn, qual, root)
        tree = source.load(root / info.file, info.file)
        lines = tree.lines
        ours = sorted({(s.start, s.end, tuple(sorted(s.targets))) for s in info.statements.values()})
        theirs = sorted((s.start_line, s.end_line, tuple(sorted(set(s.targets) | set(s.mutated))))
                        for s in tree.statements_in(qual)
                        if s.start_line != tree.symbol(qual).def_line and lines[s.start_line - 1].strip() != "else:")
        assert ours == theirs, qual
