"""Which statement each source line belongs to, and which names it assigns (from `ast`).

A line event only says "line N is about to run". A statement may span several lines (and line
events may jump back to its first line), so the recorder works per statement: a statement is
finished when a line of *another* statement starts, or when the frame returns.

Each statement also gets an `effect`, read off its bytecode, which lets the recorder prove that no
tensor changed between two of its events (and so reuse a copy instead of taking another):
"pure" (no call at all: loads, stores, tuple packing, `is None` and truth tests, jumps), "one-call"
(exactly one call, everything else pure) or "other". For a one-call statement whose call is a
method of a local (`q.view(…)`), `method` names the two, so the recorder can check at run time
that it is a torch.Tensor method that writes nothing.
"""
from __future__ import annotations

import ast
import dis
import inspect
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import CodeType
from typing import Callable, Sequence


@dataclass(frozen=True)
class TracedStatement:
    """One simple statement, or the header of a compound one (`if …:`, `for …:`)."""

    start: int
    end: int
    targets: tuple[str, ...]
    is_return: bool
    loop_targets: tuple[str, ...]   # names bound by enclosing `for` headers
    text: str
    effect: str = "other"           # "pure" | "one-call" | "other" (see the module docstring)
    method: tuple[str, str] | None = None   # ("q", "view") for `q = q.view(…)`: the one call's receiver and name


@dataclass
class CodeInfo:
    """Static facts about one function the recorder traces."""

    qualname: str
    file: str                        # relative to the vendor root, e.g. nanovllm/models/qwen3.py
    code: CodeType
    def_line: int                    # the `def` line (after decorators)
    params: tuple[str, ...]
    statements: dict[int, TracedStatement] = field(default_factory=dict)   # line -> statement

    def statement_at(self, line: int) -> TracedStatement | None:
        return self.statements.get(line)


def _names(target: ast.AST) -> list[str]:
    """Plain names bound by an assignment target (attributes and subscripts bind none)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _names(elt)]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return []


def _mutated(expr: ast.AST) -> list[str]:
    """`x.mul_(…)` changes x in place: treat it as assigning x (torch's trailing-underscore rule)."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr.endswith("_") \
            and not expr.func.attr.startswith("_") and isinstance(expr.func.value, ast.Name):
        return [expr.func.value.id]
    return []


def _targets(stmt: ast.stmt | ast.ExceptHandler) -> list[str]:
    """Names a statement binds (or mutates in place, for a bare `x.op_(…)` call)."""
    if isinstance(stmt, ast.Expr):
        return _mutated(stmt.value)
    if isinstance(stmt, ast.Assign):
        return [n for t in stmt.targets for n in _names(t)]
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return _names(stmt.target)
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return _names(stmt.target)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [n for item in stmt.items if item.optional_vars is not None for n in _names(item.optional_vars)]
    return []


def _method(stmt: ast.stmt | ast.ExceptHandler) -> tuple[str, str] | None:
    """(receiver, name) when the statement's only call is `name.method(…)` with no `out=` and no
    unpacked arguments (their contents would be unknown)."""
    header = [stmt.test] if isinstance(stmt, (ast.If, ast.While)) else \
        [stmt.iter] if isinstance(stmt, (ast.For, ast.AsyncFor)) else [stmt]
    calls = [n for h in header for n in ast.walk(h) if isinstance(n, ast.Call)]
    if len(calls) != 1:
        return None
    call = calls[0]
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return None
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg in (None, "out") for k in call.keywords):
        return None
    return func.value.id, func.attr


_BODIES = ("body", "orelse", "finalbody", "handlers")


