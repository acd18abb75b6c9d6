"""Which statement of a compiled Python body each line of its Triton kernel computes, found by analysis.

Both sides become expression trees and are compared, so nothing here is a table typed by hand:

- the **kernel** (Triton text Inductor generated, as captured in a trace) is parsed with :mod:`ast`:
  ``tl.load`` (which pointer, its dtype from the kernel's signature, which half of a row its index
  reaches), ``.to(tl.float32)`` (a widening, or a cast that leaves a float32 value float32),
  arithmetic, ``tl.sum``, ``libdevice.rsqrt``/``exp``, ``tl.where`` (masking, or picking the two halves
  of a concatenation), ``tl.store`` (its pointer's dtype: a float32 value stored to bf16 is rounded there);
- the **Python body** (the vendored method, and module-level helpers it calls) is evaluated symbolically
  with eager PyTorch's dtype rules: an arithmetic result held in the model's 16-bit dtype is rounded to
  it, ``.float()`` widens exactly, ``.to(orig_dtype)`` rounds a float32 value.

Trees are compared with roundings and widenings left out (they change no structure); each kernel
line then belongs to the Python statement that built the same sub-expression, and each rounding the
eager body does is looked for in the kernel: done by the store, done by an explicit cast, or absent
(the kernel carries float32 on). Kernel pointers are bound to the body's arguments and attributes by
trying every assignment and keeping the one under which most of the kernel matches; outputs are bound
through the wrapper module's ``.run(...)`` call and its ``return (...)``. Symmetric inputs (``x`` and
``residual`` enter one sum alike) are named in the order the body first reads them.
"""
from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

#: the explicit mantissa bits of the 16-bit dtypes Triton names; a float32 value stored to one is rounded
SIXTEEN_BIT = {"bf16": "bfloat16", "fp16": "float16"}
_COMMUTATIVE = {"add", "mul"}


@dataclass(eq=False)
class Expr:
    """One value of either side: an operation, its operands, and where it was made.

    ``op``: leaf, const, f32 (exact widening), round (to the 16-bit dtype), add, sub, mul, div, neg, exp,
    rsqrt, sum, half (``tag`` 0/1 of a row split in two), gather, cat, opaque; on the kernel side also load,
    idx, cmp. ``where``: the Python statement lines (outermost call first) or the kernel line."""

    op: str
    args: tuple["Expr", ...] = ()
    tag: Any = None
    dtype: str | None = None          # "f32", "model", "int" or None (unknown)
    where: tuple[int, ...] = ()


# ---------------------------------------------------------------------------------------------- kernel side


@dataclass(frozen=True)
class KernelLine:
    """One line of the kernel source, with what it does in our words."""

    line: int
    text: str
    kind: str            # load, widen, stays-f32, round, square, mul, add, sub, div, neg, exp, rsqrt, sum, const, select, store, index
    detail: str = ""


@dataclass
class ParsedKernel:
    """A Triton kernel as values: its pointer dtypes, every line's value, its stores."""

    name: str
    signature: dict[str, str]
    fp_fusion: bool
    values: dict[str, Expr] = field(default_factory=dict)                 # kernel variable -> value
    lines: dict[int, KernelLine] = field(default_factory=dict)
    stores: list[tuple[str, Expr, int]] = field(default_factory=list)     # (pointer, value, line)
    owner: dict[int, Expr] = field(default_factory=dict)                  # kernel line -> the value it made
    noop_casts: list[tuple[Expr, int]] = field(default_factory=list)      # float32 value kept float32 at line


_SIGNATURE = re.compile(r"'signature':\s*(\{[^{}]*\})")
_FUSION = re.compile(r"'enable_fp_fusion':\s*(True|False)")


def _int(node: ast.AST, ints: dict[str, int]) -> int | None:
    """An integer literal, a negated one, or a name bound to one (``R0_BLOCK: tl.constexpr = 1024``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int(node.operand, ints)
        return None if v is None else -v
    if isinstance(node, ast.Name):
        return ints.get(node.id)
    return None


def _attr_path(node: ast.AST) -> str:
    """``tl.sum`` for an attribute chain of names, "" otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


