"""What the recorder needs to know of a traced function: its statements per line, and what each
statement's bytecode may do.

The statements are those of the one model of a file (:mod:`annotate.source`, tree-sitter), the
model notes and pages use: a function's file is parsed once and the statements inside the
function's symbol are taken, so a recorded line is a line the site's anchors know. This module adds
only what is not syntax.

A line event only says "line N is about to run". A statement may span several lines (and line
events may jump back to its first line), so the recorder works per statement: a statement is
finished when a line of *another* statement starts, or when the frame returns.

Each statement also gets an `effect`, read off its bytecode, which lets the recorder prove that no
tensor changed between two of its events (and so reuse a copy instead of taking another):
"pure" (no call at all: loads, stores, tuple packing, `is None` and truth tests, jumps), "one-call"
(exactly one call, everything else pure) or "other". For a one-call statement whose call is a
method of a local (`q.view(…)`), `Statement.method` names the two, so the recorder can check at run
time that it is a torch.Tensor method that writes nothing.
"""
from __future__ import annotations

import dis
import functools
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType
from typing import Callable

from annotate import source
from annotate.errors import UserError
from annotate.source import Statement

#: headers that hold no code of their own (no line event lands on them): not statements of a trace
_NO_CODE = frozenset({"else_clause", "finally_clause"})


@dataclass(frozen=True, slots=True)
class TracedStatement:
    """A statement of the model with what its bytecode may do (see the module docstring)."""

    statement: Statement
    effect: str = "other"           # "pure" | "one-call" | "other"


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


def _effects(code: CodeType, lines: dict[int, Statement]) -> dict[int, TracedStatement]:
    """Each line's statement with its `effect`, from the opcodes on the statement's lines."""
    calls: dict[int, int] = {}
    other: set[int] = set()
    for ins in dis.get_instructions(code):
        line = ins.positions.lineno if ins.positions else None
        stmt = lines.get(line) if line is not None else None
        if stmt is None:
            continue
        if ins.opname in CALL_OPS:
            calls[stmt.start_line] = calls.get(stmt.start_line, 0) + 1
        elif ins.opname not in PURE_OPS:
            other.add(stmt.start_line)
    done: dict[int, TracedStatement] = {}
    for start, stmt in {st.start_line: st for st in lines.values()}.items():
        n = calls.get(start, 0)
        effect = "other" if start in other or n > 1 else ("one-call" if n == 1 else "pure")
        done[start] = TracedStatement(stmt, effect)
    return {line: done[stmt.start_line] for line, stmt in lines.items()}


def _parse(text: str, rel: str) -> source.SourceFile:
    """The one model of a file; a missing tree-sitter is one line naming the fix."""
    try:
        return source.parse(text, rel)
    except ImportError as exc:
        raise UserError(f"tracing needs tree-sitter to map the traced lines to their statements ({exc}); "
                        "install the project (`make install`) or, on the GPU image, the carried wheels "
                        "(scripts/gpu-check.sh does)") from None


def require_parser() -> None:
    """Refuse a trace before the model is built and compiled (seconds) when tree-sitter is missing."""
    _parse("pass\n", "<check>")


def _model(path: Path, rel: str) -> source.SourceFile:
    """The parsed model of `path`, once per content (traced functions share files)."""
    return _parsed(path.read_bytes(), rel)


@functools.lru_cache(maxsize=32)
def _parsed(data: bytes, rel: str) -> source.SourceFile:
    return _parse(data.decode("utf-8"), rel)


def _symbol(model: source.SourceFile, code: CodeType, qualname: str) -> source.Symbol:
    """The function's symbol: the one that starts on the code object's first line (its first
    decorator's, else its `def`), the one named `qualname` among several."""
    found = [s for s in model.definitions if s.kind != "class" and s.start_line == code.co_firstlineno]
    named = [s for s in found if s.qualname == qualname]
    if named or found:
        return (named or found)[0]
    raise LookupError(f"{model.path}: no function starts on line {code.co_firstlineno} ({qualname})")


def _lines(statements: list[Statement]) -> dict[int, Statement]:
    """line -> statement, for every line of each statement; a header gives only the lines before
    its body's first statement (`if x: return y` is the `return`), and the outer statement wins
    a line shared with an inner one."""
    out: dict[int, Statement] = {}
    for i, stmt in enumerate(statements):
        last = stmt.end_line
        if stmt.is_header and i + 1 < len(statements):
            last = min(last, statements[i + 1].start_line - 1)
        for line in range(stmt.start_line, last + 1):
            out.setdefault(line, stmt)
    return out


def _in_body(stmt: Statement, symbol: source.Symbol) -> bool:
    """`stmt` runs in the function's frame, or is inside a definition made there (not its own
    `def` header, which has its own record: the entry)."""
    name = symbol.qualname
    if not symbol.start_line <= stmt.start_line <= symbol.end_line:   # (a name may be defined twice)
        return False
    if stmt.symbol != name and not (stmt.symbol or "").startswith(name + "."):
        return False
    own_header = stmt.kind == "function_definition" and stmt.symbol == name and stmt.start_line == symbol.def_line
    return not own_header and stmt.kind not in _NO_CODE


def code_info(func: Callable, qualname: str, vendor_root: Path) -> CodeInfo:
    """`func`'s statements per line, from the model of its file; `file` is relative to `vendor_root`."""
    code = func.__code__
    path = Path(code.co_filename).resolve()
    try:
        rel = path.relative_to(vendor_root.resolve()).as_posix()
    except ValueError:
        rel = path.as_posix()
    model = _model(path, rel)
    symbol = _symbol(model, code, qualname)
    inside = [s for s in model.statements if _in_body(s, symbol)]
    params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return CodeInfo(qualname, rel, code, symbol.def_line, tuple(params), _effects(code, _lines(inside)))