def _walk(body: Sequence[ast.stmt | ast.ExceptHandler], offset: int, lines: list[str], loops: tuple[str, ...],
          out: dict[int, TracedStatement]) -> None:
    """Fill `out` with every line of every statement in `body` (recursing into compound ones)."""
    for stmt in body:
        children = [c for name in _BODIES for c in getattr(stmt, name, []) or []]
        inner = [c for c in children if isinstance(c, ast.stmt)]
        if isinstance(stmt, ast.ExceptHandler):
            inner = stmt.body
        first_child = min((c.lineno for c in inner), default=None)
        end = (first_child - 1) if first_child else (stmt.end_lineno or stmt.lineno)
        text = " ".join(ln.strip() for ln in lines[stmt.lineno - 1:end])
        info = TracedStatement(stmt.lineno + offset, end + offset, tuple(_targets(stmt)),
                         isinstance(stmt, ast.Return), loops, text, method=_method(stmt))
        for line in range(stmt.lineno, end + 1):
            out.setdefault(line + offset, info)
        if inner:
            more = tuple(_names(stmt.target)) if isinstance(stmt, (ast.For, ast.AsyncFor)) else ()
            for name in _BODIES:
                sub: list[ast.stmt | ast.ExceptHandler] = [
                    c for c in getattr(stmt, name, []) or [] if isinstance(c, (ast.stmt, ast.ExceptHandler))]
                _walk(sub, offset, lines, loops + more, out)


#: opcodes that run no code that could write to a tensor: local/constant/global/attribute loads
#: and truth tests (attribute reads and `bool()` are taken to have no side effects on tensors:
#: nn.Module.__getattr__, tensor properties and Tensor.__bool__ have none), stores, stack
#: shuffles, tuple building and unpacking (unpacking a tensor makes views, it writes nothing), `is`
#: tests and jumps. Anything else (calls, operators, iteration, comparisons, subscripts) may run
#: arbitrary code.
PURE_OPS = frozenset({
    "NOP", "RESUME", "CACHE", "EXTENDED_ARG", "PUSH_NULL", "PRECALL", "KW_NAMES", "POP_TOP", "COPY", "SWAP",
    "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_FAST_LOAD_FAST", "LOAD_CONST", "RETURN_CONST",
    "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_ATTR", "LOAD_METHOD", "STORE_FAST", "STORE_FAST_STORE_FAST",
    "STORE_FAST_LOAD_FAST", "BUILD_TUPLE", "BUILD_LIST", "UNPACK_SEQUENCE", "IS_OP", "RETURN_VALUE",
    "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP", "JUMP_NO_INTERRUPT",
    "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE", "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE",
    "UNARY_NOT", "TO_BOOL", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE",
    "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE",
    "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP",
})
CALL_OPS = frozenset({"CALL", "CALL_FUNCTION_EX", "CALL_KW"})


def _effects(code: CodeType, statements: dict[int, TracedStatement]) -> dict[int, TracedStatement]:
    """`statements` with each statement's `effect` set from the opcodes on its lines."""
    calls: dict[int, int] = {}
    other: set[int] = set()
    for ins in dis.get_instructions(code):
        line = ins.positions.lineno if ins.positions else None
        stmt = statements.get(line) if line is not None else None
        if stmt is None:
            continue
        if ins.opname in CALL_OPS:
            calls[stmt.start] = calls.get(stmt.start, 0) + 1
        elif ins.opname not in PURE_OPS:
            other.add(stmt.start)
    done: dict[int, TracedStatement] = {}
    for start, stmt in {st.start: st for st in statements.values()}.items():
        n = calls.get(start, 0)
        effect = "other" if start in other or n > 1 else ("one-call" if n == 1 else "pure")
        done[start] = replace(stmt, effect=effect)
    return {line: done[stmt.start] for line, stmt in statements.items()}


def code_info(func: Callable, qualname: str, vendor_root: Path) -> CodeInfo:
    """Parse `func`'s source into per-line statements; `file` is relative to `vendor_root`."""
    src_lines, first = inspect.getsourcelines(func)
    tree = ast.parse(textwrap.dedent("".join(src_lines)))
    fdef = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    offset = first - 1
    statements: dict[int, TracedStatement] = {}
    _walk(fdef.body, offset, [ln.rstrip("\n") for ln in textwrap.dedent("".join(src_lines)).splitlines()], (), statements)
    code = func.__code__
    path = Path(code.co_filename).resolve()
    try:
        rel = path.relative_to(vendor_root.resolve()).as_posix()
    except ValueError:
        rel = path.as_posix()
    params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return CodeInfo(qualname, rel, code, fdef.lineno + offset, tuple(params), _effects(code, statements))