class _KernelReader:
    """Evaluates a Triton kernel's statements into :class:`Expr` values."""

    def __init__(self, kernel: ParsedKernel) -> None:
        self.k = kernel
        self.ints: dict[str, int] = {}
        self.line = 0

    def run(self, fn: ast.FunctionDef, source_lines: list[str]) -> None:
        for stmt in fn.body:
            self.line = stmt.lineno
            text = source_lines[stmt.lineno - 1].strip()
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
                if not isinstance(target, ast.Name) or stmt.value is None:
                    continue
                v = _int(stmt.value, self.ints)
                if v is not None:
                    self.ints[target.id] = v
                value = self.expr(stmt.value)
                self.k.values[target.id] = value
                if target.id.startswith("tmp"):
                    self._describe(stmt.lineno, text, value)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                if _attr_path(stmt.value.func) == "tl.store":
                    self._store(stmt.value, stmt.lineno, text)
                elif _attr_path(stmt.value.func) == "tl.device_assert":
                    self.k.lines[stmt.lineno] = KernelLine(stmt.lineno, text, "index", "bounds check")

    # values ------------------------------------------------------------------------------------------------
    def expr(self, node: ast.AST) -> Expr:
        if isinstance(node, ast.Name):
            return self.k.values.get(node.id) or Expr("idx", tag=(node.id, None))
        if isinstance(node, ast.Constant):
            return Expr("const", tag=node.value, dtype="f32")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.expr(node.operand)
            return Expr("const", tag=-inner.tag, dtype="f32") if inner.op == "const" and isinstance(inner.tag, (int, float)) \
                else Expr("neg", (inner,), dtype="f32", where=(self.line,))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            return self.expr(node.operand)
        if isinstance(node, ast.Subscript):                    # tmp[:, None], tl.arange(…)[None, :]
            return self.expr(node.value)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return Expr("cmp", (self.expr(node.left), self.expr(node.comparators[0])),
                        tag=type(node.ops[0]).__name__, where=(self.line,))
        if isinstance(node, ast.BinOp):
            return self._binop(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        return Expr("opaque", tag=ast.dump(node)[:40])

    def _binop(self, node: ast.BinOp) -> Expr:
        a, b = self.expr(node.left), self.expr(node.right)
        if isinstance(node.op, ast.Mod) and a.op == "idx":          # x0 = xindex % 128: an index in [0, 128)
            n = _int(node.right, self.ints)
            return Expr("idx", tag=(a.tag[0] + "%", (0, n) if n else None))
        if isinstance(node.op, (ast.FloorDiv, ast.Mod)) or "idx" in (a.op, b.op) and not _is_value(a, b):
            return Expr("idx", (a, b), tag=("arith", None))
        if "int" in (a.dtype, b.dtype):                        # index arithmetic on loaded integers
            return Expr("idx", (a, b), tag=("int", None), dtype="int", where=(self.line,))
        op = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div"}.get(type(node.op), "opaque")
        return Expr(op, (a, b), dtype="f32", where=(self.line,))

    def _call(self, node: ast.Call) -> Expr:
        path = _attr_path(node.func)
        args = node.args
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to" and args:
            return self._cast(self.expr(node.func.value), _attr_path(args[0]))
        if path == "tl.load":
            return self._load(node)
        if path == "tl.full" and len(args) >= 2:
            inner = self.expr(args[1])
            return Expr("const", tag=inner.tag, dtype="f32")
        if path in ("tl.broadcast_to", "tl.reshape") and args:
            return self.expr(args[0])
        if path == "tl.arange" and len(args) == 2:
            lo, hi = _int(args[0], self.ints), _int(args[1], self.ints)
            return Expr("idx", tag=("arange", (lo, hi) if lo is not None and hi is not None else None))
        if path == "tl.program_id":
            return Expr("idx", tag=("program", None))
        if path == "tl.sum" and args:
            return Expr("sum", (self.expr(args[0]),), dtype="f32", where=(self.line,))
        if path.endswith(".rsqrt") and args:
            return Expr("rsqrt", (self.expr(args[0]),), dtype="f32", where=(self.line,))
        if path.endswith(".exp") and args:
            return Expr("exp", (self.expr(args[0]),), dtype="f32", where=(self.line,))
        if path == "tl.where" and len(args) == 3:
            return self._where(*(self.expr(a) for a in args))
        return Expr("opaque", tag=path or "call", where=(self.line,))

    def _cast(self, value: Expr, to: str) -> Expr:
        if to == "tl.float32":
            if value.dtype == "model":
                return Expr("f32", (value,), dtype="f32", where=(self.line,))
            if value.op not in ("sum", "load", "const", "idx", "cmp"):
                self.k.noop_casts.append((value, self.line))
            return value
        if to in ("tl.bfloat16", "tl.float16"):
            return Expr("round", (value,), dtype="model", where=(self.line,))
        return value

    def _where(self, mask: Expr, a: Expr, b: Expr) -> Expr:
        if b.op == "const":                       # masked-off lanes read as 0
            return a
        if a.op == "const":
            return b
        if mask.op == "cmp" and mask.args[1].op == "const" and mask.args[1].tag == 0:   # wraps a negative index
            return b
        if mask.op == "cmp" and mask.tag == "Lt":                                        # lower part | upper part
            return Expr("cat", (a, b), dtype=a.dtype, where=(self.line,))
        return Expr("opaque", (a, b), tag="where", where=(self.line,))

    # loads and stores ---------------------------------------------------------------------------------------
    def _load(self, node: ast.Call) -> Expr:
        ptr_expr = node.args[0]
        ptr, terms = _pointer_terms(ptr_expr)
        dtype = self.k.signature.get(ptr, "")
        kind = "model" if dtype.lstrip("*") in SIXTEEN_BIT else ("int" if dtype.startswith("*i") else "f32")
        mask = self.expr(node.args[1]) if len(node.args) > 1 else None
        half, gathered = self._reach(terms, mask)
        if gathered is None:
            return Expr("load", tag=(ptr, half), dtype=kind, where=(self.line,))
        row = Expr("gather", (Expr("load", tag=(ptr, None), dtype=kind), gathered), dtype=kind, where=(self.line,))
        return Expr("load", (row,), tag=(ptr, half), dtype=kind, where=(self.line,))

    def _reach(self, terms: list[tuple[int, ast.AST | None]], mask: Expr | None) -> tuple[int | None, Expr | None]:
        """Which half of a row a load's index reaches (None: the whole row or not known), and the loaded
        index it gathers by (a value read from another pointer), from its terms ``c + v + D*row``."""
        c, elem, stride, gathered = 0, None, None, None
        for coef, name in terms:
            if name is None:
                c += coef
                continue
            value = self.expr(name)
            load = _find(value, "load")
            if load is not None and coef > 1:
                gathered = load
                stride = coef if stride is None else min(stride, coef)
            elif coef == 1 and value.op == "idx" and value.tag[1] is not None and elem is None:
                elem = value
            elif coef > 1:
                stride = coef if stride is None else min(stride, coef)
        if elem is None or stride is None:
            return None, gathered
        lo, hi = elem.tag[1]
        if mask is not None and mask.op == "cmp" and mask.args[0] is elem or (
                mask is not None and mask.op == "cmp" and mask.args[0].tag == elem.tag):
            bound = mask.args[1].tag if mask.args[1].op == "const" else None
            if isinstance(bound, int):
                lo, hi = (lo, min(hi, bound)) if mask.tag == "Lt" else (max(lo, bound), hi) if mask.tag == "GtE" else (lo, hi)
        a, b = c + lo, c + hi
        if (a, b) == (0, stride):
            return None, gathered
        if stride % 2 == 0 and (a, b) in ((0, stride // 2), (stride // 2, stride)):
            return (0 if a == 0 else 1), gathered
        return None, gathered

    def _store(self, call: ast.Call, line: int, text: str) -> None:
        ptr, _ = _pointer_terms(call.args[0])
        value = self.expr(call.args[1])
        self.k.stores.append((ptr, value, line))
        dtype = self.k.signature.get(ptr, "").lstrip("*")
        rounds = dtype in SIXTEEN_BIT and value.dtype == "f32"
        self.k.lines[line] = KernelLine(line, text, "store", f"{ptr} ({dtype})" + (" rounds" if rounds else ""))

    def _describe(self, line: int, text: str, value: Expr) -> None:
        kind, detail = value.op, ""
        made_here = bool(value.where) and value.where[0] == line
        if not made_here:                                  # a new name for a value made on an earlier line
            kind = "stays-f32" if ".to(tl.float32)" in text and value.dtype == "f32" else "index"
        elif value.op in ("load", "f32") and _find(value, "load") is not None and (
                value.op == "load" or value.args[0].op == "load"):
            load = value if value.op == "load" else value.args[0]
            ptr, half = load.tag
            kind = "load"
            detail = f"{ptr} ({self.k.signature.get(ptr, '?').lstrip('*')})" + (
                "" if half is None else f" half {half}") + (" gathered" if load.args else "") + (
                " widened" if value.op == "f32" else "")
        elif value.op == "f32":
            kind = "widen"
        elif value.op == "mul" and value.args[0] is value.args[1]:
            kind = "square"
        elif value.op in ("idx", "cmp", "opaque", "const"):
            kind = "const" if value.op == "const" else "index"
        elif value.op == "cat":
            kind = "select"
        if made_here and kind not in ("index", "const"):
            self.k.owner[line] = value
        self.k.lines[line] = KernelLine(line, text, kind, detail)


def _is_value(a: Expr, b: Expr) -> bool:
    return a.op not in ("idx", "cmp") and b.op not in ("idx", "cmp")


def _find(value: Expr, op: str) -> Expr | None:
    """The first ``op`` in `value`'s tree (depth first)."""
    if value.op == op:
        return value
    for a in value.args:
        found = _find(a, op)
        if found is not None:
            return found
    return None


def _pointer_terms(node: ast.AST) -> tuple[str, list[tuple[int, ast.AST | None]]]:
    """``in_ptr0 + (64 + 128*x4 + ((-64) + x0))`` -> ("in_ptr0", [(64, None), (128, x4), (-64, None), (1, x0)])."""
    terms: list[tuple[int, ast.AST | None]] = []
    ptr = ""

    def walk(n: ast.AST, sign: int) -> None:
        nonlocal ptr
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)):
            walk(n.left, sign)
            walk(n.right, sign if isinstance(n.op, ast.Add) else -sign)
        elif isinstance(n, ast.Name) and "ptr" in n.id and not ptr:
            ptr = n.id
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            coef = _int(n.left, {}) if _int(n.left, {}) is not None else _int(n.right, {})
            other = n.right if _int(n.left, {}) is not None else n.left
            terms.append((sign * (coef or 0), other) if coef is not None else (0, n))
        elif _int(n, {}) is not None:
            terms.append((sign * (_int(n, {}) or 0), None))
        else:
            terms.append((sign, n))

    walk(node, 1)
    return ptr, terms


def parse_kernel(name: str, source: str) -> ParsedKernel | None:
    """The kernel's values, lines and stores; None when `source` holds no ``@triton.jit`` function."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)
               and any("jit" in ast.unparse(d) for d in n.decorator_list)), None)
    if fn is None:
        return None
    sig = _SIGNATURE.search(source)
    try:
        signature = ast.literal_eval(sig.group(1)) if sig else {}
    except (ValueError, SyntaxError):
        signature = {}
    fusion = _FUSION.search(source)
    kernel = ParsedKernel(name, {str(k): str(v) for k, v in signature.items()}, bool(fusion and fusion.group(1) == "True"))
    _KernelReader(kernel).run(fn, source.splitlines())
    return kernel


# ---------------------------------------------------------------------------------------------- Python side


@dataclass
class PythonBody:
    """A compiled method evaluated symbolically: its leaves (arguments, self attributes), values, outputs."""

    leaves: dict[str, Expr]                 # "x", "self.weight" -> leaf, in the order the body first reads them
    values: list[Expr]                      # every value made, in order
    outputs: list[Expr]                     # what it returns (a tuple's elements)
    return_line: int


class _BodyReader:
    """Evaluates a method body (and module-level helpers it calls) with eager dtype rules."""

    def __init__(self, module: ast.Module, arg_dtypes: dict[str, str]) -> None:
        self.helpers = {n.name: n for n in module.body if isinstance(n, ast.FunctionDef)}
        self.arg_dtypes = arg_dtypes
        self.leaves: dict[str, Expr] = {}
        self.values: list[Expr] = []
        self.where: tuple[int, ...] = ()

    def make(self, op: str, args: tuple[Expr, ...], dtype: str | None, tag: Any = None) -> Expr:
        e = Expr(op, args, tag, dtype, self.where)
        self.values.append(e)
        return e

    def arith(self, op: str, args: tuple[Expr, ...], dtype: str | None) -> Expr:
        """An arithmetic result; held in the 16-bit dtype it is rounded to it, as eager PyTorch stores it."""
        e = self.make(op, args, dtype)
        return self.make("round", (e,), "model") if dtype == "model" else e

    def leaf(self, name: str, dtype: str | None) -> Expr:
        if name not in self.leaves:
            self.leaves[name] = Expr("leaf", tag=name, dtype=dtype, where=self.where)
        return self.leaves[name]

    def run(self, fn: ast.FunctionDef, env: dict[str, Any], outer: tuple[int, ...] = ()) -> Any:
        for stmt in fn.body:
            self.where = outer + (stmt.lineno,)
            if isinstance(stmt, ast.Assign):
                value = self.expr(stmt.value, env)
                for target in stmt.targets:
                    self.bind(target, value, env)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                value = self.expr(stmt.value, env)
                receiver = _receiver(stmt.value)
                if receiver:                                     # x.mul_(…): x now holds the product
                    env[receiver] = value
            elif isinstance(stmt, ast.Return) and stmt.value is not None:
                return self.expr(stmt.value, env), stmt.lineno
        return None, 0

    def bind(self, target: ast.AST, value: Any, env: dict[str, Any]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, ast.Tuple) and isinstance(value, tuple):
            for t, v in zip(target.elts, value):
                self.bind(t, v, env)

    def expr(self, node: ast.AST, env: dict[str, Any]) -> Any:
        if isinstance(node, ast.Name):
            return env.get(node.id) if node.id in env else Expr("opaque", tag=node.id)
        if isinstance(node, ast.Constant):
            return Expr("const", tag=node.value, dtype="f32")
        if isinstance(node, ast.Attribute):
            if node.attr == "dtype":
                return "dtype"
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return self.leaf(f"self.{node.attr}", None)
            return Expr("opaque", tag=node.attr)
        if isinstance(node, ast.Tuple):
            return tuple(self.expr(e, env) for e in node.elts)
        if isinstance(node, ast.Subscript):
            base, index = self.expr(node.value, env), self.expr(node.slice, env)
            return self.make("gather", (base, index), base.dtype if isinstance(base, Expr) else None)
        if isinstance(node, ast.BinOp):
            return self._binop(node, env)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            a = self.expr(node.operand, env)
            return self.arith("neg", (a,), a.dtype)
        if isinstance(node, ast.Call):
            return self._call(node, env)
        return Expr("opaque", tag=type(node).__name__)

    def _binop(self, node: ast.BinOp, env: dict[str, Any]) -> Expr:
        a, b = self.expr(node.left, env), self.expr(node.right, env)
        if isinstance(node.op, ast.Pow) and b.op == "const" and b.tag == 2:
            return self.arith("mul", (a, a), a.dtype)
        op = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div"}.get(type(node.op), "opaque")
        return self.arith(op, (a, b), _promote(a, b))

    def _call(self, node: ast.Call, env: dict[str, Any]) -> Any:
        func, args = node.func, node.args
        path = _attr_path(func)
        if isinstance(func, ast.Name) and func.id in self.helpers:            # a helper of the same file: inline it
            helper = self.helpers[func.id]
            inner = {p.arg: self.expr(a, env) for p, a in zip(helper.args.args, args)}
            saved = self.where
            value, _ = self.run(helper, inner, saved)
            self.where = saved
            return value
        if path in ("torch.rsqrt", "torch.exp") and args:
            a = self.expr(args[0], env)
            return self.arith(path.split(".")[1], (a,), a.dtype)
        if path in ("F.silu", "torch.nn.functional.silu") and args:
            a = self.expr(args[0], env)                    # x·σ(x) = x / (1 + e^(−x)), rounded once when 16-bit
            one = Expr("const", tag=1.0, dtype="f32")
            e = self.make("div", (a, self.make("add", (self.make("exp", (self.make("neg", (a,), a.dtype),), a.dtype), one),
                                                 a.dtype)), a.dtype)
            return self.make("round", (e,), "model") if a.dtype == "model" else e
        if path in ("torch.chunk",) and args:
            return self._halves(self.expr(args[0], env))
        if path == "torch.cat" and args and isinstance(args[0], ast.Tuple):
            parts = [self.expr(e, env) for e in args[0].elts]
            return self.make("cat", tuple(parts), parts[0].dtype)
        if isinstance(func, ast.Attribute):
            return self._method(func.attr, self.expr(func.value, env), [self.expr(a, env) for a in args])
        return Expr("opaque", tag=path or "call")

    def _method(self, name: str, obj: Any, args: list[Any]) -> Any:
        if not isinstance(obj, Expr):
            return Expr("opaque", tag=name)
        if name == "float":
            return obj if obj.dtype == "f32" else self.make("f32", (obj,), "f32")
        if name == "to" and args and args[0] == "dtype":
            return self.make("round", (obj,), "model") if obj.dtype == "f32" else obj
        if name == "pow" and args and isinstance(args[0], Expr) and args[0].tag == 2:
            return self.arith("mul", (obj, obj), obj.dtype)
        if name == "mean":
            n = Expr("const", tag="n", dtype="f32")
            return self.arith("div", (self.make("sum", (obj,), obj.dtype), n), obj.dtype)
        if name == "chunk":
            return self._halves(obj)
        op = {"add_": "add", "mul_": "mul", "sub_": "sub", "div_": "div",
              "add": "add", "mul": "mul", "sub": "sub", "div": "div"}.get(name)
        if op and args and isinstance(args[0], Expr):
            dtype = obj.dtype if name.endswith("_") else _promote(obj, args[0])   # in place keeps the receiver's dtype
            return self.arith(op, (obj, args[0]), dtype)
        return self.make("opaque", (obj,), obj.dtype, tag=name)

    def _halves(self, obj: Expr) -> tuple[Expr, Expr]:
        return (self.make("half", (obj,), obj.dtype, tag=0), self.make("half", (obj,), obj.dtype, tag=1))


def _promote(a: Any, b: Any) -> str | None:
    """Eager type promotion between two operands: float32 wins over the 16-bit dtype; a Python number or an
    operand of unknown dtype takes the other's."""
    kinds = {x.dtype for x in (a, b) if isinstance(x, Expr) and x.op != "const" and x.dtype}
    return "f32" if "f32" in kinds else ("model" if "model" in kinds else None)


def _receiver(call: ast.Call) -> str | None:
    """``x`` of ``x.mul_(…)`` (an in-place method on a name), else None."""
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr.endswith("_") and isinstance(f.value, ast.Name):
        return f.value.id
    return None


def read_body(file_text: str, qualname: str, arg_dtypes: dict[str, str]) -> PythonBody | None:
    """Evaluate `qualname` (``Class.method``) of the vendored file symbolically; None when absent.
    ``arg_dtypes``: each argument's dtype kind (``model``, ``f32``, ``int``), from the trace's entry record."""
    try:
        module = ast.parse(file_text)
    except SyntaxError:
        return None
    cls_name, _, meth = qualname.rpartition(".")
    cls = next((n for n in module.body if isinstance(n, ast.ClassDef) and n.name == cls_name), None)
    fn = next((n for n in (cls.body if cls else []) if isinstance(n, ast.FunctionDef) and n.name == meth), None)
    if fn is None:
        return None
    reader = _BodyReader(module, arg_dtypes)
    env: dict[str, Any] = {}
    for p in fn.args.args[1:]:
        reader.where = (fn.lineno,)
        env[p.arg] = Expr("leaf", tag=p.arg, dtype=arg_dtypes.get(p.arg), where=(fn.lineno,))
    out, line = reader.run(fn, env)
    outputs = [o for o in (out if isinstance(out, tuple) else (out,)) if isinstance(o, Expr)]
    return PythonBody(_first_reads(reader.values), reader.values, outputs, line)


def _first_reads(values: list[Expr]) -> dict[str, Expr]:
    """Every leaf the body reads, in the order its values first read them; each leaf is placed at the
    statement that first reads it (an argument's value enters the kernel there)."""
    seen: dict[str, Expr] = {}
    for v in values:
        for a in v.args:
            if a.op == "leaf" and a.tag not in seen:
                a.where = v.where
                seen[a.tag] = a
    return seen


# ---------------------------------------------------------------------------------------------- comparison


def _key(e: Expr, names: dict[int, str], memo: dict[int, str]) -> str:
    """The structure of `e` without roundings and widenings; leaves and loads by what they are bound to."""
    k = memo.get(id(e))
    if k is not None:
        return k
    if e.op in ("round", "f32"):
        k = _key(e.args[0], names, memo)
    elif e.op == "leaf":
        k = names.get(id(e)) or ("const" if str(e.tag).startswith("self.") else f"arg:{e.tag}")
    elif e.op == "load":
        ptr, half = e.tag
        base = _key(e.args[0], names, memo) if e.args else names.get(id(e)) or f"ptr:{ptr}"
        k = base if half is None else f"half{half}({base})"
    elif e.op == "gather":
        k = f"gather({_key(e.args[0], names, memo)},{_key(e.args[1], names, memo)})"
    elif e.op == "half":
        k = f"half{e.tag}({_key(e.args[0], names, memo)})"
    elif e.op == "const":
        k = "const"
    else:
        parts = [_key(a, names, memo) for a in e.args]
        if e.op in _COMMUTATIVE:
            parts.sort()
        k = f"{e.op}({','.join(parts)})"
    memo[id(e)] = k
    return k


def _python_key(e: Expr, binding: dict[str, str], memo: dict[int, str]) -> str:
    names = {}
    stack = [e]
    while stack:
        x = stack.pop()
        if x.op == "leaf" and x.tag in binding:
            names[id(x)] = f"ptr:{binding[x.tag]}"
        stack.extend(x.args)
    return _key(e, names, memo)


@dataclass(frozen=True)
class Rounding:
    """A rounding the eager body does, and what the kernel does there."""

    where: tuple[int, ...]     # Python statement lines (outermost first)
    fate: str                  # "store" (the kernel's store rounds), "cast" (an explicit cast), "absent"
    kernel_line: int | None    # the store, the cast, or the line where the kernel keeps float32 instead


@dataclass
class KernelMap:
    """A kernel read against its Python body."""

    kernel: str
    binding: dict[str, str]                        # pointer -> the body's argument or attribute
    outputs: dict[str, int]                        # output pointer -> index into the body's return
    statements: dict[tuple[int, ...], list[int]]   # Python statement lines -> kernel lines that compute it
    unmatched: list[int]                           # kernel lines of arithmetic no statement explains
    roundings: list[Rounding]
    fp_fusion: bool
    lines: dict[int, KernelLine]


def _python_index(body: PythonBody, binding: dict[str, str]) -> dict[str, Expr]:
    """Key -> the first Python value of that structure (roundings and widenings are not values of their own)."""
    memo: dict[int, str] = {}
    index: dict[str, Expr] = {}
    for v in body.values:
        if v.op in ("round", "f32"):
            continue
        index.setdefault(_python_key(v, binding, memo), v)
    for leaf in body.leaves.values():
        index.setdefault(_python_key(leaf, binding, memo), leaf)
    return index


def _kernel_keys(kernel: ParsedKernel) -> dict[int, str]:
    memo: dict[int, str] = {}
    return {line: _key(v, {}, memo) for line, v in kernel.owner.items()}


def _pointer_kind(signature_type: str) -> str:
    """``*bf16`` -> model, ``*i64`` -> int, ``*fp32`` -> f32."""
    t = signature_type.lstrip("*")
    return "model" if t in SIXTEEN_BIT else ("int" if t.startswith(("i", "u")) else "f32")


def _bindings(kernel: ParsedKernel, body: PythonBody) -> Iterable[dict[str, str]]:
    """Every injective assignment of the kernel's input pointers to the body's leaves of a compatible dtype
    (a leaf of unknown dtype, a ``self`` attribute, takes any floating pointer)."""
    ptrs = [p for p in kernel.signature if p.startswith("in_ptr")]
    leaves = list(body.leaves)
    for chosen in itertools.permutations(leaves, len(ptrs)) if len(leaves) >= len(ptrs) else ():
        kinds = [(_pointer_kind(kernel.signature[p]), body.leaves[leaf].dtype) for p, leaf in zip(ptrs, chosen)]
        if all(want == kind or (want is None and kind != "int") for kind, want in kinds):
            yield {leaf: p for p, leaf in zip(ptrs, chosen)}


def analyse(kernel: ParsedKernel, body: PythonBody, returns: list[str | None] | None = None) -> KernelMap:
    """Bind, match and look for each eager rounding. ``returns``: the output pointers in the order the wrapper
    returns their buffers (None: bind outputs by structure)."""
    kkeys = _kernel_keys(kernel)
    order = {name: i for i, name in enumerate(body.leaves)}
    best: tuple[int, int, int, dict[str, str]] | None = None
    for binding in _bindings(kernel, body):
        index = _python_index(body, binding)
        outs = len(_outputs(kernel, body, binding, returns, strict=True))
        score = sum(k in index for k in kkeys.values())
        rank = -sum(abs(order[leaf] - int(re.sub(r"\D", "", p) or 0)) for leaf, p in binding.items())
        if best is None or (outs, score, rank) > best[:3]:
            best = (outs, score, rank, binding)
    binding = best[3] if best else {}
    index = _python_index(body, binding)
    statements: dict[tuple[int, ...], list[int]] = {}
    unmatched: list[int] = []
    for line, k in sorted(kkeys.items()):
        py = index.get(k)
        if py is None:
            unmatched.append(line)
            continue
        statements.setdefault(py.where, []).append(line)
    outputs = _outputs(kernel, body, binding, returns)
    for ptr in outputs:
        line = next(ln for p, _, ln in kernel.stores if p == ptr)
        statements.setdefault((body.return_line,), []).append(line)
    roundings = _roundings(kernel, body, binding, kkeys)
    for r in roundings:          # the cast that keeps float32 (or rounds) belongs to the statement that rounds eagerly
        if r.kernel_line and r.fate in ("absent", "cast") and r.kernel_line not in statements.get(r.where, []):
            statements.setdefault(r.where, []).append(r.kernel_line)
    ordered = sorted((where, sorted(lines)) for where, lines in statements.items())
    return KernelMap(kernel.name, {p: leaf for leaf, p in binding.items()}, outputs, dict(ordered),
                     unmatched, roundings, kernel.fp_fusion, kernel.lines)


def _outputs(kernel: ParsedKernel, body: PythonBody, binding: dict[str, str],
             returns: list[str | None] | None, strict: bool = False) -> dict[str, int]:
    """Output pointer -> which of the body's returned values it stores: through the wrapper's return order
    when known, else by structure. ``strict``: only those whose stored value has the returned value's structure."""
    memo: dict[int, str] = {}
    kmemo: dict[int, str] = {}
    keys = [_python_key(o, binding, memo) for o in body.outputs]
    stored = {ptr: _key(value, {}, kmemo) for ptr, value, _ in kernel.stores}
    if returns:
        pairs = {ptr: i for i, ptr in enumerate(returns) if ptr and i < len(keys) and ptr in stored}
        return {p: i for p, i in pairs.items() if not strict or stored[p] == keys[i]}
    return {ptr: keys.index(k) for ptr, k in stored.items() if k in keys}


def _roundings(kernel: ParsedKernel, body: PythonBody, binding: dict[str, str], kkeys: dict[int, str]) -> list[Rounding]:
    """Each rounding of the eager body whose operand this kernel computes: done at a store, by a cast, or absent."""
    memo: dict[int, str] = {}
    kmemo: dict[int, str] = {}
    stored = {_key(v, {}, kmemo): line for ptr, v, line in kernel.stores
              if kernel.signature.get(ptr, "").lstrip("*") in SIXTEEN_BIT}
    casts = {_key(v.args[0], {}, kmemo): v.where[0] for v in _all(kernel) if v.op == "round"}
    kept_f32 = {_key(v, {}, kmemo): line for v, line in kernel.noop_casts}
    known = set(kkeys.values())
    out = []
    for v in body.values:
        if v.op != "round":
            continue
        k = _python_key(v.args[0], binding, memo)
        if k not in known and k not in stored:
            continue                                   # computed by another kernel (or not at all)
        if k in casts:
            out.append(Rounding(v.where, "cast", casts[k]))
        elif k in stored:
            out.append(Rounding(v.where, "store", stored[k]))
        else:
            out.append(Rounding(v.where, "absent", kept_f32.get(k)))
    return out


def _all(kernel: ParsedKernel) -> list[Expr]:
    seen: dict[int, Expr] = {}
    stack = list(kernel.values.values())
    while stack:
        v = stack.pop()
        if id(v) not in seen:
            seen[id(v)] = v
            stack.extend(v.args)
    return list(seen.values())


_RUN = re.compile(r"\b(?P<name>\w+)\.run\((?P<args>[^)]*)\)")
_RETURN = re.compile(r"^\s*return \((?P<bufs>[^)]*)\)", re.M)


def wrapper_returns(code: str, kernel: ParsedKernel) -> list[str | None] | None:
    """The kernel's output pointers in the order the wrapper module returns their buffers (None where the
    wrapper does not say): its ``<kernel>.run(…)`` call names the buffer of each pointer positionally."""
    run = next((m for m in _RUN.finditer(code) if m["name"] == kernel.name), None)
    ret = _RETURN.search(code[code.find("def call"):]) if "def call" in code else None
    if run is None or ret is None:
        return None
    params = list(kernel.signature)
    passed = [a.strip() for a in run["args"].split(",")]
    buffer_of = {p: passed[i] for i, p in enumerate(params) if i < len(passed) and p.startswith("out_ptr")}
    returned = [b.strip() for b in ret["bufs"].split(",") if b.strip()]
    order = [next((p for p, b in buffer_of.items() if b == buf), None) for buf in returned]
    return order if any(order) else None
