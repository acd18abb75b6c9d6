"""The private torch internals: each one exists in the installed torch and does what we use it for,
a missing one is refused in one line naming the torch version, and no other module names one."""
from __future__ import annotations

import re
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import torch

from annotate.errors import UserError
from annotate.trace.model import internals
from annotate.trace.record.identity import key

ROOT = Path(__file__).resolve().parents[1]

#: what a private torch name looks like in source: `torch._x`, `torch.a._b`, `from torch._x`, or
#: one of the private attributes the recorder reads
_PRIVATE = re.compile(
    r"torch(\.[A-Za-z]\w*)*\._[A-Za-z]|_torchdynamo_|_wrapped_call_impl|\b_call_impl\b|_global_(forward|backward)"
    r"|_compiled_call_impl|GRAPH_EXECUTION_ORDER|__output_code|_is_torch_function_mode_enabled"
    r"|_get_current_dispatch_mode")


@pytest.mark.parametrize("internal", internals.INTERNALS, ids=lambda i: i.name)
def test_each_internal_exists_in_this_torch(internal: internals.Internal) -> None:
    assert internal not in internals.missing(), f"torch {torch.__version__} lacks {internal.name}"


def test_require_passes_here_and_names_the_torch_version_when_one_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    internals.require()
    gone = internals.Internal("torch:_annotate_no_such_internal", "a test")
    monkeypatch.setattr(internals, "INTERNALS", (*internals.INTERNALS, gone))
    assert internals.missing(required=True) == [gone]
    with pytest.raises(UserError) as err:
        internals.require()
    assert torch.__version__ in str(err.value) and "torch._annotate_no_such_internal" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_optional_internal_does_not_stop_a_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = internals.Internal("torch:_annotate_optional", "a test", required=False)
    monkeypatch.setattr(internals, "INTERNALS", (*internals.INTERNALS, gone))
    internals.require()
    assert internals.missing(required=False) == [gone]


def test_no_other_module_names_a_private_torch_internal() -> None:
    offenders = []
    for path in sorted((ROOT / "annotate").rglob("*.py")):
        if path == ROOT / "annotate" / "trace" / "model" / "internals.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _PRIVATE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "private torch names belong in annotate/trace/model/internals.py:\n" + "\n".join(offenders)


def test_the_pattern_catches_what_it_should() -> None:
    for text in ("from torch._dynamo.utils import counters", "torch._C._foo()", "fn._torchdynamo_orig_callable",
                 "torch.nn.Module._call_impl", "debug.GRAPH_EXECUTION_ORDER"):
        assert _PRIVATE.search(text), text
    for text in ("torch.compile(fn)", "torch.nn.functional.silu(x)", "torch.__version__"):
        assert not _PRIVATE.search(text), text


def test_original_callable_unwraps_torch_compile() -> None:
    def body(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    compiled = torch.compile(body, backend="eager")
    assert internals.original_callable(compiled) is body
    assert internals.innermost_callable(compiled) is body
    assert internals.original_callable(body) is None and internals.innermost_callable(body) is body


def test_module_call_functions_are_the_frames_between_a_call_and_forward() -> None:
    lin = torch.nn.Linear(2, 2)
    seen: list[int] = []

    def tracer(frame: FrameType, event: str, arg: Any) -> None:
        seen.append(key(frame.f_code))

    sys.settrace(tracer)
    try:
        lin(torch.zeros(1, 2))
    finally:
        sys.settrace(None)
    assert {key(f.__code__) for f in internals.module_call_functions()} & set(seen)
    assert key(torch.nn.Linear.forward.__code__) in seen


def test_hooks_installed_sees_module_and_global_hooks() -> None:
    lin = torch.nn.Linear(2, 2)
    assert not internals.hooks_installed(lin)
    handle = lin.register_forward_hook(lambda *a: None)
    assert internals.hooks_installed(lin)
    handle.remove()
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda *a: None)
    try:
        assert internals.hooks_installed(lin)
    finally:
        handle.remove()
    assert not internals.hooks_installed(lin)
    for register in (lin.register_forward_pre_hook, lin.register_full_backward_hook):
        handle = register(lambda *a: None)
        assert internals.hooks_installed(torch.nn.Sequential(torch.nn.ReLU(), lin))   # on a child too
        handle.remove()
    lin.compile()   # module-level compile: nn.Module's call machinery runs the compiled wrapper (lazy: nothing compiles here)
    assert internals.hooks_installed(lin)


def test_modes_installed_sees_a_dispatch_mode() -> None:
    from torch.utils._python_dispatch import TorchDispatchMode  # (a public class in a private module)

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    assert not internals.modes_installed()
    with Passthrough():
        assert internals.modes_installed()


def test_dynamo_counts_grow_when_something_compiles() -> None:
    before = internals.dynamo_counts()
    torch.compile(lambda x: x * 3, backend="eager")(torch.ones(3))
    after = internals.dynamo_counts()
    assert set(before) == set(after) == {"frames_total", "frames_ok", "unique_graphs"}
    assert after["frames_total"] > before["frames_total"]


def test_graph_record_opens_and_closes() -> None:
    record = internals.graph_record()
    assert record is not None and record.runs() == 0
    record.close()


def test_output_code_is_logged_through_a_registered_logger() -> None:
    names = internals.output_code_logger_names()
    assert names and all(n in internals.OUTPUT_CODE_LOGGERS for n in names)
    assert [log.name for log in internals.compile_loggers()][-1] == internals.COMPILE_LOGGER
