"""The trace format's one model: what `trace.json` holds, as types the writer and the reader share.

A trace may come from another machine (a committed GPU trace), so the loader treats it as untrusted
input: :func:`check_payload` validates the whole document against the types below with pydantic
(strict: no `"151"` read as 151), then checks what types cannot say (ranges and references between
``records``, ``math``, ``summary`` and ``flags``). The first problem is one :class:`UserError` line
naming the file, the JSON path and the fix (``traces/cpu/trace.json: $.records[12].line: expected
an integer, got "151"; regenerate it …``); nothing downstream meets a field of the wrong type.

To add a field: add it to the record or block below (a default keeps older traces readable), write
it in annotate/trace/assemble.py, and document it in docs/trace-format.md. Unknown keys in the
dict-shaped blocks are kept (a newer writer's extra fields pass through to the site untouched);
keys the site reads are listed here, so a missing or mistyped one is refused at load time.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Mapping, NoReturn

from typing_extensions import NotRequired, TypedDict   # pydantic needs these on Python < 3.12

from pydantic import BeforeValidator, ConfigDict, Field, PlainValidator, TypeAdapter, ValidationError, with_config

from annotate import codec
from annotate.errors import UserError
from annotate.vendoring.lock import VENDOR_DIR, safe_relative

TRACE_FIX = "regenerate it with `annotate trace --force`"

Count = Annotated[int, Field(ge=0)]
LineNo = Annotated[int, Field(ge=1)]


def _real(value: Any) -> Any:
    """A JSON number kept as written (an int stays an int: `max 1 ulp`, not `1.0`); NaN/inf included."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("expected a number")
    return value


Real = Annotated[float, PlainValidator(_real)]
Number = Real | None           # a distance a writer may leave null
OPEN = ConfigDict(extra="allow")   # dict-shaped blocks keep keys this model does not name


def _relative(value: Any) -> Any:
    """A vendored path must stay inside the vendor root (no `..`, no absolute path): the lock's rule."""
    if isinstance(value, str):
        try:
            safe_relative(value, codec.At("", "$"))
        except UserError:
            raise ValueError("expected a relative POSIX path inside the vendor folder (like nanovllm/config.py)") from None
    return value


RelPath = Annotated[str, BeforeValidator(_relative)]


# ---------------------------------------------------------------- identities and summaries

@with_config(OPEN)
class DistancesJson(TypedDict):
    """How far one tensor is from another (docs/trace-format.md): the plots and panels read all four."""

    max_abs: Real
    max_ulps: Real
    scale_ulps: Real
    rel: Real


@with_config(OPEN)
class MatchJson(DistancesJson):
    """One peer variable a recorded tensor was found equal to (within tolerance), best first."""

    key: str
    layer: Count | None
    label: str
    latex: str


@with_config(OPEN)
class IdentityJson(TypedDict):
    """Which math variable(s) a recorded tensor is, found by comparison with the peer."""

    #: match: one peer within tolerance and the runner-up clearly farther (≡); ambiguous: several peers
    #: within the margin (`matches` lists them); no match: none within tolerance; no candidate: no peer
    #: of that shape (annotate/trace/identify/reference.py)
    status: Literal["match", "ambiguous", "no match", "no candidate"]
    matches: NotRequired[list[MatchJson]]
    nearest: NotRequired[MatchJson | None]
    runner_up: NotRequired[MatchJson | None]   # the nearest other candidate (format 3)
    margin: NotRequired[Real | None]           # runner-up rel / best rel (null: no runner-up)
    required: NotRequired[Real | None]         # the margin a ≡ needs (reference.MARGIN)
    tolerance: NotRequired[Real]


def _identity_default(value: Any) -> Any:
    return {"status": "no candidate"} if value is None else value


@with_config(OPEN)
class SummaryJson(TypedDict):
    """Shape, dtype and statistics of one tensor."""

    shape: list[Count]
    dtype: str
    norm: Real                   # NaN/inf pass here: they are data (a strict build refuses them, validate.non_finite)
    mean: Real
    absmax: Real
    head: list[Real]


@with_config(OPEN)
class CopyRefJson(TypedDict):
    """An earlier record holding the same copy of a tensor."""

    record: Count
    var: str


# ---------------------------------------------------------------- records (the model the site queries)

