"""annotate.trace.record.sourcemap: statements of the traced functions (the one tree-sitter model of
annotate/source.py), and what their bytecode may do.

Statements are found by their text in the vendored code, never by line number."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from annotate.trace.record.sourcemap import code_info
from conftest import ROOT, _need_vendor


def _by_text(info) -> dict[str, object]:
    return {s.statement.text: s for s in info.statements.values()}


@pytest.fixture(scope="module")
def mods():
    _need_vendor()
    from annotate.trace.model import runtime

    return runtime.import_vendored(ROOT, "cpu")


def _info(fn, name):
    from annotate.trace.model import runtime

    return code_info(fn, name, runtime.vendor_root(ROOT))


def test_effects_of_the_decoder_layer_statements(mods) -> None:
    stmts = _by_text(_info(mods["qwen3"].Qwen3DecoderLayer.forward, "Qwen3DecoderLayer.forward"))
    assert stmts["if residual is None"].effect == "pure"
    assert stmts["hidden_states = self.mlp(hidden_states)"].effect == "one-call"
    assert stmts["return hidden_states, residual"].effect == "pure"
    assert stmts["hidden_states = self.mlp(hidden_states)"].statement.bound_names == ("hidden_states",)


def test_loops_and_nested_calls_are_not_taken_as_quiet(mods) -> None:
    model = _by_text(_info(mods["qwen3"].Qwen3Model.forward, "Qwen3Model.forward"))
    assert model["for layer in self.layers"].effect == "other"          # iteration runs code
    attn = _by_text(_info(mods["qwen3"].Qwen3Attention.forward, "Qwen3Attention.forward"))
    assert attn["output = self.o_proj(o.flatten(1, -1))"].effect == "other"   # two calls
    assert attn["if not self.qkv_bias"].effect == "pure"                     # a truth test
    assert attn["q = q.view(-1, self.num_heads, self.head_dim)"].statement.method == ("q", "view")


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
    effects = {s.statement.text: s.effect for s in info.statements.values()}
    assert effects == {"a = x": "pure", "b = (x, y)": "pure", "x.add_(1)": "one-call",
                       "c = x + y": "other", "d = x.view(2, out=y)": "one-call", "if not a": "pure",
                       "pass": "pure", "return g(a)": "one-call"}
    methods = {s.statement.text: s.statement.method for s in info.statements.values()}
    assert methods["x.add_(1)"] == ("x", "add_") and methods["d = x.view(2, out=y)"] is None
    assert methods["return g(a)"] is None
    assert info.statements[4] is info.statements[3]          # a two-line statement is one statement
    assert info.file == "mod.py" and info.params == ("x", "y")


def test_every_line_the_traced_functions_run_lies_in_a_statement_of_the_model(mods) -> None:
    """The recorder's per-line table is built from the tree-sitter model (annotate/source.py): each
    line event the interpreter sends for a function it records (forwards, compiled bodies run
    eagerly here, the rope helper) must land on a statement of that table, and that statement is
    the one the pages' model puts on the line."""
    import sys

    import torch

    from annotate import source
    from annotate.trace.model import runtime
    from annotate.trace.record.recorder import Recorder

    rt = runtime.build_runtime(runtime.TraceOptions(preset="tiny", layers=1, tokens=3, root=ROOT))
    try:
        infos = {info.code: info for info in Recorder(rt.model, mods, runtime.vendor_root(ROOT)).code_infos()}
        seen: dict[str, set[int]] = {}

        def on_call(frame, event, arg):
            info = infos.get(frame.f_code)
            if info is None:
                return None
            lines = seen.setdefault(info.qualname, set())

            def on_line(frame, event, arg):
                if event == "line":
                    lines.add(frame.f_lineno)
                return on_line
            return on_line

        with torch.compiler.set_stance("force_eager"):   # the compiled bodies run their own lines
            sys.settrace(on_call)
            try:
                runtime.run_prefill(rt)
            finally:
                sys.settrace(None)
    finally:
        rt.close()
    root = runtime.vendor_root(ROOT)
    assert set(seen) == {info.qualname for info in infos.values()}      # every function ran
    for info in infos.values():
        model = source.load(root / info.file, info.file)
        for line in sorted(seen[info.qualname]):
            traced = info.statement_at(line)
            assert traced is not None, f"{info.qualname}: line {line} ran but is in no statement"
            assert model.statement_at(line) == traced.statement, (info.qualname, line)
    assert sum(map(len, seen.values())) > 50


def test_one_line_compounds_headers_and_names_defined_twice(tmp_path: Path) -> None:
    src = tmp_path / "mod.py"
    src.write_text(textwrap.dedent("""\
        class A:
            @property
            def p(self):
                if self: return 1
                for i in self:

                    j = i
                else:
                    return 2
            @p.setter
            def p(self, v):
                pass
        """), encoding="utf-8")
    ns: dict = {}
    exec(compile(src.read_text(), str(src), "exec"), ns)
    getter = code_info(ns["A"].p.fget, "A.p", tmp_path)
    assert getter.def_line == 3 and getter.params == ("self",)
    assert getter.statement_at(4).statement.is_return        # `if self: return 1` is its return
    loop = getter.statement_at(5).statement
    assert loop.span == (5, 5) and loop.bound_names == ("i",) and getter.statement_at(6) is None
    assert getter.statement_at(7).statement.loop_targets == ("i",)
    assert getter.statement_at(8) is None                    # `else:` runs no code of its own
    assert max(getter.statements) == 9                       # the setter is another function
    setter = code_info(ns["A"].p.fset, "A.p", tmp_path)
    assert setter.def_line == 11 and sorted(setter.statements) == [12]
