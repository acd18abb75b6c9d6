"""The one model of a Python file's statements (tree-sitter): symbols, statements, bound names, find().

Notes and prose references are anchored by *symbol* (qualified name such as
``RMSNorm.add_rms_forward``) and *statement* (its text with white space normalised), never by
line number; this module is what turns such an anchor back into the line span of the file at
hand. The trace recorder reads the same statements (`annotate.trace.record.sourcemap` adds only what
their bytecode may do): each also carries the local names it binds, the names of the enclosing
`for` loops and its sole ``name.method(…)`` call, all found in the same walk. It knows nothing of
notes, pages, traces or MkDocs.

tree-sitter is imported when the first file is parsed, not with this module: the trace command's
parser and help, and the modules of the trace path, load without it.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

#: Compound statements whose *header* (up to the colon) is one statement of ours.
_COMPOUND = {
    "if_statement",
    "elif_clause",
    "else_clause",
    "for_statement",
    "while_statement",
    "with_statement",
    "try_statement",
    "except_clause",
    "finally_clause",
    "match_statement",
    "case_clause",
}
_DEFINITIONS = {"function_definition", "class_definition"}
_ASSIGNMENTS = {"assignment", "augmented_assignment"}
#: patterns a name can be bound inside (`a, (b, *c) = …`); attributes and subscripts bind no name
_NAME_PATTERNS = {"pattern_list", "tuple_pattern", "list_pattern", "tuple", "list", "list_splat_pattern",
                  "list_splat", "parenthesized_expression", "as_pattern_target"}


@lru_cache(maxsize=1)
def _parser() -> Parser:
    """The Python parser; tree-sitter is imported here, on first use (see the module docstring)."""
    import tree_sitter_python
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_python.language()))


def normalise(text: str) -> str:
    """Canonical statement text: comments dropped, white space collapsed, no padding in brackets.

    ``QKVParallelLinear(\\n    hidden_size,\\n)`` and ``QKVParallelLinear(hidden_size)`` both
    become ``QKVParallelLinear(hidden_size)``, so re-indenting or re-wrapping a statement
    upstream does not break the notes pinned to it.
    """
    text = re.sub(r"#[^\n'\"]*$", "", text, flags=re.MULTILINE)
    text = re.sub(r"\\\n", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"([(\[{]) ", r"\1", text)
    text = re.sub(r",? ?([)\]}])", r"\1", text)
    text = re.sub(r" ([:,])", r"\1", text)
    return text.rstrip(":").rstrip()


@dataclass(frozen=True)
class Symbol:
    """A class or function definition with its qualified name and where it sits."""

    qualname: str
    kind: str  # "class", "function" or "method"
    def_line: int  # the `def`/`class` line (1-based)
    start_line: int  # first decorator line, else def_line
    end_line: int
    decorators: tuple[str, ...] = ()
    decorator_lines: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def span(self) -> tuple[int, int]:
        return (self.start_line, self.end_line)


@dataclass(frozen=True)
class Statement:
    """One statement (or compound-statement header) with its normalised text and what it binds.

    ``bound_names`` are the *local variables* a frame holds after the statement: plain names bound
    by ``=``/``+=``/``:``, ``for`` and ``with … as`` (every target of ``a = b = …``), and ``x`` for a
    bare ``x.op_(…)`` (torch's in-place rule); the trace recorder looks them up."""

    start_line: int
    end_line: int
    text: str
    kind: str
    symbol: str | None  # innermost enclosing symbol's qualname; None at module level
    bound_names: tuple[str, ...] = ()  # local names bound (or changed in place by a bare `x.op_(…)`)
    loop_targets: tuple[str, ...] = ()  # local names bound by the enclosing `for` headers of its function
    method: tuple[str, str] | None = None  # ("q", "view"): the statement's (header's) only call, see _sole_method

    @property
    def span(self) -> tuple[int, int]:
        return (self.start_line, self.end_line)

    @property
    def is_header(self) -> bool:
        """The header of a compound statement or definition (its body's statements follow it)."""
        return self.kind in _COMPOUND or self.kind in _DEFINITIONS

    @property
    def is_return(self) -> bool:
        return self.kind == "return_statement"

    @property
    def lines(self) -> range:
        return range(self.start_line, self.end_line + 1)


class AnchorError(LookupError):
    """An anchor (symbol, statement, nth) that does not resolve in this file."""


@dataclass
class SourceFile:
    """The parsed model of one file. Build it with :func:`parse` or :func:`load`."""

    path: str
    text: str
    symbols: dict[str, Symbol] = field(default_factory=dict)
    statements: list[Statement] = field(default_factory=list)
    #: every definition in file order; `symbols` keeps the last of a name (a property's setter, a
    #: function defined once per platform), this keeps them all
    definitions: list[Symbol] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def symbol(self, qualname: str) -> Symbol:
        try:
            return self.symbols[qualname]
        except KeyError:
            raise AnchorError(f"symbol {qualname!r} not found in {self.path}") from None

    def statements_in(self, qualname: str | None) -> list[Statement]:
        """Statements whose innermost enclosing symbol is ``qualname`` (None: module level)."""
        return [s for s in self.statements if s.symbol == qualname]

    def matches(self, symbol: str | None, statement: str) -> list[Statement]:
        """All statements of ``symbol`` whose normalised text equals ``statement``'s, in order."""
        wanted = normalise(statement)
        return [s for s in self.statements_in(symbol) if s.text == wanted]

    def find(self, symbol: str | None, statement: str | None = None, nth: int = 0) -> tuple[int, int]:
        """Line span of the ``nth`` statement with this text in ``symbol``; the symbol's span if no statement."""
        if statement is None:
            return self.symbol(symbol or "").span
        if symbol is not None:
            self.symbol(symbol)
        found = self.matches(symbol, statement)
        if nth >= len(found):
            where = symbol or "module level"
            raise AnchorError(
                f"statement {normalise(statement)!r} (nth={nth}) not found in {where} of {self.path}"
                f" ({len(found)} match{'es' if len(found) != 1 else ''})"
            )
        return found[nth].span

    def statement_at(self, line: int) -> Statement | None:
        """The innermost statement covering ``line`` (shortest span wins)."""
        covering = [s for s in self.statements if s.start_line <= line <= s.end_line]
        return min(covering, key=lambda s: s.end_line - s.start_line, default=None)

    def nearest(self, symbol: str | None, statement: str, k: int = 3) -> list[Statement]:
        """The ``k`` statements of ``symbol`` (or the whole file) most similar to ``statement``."""
        pool = self.statements_in(symbol) if symbol in self.symbols else self.statements
        wanted = normalise(statement)
        ranked = sorted(pool, key=lambda s: -difflib.SequenceMatcher(None, wanted, s.text).ratio())
        return ranked[:k]


def load(path: Path, relpath: str | None = None) -> SourceFile:
    """Parse a file from disk; ``relpath`` is the name used in messages (default: the path)."""
    from annotate.codec import read_text

    return parse(read_text(path, relpath, fix="run `annotate vendor sync` to restore it"), relpath or str(path))


def parse(text: str, path: str = "<string>") -> SourceFile:
    """Parse Python source text into symbols and statements."""
    source = text.encode("utf-8")
    tree = _parser().parse(source)
    model = SourceFile(path=path, text=text)
    _Walker(source, model).visit_block(tree.root_node, scope=[], in_class=False, loops=())
    model.statements.sort(key=lambda s: (s.start_line, -s.end_line))
    return model


def syntax_error_line(text: str) -> int | None:
    """The first line (1-based) tree-sitter finds an error or a missing token on; None when ``text`` parses.

    An experiment's edited file goes through here before anything runs it (annotate/experiments.py)."""
    root = _parser().parse(text.encode("utf-8")).root_node
    if not root.has_error:
        return None
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            return node.start_point[0] + 1
        stack.extend(reversed([c for c in node.children if c.has_error or c.is_missing or c.type == "ERROR"]))
    return root.start_point[0] + 1


class _Walker:
    """Walks the tree once, filling a SourceFile's symbols and statements."""

    def __init__(self, source: bytes, model: SourceFile) -> None:
        self.source = source
        self.model = model

    def text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8")

    def visit_block(self, node: Node, scope: list[str], in_class: bool, loops: tuple[str, ...]) -> None:
        for child in node.named_children:
            self.visit(child, scope, in_class, loops)

    def visit(self, node: Node, scope: list[str], in_class: bool, loops: tuple[str, ...]) -> None:
        kind = node.type
        if kind == "decorated_definition":
            definition = node.child_by_field_name("definition")
            if definition is not None:
                self.visit_definition(definition, node, scope, in_class, loops)
        elif kind in _DEFINITIONS:
            self.visit_definition(node, node, scope, in_class, loops)
        elif kind in _COMPOUND:
            self.visit_compound(node, scope, in_class, loops)
        elif kind in ("comment", "block"):
            if kind == "block":
                self.visit_block(node, scope, in_class, loops)
        else:
            self.add_statement(node, node.end_byte, scope, loops)

    def visit_definition(self, node: Node, outer: Node, scope: list[str], in_class: bool,
                         loops: tuple[str, ...]) -> None:
        name_node = node.child_by_field_name("name")
        if name_node is None:   # (tree-sitter's grammar always names a def or class)
            return
        name = self.text(name_node)
        qualname = ".".join([*scope, name])
        decorators = [c for c in outer.named_children if c.type == "decorator"]
        is_class = node.type == "class_definition"
        kind = "class" if is_class else ("method" if in_class else "function")
        self.model.symbols[qualname] = symbol = Symbol(
            qualname=qualname,
            kind=kind,
            def_line=node.start_point[0] + 1,
            start_line=outer.start_point[0] + 1,
            end_line=outer.end_point[0] + 1,
            decorators=tuple(self.text(d).lstrip("@").strip() for d in decorators),
            decorator_lines=tuple(d.start_point[0] + 1 for d in decorators),
        )
        self.model.definitions.append(symbol)
        body = node.child_by_field_name("body")
        header_end = body.start_byte if body is not None else node.end_byte
        self.add_statement(node, header_end, [*scope, name], loops)
        if body is not None:   # a new frame: the loops around the definition are not its own
            self.visit_block(body, [*scope, name], in_class=is_class, loops=())

    def visit_compound(self, node: Node, scope: list[str], in_class: bool, loops: tuple[str, ...]) -> None:
        body = node.child_by_field_name("body") or node.child_by_field_name("consequence")
        blocks = [c for c in node.named_children if c.type == "block"]
        first_block = body or (blocks[0] if blocks else None)
        header_end = first_block.start_byte if first_block is not None else node.end_byte
        self.add_statement(node, header_end, scope, loops)
        if node.type == "for_statement":   # its body (and `else:`) run with the loop's names bound
            loops = loops + tuple(_plain_names(node.child_by_field_name("left"), self.text))
        for child in node.named_children:
            if child.type == "block":
                self.visit_block(child, scope, in_class, loops)
            elif child.type in _COMPOUND:
                self.visit_compound(child, scope, in_class, loops)

    def add_statement(self, node: Node, end_byte: int, scope: list[str], loops: tuple[str, ...]) -> None:
        raw = self.source[node.start_byte : end_byte].decode("utf-8")
        text = normalise(_strip_comments(raw, node, self.source, end_byte))
        end_line = self.source[:end_byte].rstrip().count(b"\n") + 1
        self.model.statements.append(
            Statement(
                start_line=node.start_point[0] + 1,
                end_line=end_line,
                text=text,
                kind=node.type,
                symbol=".".join(scope) or None,
                bound_names=tuple(_bound_names(node, end_byte, self.text)),
                loop_targets=loops,
                method=_sole_method(node, end_byte, self.text),
            )
        )


def _strip_comments(raw: str, node: Node, source: bytes, end_byte: int) -> str:
    """Blank out comment nodes inside the statement so normalisation never sees them."""
    cuts = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.start_byte >= end_byte:
            continue
        if current.type == "comment":
            cuts.append((current.start_byte - node.start_byte, current.end_byte - node.start_byte))
        stack.extend(current.children)
    data = raw.encode("utf-8")
    for start, end in sorted(cuts, reverse=True):
        data = data[:start] + b" " + data[end:]
    return data.decode("utf-8")


def _descendants(node: Node, kind: str, before: int | None = None) -> list[Node]:
    """The nodes of type ``kind`` below ``node``; with ``before``, only those starting before that byte
    (a header's: its body is not walked, which would make a file's walk quadratic in its nesting)."""
    found = []
    stack = list(node.children)
    while stack:
        current = stack.pop()
        if before is not None and current.start_byte >= before:
            continue
        if current.type == kind:
            found.append(current)
        stack.extend(current.children)
    return found


_Text = Callable[["Node"], str]


def _plain_names(node: Node | None, text: _Text) -> list[str]:
    """Local names a binding target binds, left to right (``self.x`` and ``x[i]`` bind none)."""
    if node is None:
        return []
    if node.type == "identifier":
        return [text(node)]
    if node.type not in _NAME_PATTERNS:
        return []
    return [n for child in node.named_children for n in _plain_names(child, text)]


def _bound_names(node: Node, end_byte: int, text: _Text) -> list[str]:
    """Local names the statement (or header, up to ``end_byte``) binds; a bare ``x.op_(…)`` binds x."""
    if node.type == "for_statement":
        return _plain_names(node.child_by_field_name("left"), text)
    if node.type == "with_statement":
        aliases = _descendants(node, "as_pattern_target", end_byte)
        return [n for a in sorted(aliases, key=lambda a: a.start_byte) for n in _plain_names(a, text)]
    if node.type != "expression_statement" or len(node.named_children) != 1:
        return []
    first = node.named_children[0]
    if first.type == "call":
        receiver = _in_place_receiver(first, text)
        return [receiver] if receiver is not None else []
    found: list[str] = []
    expr: Node | None = first
    while expr is not None and expr.type in _ASSIGNMENTS:   # `a = b = x`: a chain of assignments
        found += _plain_names(expr.child_by_field_name("left"), text)
        expr = expr.child_by_field_name("right")
    return found


def _attribute_call(call: Node, text: _Text) -> tuple[str, str] | None:
    """(receiver, method) for a call ``receiver.method(…)`` on a plain name, else None."""
    func = call.child_by_field_name("function")
    if func is None or func.type != "attribute":
        return None
    receiver, method = func.child_by_field_name("object"), func.child_by_field_name("attribute")
    if receiver is None or method is None or receiver.type != "identifier":
        return None
    return text(receiver), text(method)


def _in_place_receiver(call: Node, text: _Text) -> str | None:
    """``x`` for ``x.op_(…)`` (a trailing-underscore method of a plain name), else None."""
    found = _attribute_call(call, text)
    return found[0] if found and found[1].endswith("_") and not found[1].startswith("_") else None


def _sole_method(node: Node, end_byte: int, text: _Text) -> tuple[str, str] | None:
    """(receiver, name) when the statement's (or header's) only call is ``name.method(…)`` with no
    ``*args``, ``**kwargs`` or ``out=`` (what such arguments hold, or where it writes, is unknown)."""
    calls = _descendants(node, "call", end_byte)
    if len(calls) != 1:
        return None
    found = _attribute_call(calls[0], text)
    if found is None:
        return None
    args = calls[0].child_by_field_name("arguments")
    for arg in args.named_children if args is not None else []:
        if arg.type in ("list_splat", "dictionary_splat"):
            return None
        name = arg.child_by_field_name("name") if arg.type == "keyword_argument" else None
        if name is not None and text(name) == "out":
            return None
    return found