@dataclass
class VarRecord:
    """One tensor a line produced (or held live), as summarised in the trace."""

    name: str
    role: str                     # assigned | live | return | argument
    shape: list[Count]
    dtype: str
    norm: Real                   # NaN/inf pass here: they are data (a strict build refuses them, validate.non_finite)
    mean: Real
    absmax: Real
    head: list[Real]
    tensor: str | None = None     # key in tensors.safetensors, when saved
    identity: Annotated[IdentityJson, BeforeValidator(_identity_default)] = field(
        default_factory=lambda: IdentityJson(status="no candidate"))
    aliases: list[str] = field(default_factory=list)       # other names sharing its storage
    same_memory: list[str] = field(default_factory=list)   # other names that are literally the same tensor
    same_copy_as: CopyRefJson | None = None   # an earlier record holding the same copy

    @property
    def matched(self) -> dict[str, Any] | None:
        """The best matching math variable (`key`, `layer`, `label`, `latex`, `max_abs`, `max_ulps`, …) or None."""
        m = self.identity.get("matches") or []
        return dict(m[0]) if m and self.identity.get("status") == "match" else None

    @property
    def label(self) -> str:
        """`x₂⁽1⁾ = x⁽2⁾`, `no match`, or `—` (no peer variable of that shape)."""
        return identity_label(self.identity)


@with_config(OPEN)
class AliasGroupJson(TypedDict):
    """Names sharing one storage (`same`: literally the same memory)."""

    names: list[str]
    same: NotRequired[list[str]]


@dataclass
class LineRecord:
    """Values after one execution of one statement (kind "line") or at a function's entry ("entry")."""

    id: Count
    function: str
    file: RelPath
    line: LineNo
    end_line: LineNo
    kind: Literal["line", "entry"]
    source: str                   # traced | replay (eager replay of a compiled body)
    layer: Count | None
    module: str | None
    call: Count
    hit: Count
    order: Count
    text: str = ""                # the statement, from today's vendored file ("" when its line is gone)
    vars: list[VarRecord] = field(default_factory=list)
    aliases: list[AliasGroupJson] = field(default_factory=list)
    recorded_line: int = 0        # the line when recorded (differs from `line` after a vendor change)
    placed: bool = True           # False: the line is gone today; the record is shown on no line

    def __post_init__(self) -> None:
        self.recorded_line = self.recorded_line or self.line

    def var(self, name: str) -> VarRecord | None:
        """The variable called `name` in this record, if recorded."""
        return next((v for v in self.vars if v.name == name), None)


def identity_label(identity: Mapping[str, Any]) -> str:
    """The label of a variable's `identity`: `x₂⁽1⁾ = x⁽2⁾`, `ambiguous: x⁽0⁾ | x⁽0⁾/RMS(x⁽0⁾)`,
    `no match`, or `—` (no peer of that shape)."""
    status = identity.get("status")
    if status == "match":
        return " = ".join(m["label"] for m in identity["matches"])
    if status == "ambiguous":
        return "ambiguous: " + " | ".join(m["label"] for m in identity["matches"])
    return "no match" if status == "no match" else "—"


# ---------------------------------------------------------------- the other blocks

@with_config(OPEN)
class ModelInfoJson(TypedDict):
    name: str
    layers: Annotated[int, Field(ge=1)]
    kind: NotRequired[str]
    config: NotRequired[dict[str, Any] | None]


@with_config(OPEN)
class InputInfoJson(TypedDict):
    tokens: Annotated[int, Field(ge=1)]
    #: each token's own text, where a tokenizer cut the prompt (one per id)
    text: NotRequired[list[str]]


@with_config(OPEN)
class VersionsJson(TypedDict):
    torch: str


@with_config(OPEN)
class CompiledJson(TypedDict):
    """What shows that the compiled functions ran compiled (the kernels page and the trace index read it):
    the check's verdict, calls per function, calls that fell back to eager, and whether Inductor's graph
    count can be trusted as proof for each function (not on CUDA)."""

    ran_compiled: NotRequired[bool]
    compiled_calls: NotRequired[dict[str, Annotated[int, Field(ge=0)]]]
    eager_escapes: NotRequired[dict[str, Annotated[int, Field(ge=0)]]]
    graph_count_trusted: NotRequired[dict[str, bool]]


@with_config(OPEN)
class MetaJson(TypedDict):
    """Where and how the trace was made (`provenance()` prints these)."""

    device: str
    device_name: str
    dtype: str
    created: str
    attention: str
    model: ModelInfoJson
    input: InputInfoJson
    versions: VersionsJson
    tensors_saved: NotRequired[bool]
    inputs_key: NotRequired[dict[str, Any] | None]
    compiled: NotRequired[CompiledJson]


def _vendor_root(value: Any) -> Any:
    if isinstance(value, str) and value != VENDOR_DIR:   # a format fact: the primary upstream's folder
        raise ValueError(f'expected "{VENDOR_DIR}"')
    return value


@with_config(OPEN)
class VendorJson(TypedDict):
    """The vendored bytes the trace was made from."""

    files: NotRequired[dict[str, str]]
    root: NotRequired[Annotated[str, BeforeValidator(_vendor_root)]]
    upstream: NotRequired[dict[str, Any] | None]
    line_hashes: NotRequired[dict[str, list[str]]]


@with_config(OPEN)
class StatementJson(TypedDict):
    line: LineNo
    end_line: LineNo
    targets: NotRequired[list[str]]


@with_config(OPEN)
class FunctionJson(TypedDict):
    """Static facts about a traced or compiled function."""

    name: str
    file: RelPath
    def_line: LineNo
    kind: str
    statements: list[StatementJson]


@with_config(OPEN)
class MatchedByJson(DistancesJson):
    """A recorded variable identified as this math variable."""

    record: Count
    var: str


@with_config(OPEN)
class MathVarJson(TypedDict):
    """One of the peer's variables (x, x₁, x₂ … of a layer)."""

    key: str
    layer: Count                  # the last layer for the final norm
    label: str
    latex: str
    summary: SummaryJson
    tensor: NotRequired[str | None]
    matched_by: NotRequired[list[MatchedByJson]]


@with_config(OPEN)
class OutputJson(TypedDict):
    """A compiled function's output, fused vs its eager replay."""

    name: str
    max_abs: Real
    max_ulps: Real


@with_config(OPEN)
class CompiledCheckJson(TypedDict):
    """Fused output vs the eager replay of one compiled call."""

    function: str
    file: RelPath
    line: LineNo
    layer: Count | None
    call: Count
    outputs: list[OutputJson]


@with_config(OPEN)
class KernelJson(TypedDict):
    name: str
    language: str
    source: str


@with_config(OPEN)
class KernelModuleJson(TypedDict):
    """Inductor's generated module for one compile of a compiled function."""

    function: str
    file: RelPath
    line: LineNo
    code: str
    kernels: list[KernelJson]
    languages: NotRequired[list[str]]
    this_run: NotRequired[bool]


@with_config(OPEN)
class FlagJson(TypedDict):
    """A hazard found in the data (aliasing, an unidentified flow variable)."""

    kind: str
    message: str
    function: NotRequired[str]
    file: NotRequired[RelPath]
    names: NotRequired[list[str]]
    lines: NotRequired[list[LineNo]]
    layers: NotRequired[list[Count]]
    records: NotRequired[list[Count]]


@with_config(OPEN)
class HeldJson(TypedDict):
    label: str
    matches: NotRequired[list[MatchJson]]


@with_config(OPEN)
class FlowRowJson(TypedDict):
    """What the flow variables held after one traced line of the decoder/model forwards."""

    record: Count
    line: LineNo
    layer: Count | None
    held: dict[str, HeldJson]
    file: RelPath
    function: NotRequired[str]
    kind: NotRequired[str]


@with_config(OPEN)
class HfRunnerUpJson(TypedDict):
    """The nearest other peer value of an HF line (its label and relative distance)."""

    label: str
    rel: Real


@with_config(OPEN)
class HfNanoJson(TypedDict):
    """The nano-vllm line whose tensor was identified as the same math variable as an HF row's, and the
    measured distance between the two tensors (in the coarser dtype of the two)."""

    file: str
    line: LineNo
    var: str
    layer: Count | None
    max_abs: Real
    max_ulps: Real
    scale_ulps: NotRequired[Real]
    rel: Real
    dtype: str


@with_config(OPEN)
class HfLineJson(TypedDict):
    """One (line, layer, module, variable) of HF transformers' own run."""

    line: LineNo
    layer: Count | None
    var: str
    identity: str
    max_abs: Number               # null when the line matched no peer variable
    max_ulps: Number
    function: NotRequired[str]
    module: NotRequired[str | None]
    label: NotRequired[str]
    # the identification's margin (format 3; annotate/trace/identify/hf_lines.py hf_identity), read by the
    # strict build's margin check and the HF panel
    status: NotRequired[Literal["match", "ambiguous", "no match", "no candidate"]]
    margin: NotRequired[Real | None]
    required: NotRequired[Real | None]
    runner_up: NotRequired[HfRunnerUpJson | None]
    rel: NotRequired[Real | None]
    ambiguous: NotRequired[list[str]]
    # the tensor itself and nano-vllm's tensor of the same math variable (annotate/trace/identify/hf_lines.py
    # tensor_fields, nano_peer); absent in traces recorded before them: the HF panel says so
    match_layer: NotRequired[Count | None]
    shape: NotRequired[list[Count]]
    dtype: NotRequired[str]
    norm: NotRequired[Real]
    mean: NotRequired[Real]
    absmax: NotRequired[Real]
    head: NotRequired[list[Real]]
    nano: NotRequired[HfNanoJson | None]


@with_config(OPEN)
class HfLinesJson(TypedDict):
    file: NotRequired[str]
    sha256: NotRequired[str | None]
    skipped: NotRequired[str | None]
    lines: NotRequired[list[HfLineJson]]


@with_config(OPEN)
class FinalVsHfJson(TypedDict):
    """nano-vllm's final hidden states against the peer's (the numerics page reads what is there)."""

    max_abs: NotRequired[Number]
    max_ulps: NotRequired[Number]
    scale_ulps: NotRequired[Number]
    rel: NotRequired[Number]
    n_diff: NotRequired[Number]
    numel: NotRequired[Number]
    dtype: NotRequired[str]


@with_config(OPEN)
class TraceSummaryJson(TypedDict):
    flow: NotRequired[list[FlowRowJson]]
    final_vs_hf: NotRequired[FinalVsHfJson | None]
    compiled_vs_eager: NotRequired[dict[str, Any]]
    hf_lines: NotRequired[HfLinesJson | None]


@with_config(OPEN)
class RankJson(TypedDict):
    """Format 3, a --tp run: the records of one rank other than 0 (rank 0's are `records`)."""

    rank: Annotated[int, Field(ge=1)]
    records: list[LineRecord]


@with_config(OPEN)
class ParallelJson(TypedDict):
    """Format 3, a --tp run: the identification of shards, partial sums and post-all_reduce values
    (annotate/trace/identify/shards.py writes the rows; the TP page reads them)."""

    tp: NotRequired[Annotated[int, Field(ge=1)]]
    shards: NotRequired[list[dict[str, Any]]]
    sums: NotRequired[list[dict[str, Any]]]
    vs_tp1: NotRequired[list[dict[str, Any]]]
    bytes: NotRequired[dict[str, Any]]


@with_config(OPEN)
class TraceJson(TypedDict):
    """The whole of trace.json past `format` and `version`."""

    meta: MetaJson
    vendor: VendorJson
    records: list[LineRecord]
    math: list[MathVarJson]
    functions: NotRequired[list[FunctionJson]]
    compiled_checks: NotRequired[list[CompiledCheckJson]]
    kernels: NotRequired[list[KernelModuleJson]]
    flags: NotRequired[list[FlagJson]]
    summary: NotRequired[TraceSummaryJson]
    ranks: NotRequired[list[RankJson]]
    parallel: NotRequired[ParallelJson]


_PAYLOAD: TypeAdapter[Any] = TypeAdapter(TraceJson)   # Any: the site reads the blocks as plain dicts


# ---------------------------------------------------------------- checking

def check_payload(payload: Any, path: Any) -> dict[str, Any]:
    """The validated trace: records as :class:`LineRecord`, every other block checked in place.

    One UserError line (file, JSON path, fix) on the first field of a wrong type, out of range, or
    pointing at a record, variable or layer the trace does not have."""
    try:   # strict, and in JSON mode: an object becomes a record, but "151" never becomes 151
        data = _PAYLOAD.validate_json(json.dumps(payload, allow_nan=True), strict=True)
    except ValidationError as exc:
        _one_line(exc, path)
    _check_references(data, codec.At(str(path), fix=TRACE_FIX))
    return data


#: pydantic's error types, in the words the other readers use (annotate/codec.py)
_EXPECTED = {"int_type": "an integer", "int_from_float": "an integer", "float_type": "a number",
             "string_type": "a string", "bool_type": "true or false", "list_type": "a list",
             "dict_type": "an object", "dataclass_type": "an object", "typed_dict_type": "an object",
             "dataclass_exact_type": "an object", "model_type": "an object"}


def _one_line(exc: ValidationError, path: Any) -> NoReturn:
    """The first error as `<file>: <JSON path>: expected …, got …; <fix>`."""
    err = exc.errors(include_url=False)[0]
    at = codec.At(str(path), fix=TRACE_FIX)
    for part in err["loc"]:
        if isinstance(part, int):
            at = at.index(part)
        elif not _is_tag(part):
            at = at.key(part)
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "missing":
        at.fail("a value")
    if kind == "literal_error":
        expected = f"one of {ctx.get('expected')}"
    elif kind == "greater_than_equal":
        expected = f"an integer >= {ctx.get('ge')}"
    elif kind == "value_error":
        expected = str(ctx.get("error", err["msg"])).removeprefix("expected ")
    else:
        expected = _EXPECTED.get(kind, err["msg"][:1].lower() + err["msg"][1:])
    at.fail(expected, err.get("input"))


def _is_tag(part: Any) -> bool:
    """pydantic's names of the schema it tried (`function-before[…]`, `list[…]`), not keys of the document."""
    return isinstance(part, str) and ("[" in part or part in {"none", "int", "float", "str"})


def _check_references(data: dict[str, Any], at: codec.At) -> None:
    """What types cannot say: ids in order, spans in order, layers below the model's, references that land."""
    layers = data["meta"]["model"]["layers"]
    records = data["records"]
    for i, rec in enumerate(records):
        here = at.key("records").index(i)
        if rec.id != i:
            here.key("id").fail(f"{i} (a record's id is its index)", rec.id)
        if rec.end_line < rec.line:
            here.key("end_line").fail(f"a line ≥ line {rec.line}", rec.end_line)
        _layer(rec.layer, layers, here.key("layer"))
        for j, var in enumerate(rec.vars):
            _check_var(var, records, i, here.key("vars").index(j))
    for i, mv in enumerate(data["math"]):
        here = at.key("math").index(i)
        _layer(mv["layer"], layers, here.key("layer"))
        for k, ref in enumerate(mv.get("matched_by", [])):
            _var_ref(ref["record"], ref["var"], records, here.key("matched_by").index(k))
    for i, flag in enumerate(data.get("flags", [])):
        for k, rid in enumerate(flag.get("records", [])):
            _record_ref(rid, records, at.key("flags").index(i).key("records").index(k))
    for i, row in enumerate(data.get("summary", {}).get("flow", [])):
        here = at.key("summary").key("flow").index(i)
        _record_ref(row["record"], records, here.key("record"))
        _layer(row["layer"], layers, here.key("layer"))
    for n, block in enumerate(data.get("ranks", [])):
        tp = data.get("parallel", {}).get("tp", 1)
        here = at.key("ranks").index(n)
        if block["rank"] >= tp:
            here.key("rank").fail(f"a rank below parallel.tp = {tp}", block["rank"])
        for i, rec in enumerate(block["records"]):
            _layer(rec.layer, layers, here.key("records").index(i).key("layer"))
    for i, fn in enumerate(data.get("functions", [])):
        for k, st in enumerate(fn["statements"]):
            if st["end_line"] < st["line"]:
                at.key("functions").index(i).key("statements").index(k).key("end_line").fail(
                    f"a line ≥ line {st['line']}", st["end_line"])


def _check_var(var: VarRecord, records: list[LineRecord], i: int, at: codec.At) -> None:
    status = var.identity["status"]
    if status in ("match", "ambiguous") and not var.identity.get("matches"):
        at.key("identity").key("matches").fail(f"at least one match when status is \"{status}\"", [])
    if var.same_copy_as is not None:
        ref = var.same_copy_as
        if ref["record"] >= i:
            at.key("same_copy_as").key("record").fail(f"an earlier record (< {i})", ref["record"])
        _var_ref(ref["record"], ref["var"], records, at.key("same_copy_as"))
    numel = math.prod(var.shape)
    if len(var.head) > numel:
        at.key("head").fail(f"at most {numel} values (the tensor's size)", var.head)


def _layer(layer: int | None, layers: int, at: codec.At) -> None:
    if layer is not None and layer >= layers:
        at.fail(f"a layer below meta.model.layers = {layers}, or null", layer)


def _record_ref(rid: int, records: list[LineRecord], at: codec.At) -> None:
    if rid >= len(records):
        at.fail(f"a record id below {len(records)}", rid)


def _var_ref(rid: int, name: str, records: list[LineRecord], at: codec.At) -> None:
    _record_ref(rid, records, at.key("record"))
    if records[rid].var(name) is None:
        at.key("var").fail(f"a variable of record {rid}", name)
