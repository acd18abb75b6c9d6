"""Every private torch internal the trace room relies on: named once, checked at start, tested each.

The recorder reads values *inside* compiled functions and proves that compiled code ran compiled.
Public torch APIs do not offer that, so a handful of private attributes are used. They are all here,
each with what it is for and whether the trace can do without it, so that a torch upgrade that moves
one fails in this module, loudly and with the torch version named, instead of somewhere deep in a
recording (or, worse, silently: a logger name that no longer exists simply never logs).

- *required* internals: without them a trace would be wrong; :func:`require` refuses to start.
- *optional* internals: without them the recorder takes its slower, fully traced path
  (:func:`missing` lists them; the trace meta says which path ran).

Nothing else in ``annotate/`` may name a private torch attribute; ``tests/test_internals.py``
checks that, and checks each internal against the installed torch.
"""
from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch

from annotate.errors import UserError


@dataclass(frozen=True)
class Internal:
    """One private torch name: where it lives (``module:attr.attr``), why we use it, and whether the
    trace can run without it."""

    name: str
    used_for: str
    required: bool = True
    present: Callable[[], bool] | None = None   # a check beyond "the name resolves"

    @property
    def module(self) -> str:
        return self.name.partition(":")[0]

    @property
    def attrs(self) -> tuple[str, ...]:
        rest = self.name.partition(":")[2]
        return tuple(rest.split(".")) if rest else ()


#: the original Python body under a `torch.compile` wrapper (eager replay of compiled bodies)
ORIG_CALLABLE_ATTRS = ("_torchdynamo_orig_callable", "__wrapped__")
#: nn.Module's global hook registries: a hook there may do anything between caller and forward
GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                "_global_backward_pre_hooks", "_global_forward_hooks_always_called")
#: per-module hook registries and the per-module compile slot (`module.compile()`)
MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
MODULE_COMPILED_CALL = "_compiled_call_impl"
#: the loggers through which Dynamo announces a compile and Inductor logs its generated module
OUTPUT_CODE_LOGGERS = ("torch._inductor.codecache.__output_code", "torch._inductor.graph.__output_code")
COMPILE_LOGGER = "torch._dynamo.convert_frame"
DYNAMO_LOGGER = "torch._dynamo"

INTERNALS: tuple[Internal, ...] = (
    Internal("torch.nn.modules.module:Module._wrapped_call_impl",
             "nn.Module's call machinery: frames a call passes through on its way to forward"),
    Internal("torch.nn.modules.module:Module._call_impl",
             "nn.Module's call machinery: frames a call passes through on its way to forward"),
    *(Internal(f"torch.nn.modules.module:{name}", "global module hooks: none may be installed for "
               "direct calls to be assumed") for name in GLOBAL_HOOKS),
    Internal("torch._dynamo.utils:counters", "Dynamo's frame and graph counters: what compiled, "
             "and that recording compiled nothing new"),
    Internal("torch._C:_is_torch_function_mode_enabled", "no torch-function mode reroutes Tensor "
             "methods (copies are shared across read-only methods only then)", required=False),
    Internal("torch.utils._python_dispatch:_get_current_dispatch_mode", "no dispatch mode reroutes "
             "Tensor methods (copies are shared across read-only methods only then)", required=False),
    Internal("torch._inductor.debug:record_and_log_graph_execution_order", "Inductor's own count of "
             "graph runs: compiled calls then run untraced", required=False),
    Internal("torch._logging._internal:log_registry.artifact_log_qnames", "the artifact loggers torch "
             "registered: one of them must carry Inductor's generated code",
             present=lambda: bool(output_code_logger_names())),
    Internal("torch._dynamo.convert_frame", "the module whose logger announces each compile"),
)


def _resolve(internal: Internal) -> Any:
    """The object `internal` names; AttributeError/ImportError when this torch lacks it."""
    obj: Any = importlib.import_module(internal.module)
    for attr in internal.attrs:
        obj = getattr(obj, attr)
    if internal.present is not None and not internal.present():
        raise AttributeError(internal.name)
    return obj


def missing(required: bool | None = None) -> list[Internal]:
    """The internals this torch lacks (only required or only optional ones when `required` is set)."""
    out = []
    for internal in INTERNALS:
        if required is not None and internal.required != required:
            continue
        try:
            _resolve(internal)
        except (ImportError, AttributeError):
            out.append(internal)
    return out


def require() -> None:
    """Refuse, in one line naming the torch version, to trace with a torch that lacks a required internal."""
    gone = missing(required=True)
    if gone:
        names = ", ".join(i.name.replace(":", ".") for i in gone)
        raise UserError(f"torch {torch.__version__} lacks {names} (used for: {gone[0].used_for}); "
                        f"annotate's recorder is tested with torch 2.13.0 (CPU) and 2.11 (GPU): install one of those")


# ---------------------------------------------------------------- accessors, one per internal use

def original_callable(fn: Callable[..., Any]) -> Callable[..., Any] | None:
    """The Python function under one `torch.compile` wrapper, or None when `fn` is not wrapped."""
    for attr in ORIG_CALLABLE_ATTRS:
        inner = getattr(fn, attr, None)
        if callable(inner):
            return inner
    return None


def innermost_callable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The function as written, under any number of wrappers (eager mode leaves none)."""
    inner = original_callable(fn)
    return fn if inner is None else innermost_callable(inner)


def module_call_functions() -> tuple[Callable[..., Any], ...]:
    """The functions of nn.Module's call machinery (the recorder skips their frames by code object)."""
    module = torch.nn.Module
    return (module._wrapped_call_impl, module._call_impl)


def hooks_installed(model: torch.nn.Module, modules: list[torch.nn.Module] | None = None) -> bool:
    """Any module hook (global or on `model`'s modules) or a module-level compile. ``modules``:
    `model.modules()` listed already (walking the tree costs more than checking it)."""
    from torch.nn.modules import module as nn_module

    if any(getattr(nn_module, name, None) for name in GLOBAL_HOOKS):
        return True
    mods = list(model.modules()) if modules is None else modules
    return any(getattr(m, name, None) for m in mods for name in MODULE_HOOKS) or \
        any(getattr(m, MODULE_COMPILED_CALL, None) is not None for m in mods)


def modes_installed() -> bool:
    """A torch-function or dispatch mode is on (or this torch cannot say: then assume one is)."""
    try:
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        return bool(torch._C._is_torch_function_mode_enabled()) or _get_current_dispatch_mode() is not None
    except (AttributeError, ImportError):
        return True


def dynamo_counts() -> dict[str, int]:
    """Dynamo's frame and graph counters, as plain ints."""
    from torch._dynamo.utils import counters

    return {"frames_total": int(counters["frames"]["total"]), "frames_ok": int(counters["frames"]["ok"]),
            "unique_graphs": int(counters["stats"]["unique_graphs"])}


@dataclass
class GraphRecord:
    """Inductor's execution record while on: `runs()` grows by one per compiled-graph run."""

    _debug: Any
    _context: AbstractContextManager[Any]

    def runs(self) -> int:
        order = getattr(self._debug, "GRAPH_EXECUTION_ORDER", None)
        return len(order) if isinstance(order, list) else 0

    def close(self) -> None:
        self._context.__exit__(None, None, None)


def graph_record() -> GraphRecord | None:
    """Turn Inductor's graph-execution record on; None when this torch has none."""
    try:
        from torch._inductor import debug

        context = debug.record_and_log_graph_execution_order()
    except (ImportError, AttributeError):
        return None
    context.__enter__()
    record = GraphRecord(debug, context)
    if not isinstance(getattr(debug, "GRAPH_EXECUTION_ORDER", None), list):
        record.close()
        return None
    return record


def output_code_logger_names() -> list[str]:
    """Those of OUTPUT_CODE_LOGGERS that this torch registers as artifact loggers (a name torch no
    longer uses would be a logger nobody logs to: the capture would stay empty without a word)."""
    importlib.import_module("torch._inductor.codecache")
    importlib.import_module("torch._inductor.graph")
    from torch._logging._internal import log_registry

    return [n for n in OUTPUT_CODE_LOGGERS if n in log_registry.artifact_log_qnames]


def compile_loggers() -> Iterator[logging.Logger]:
    """The loggers carrying Inductor's generated modules and Dynamo's compile announcements."""
    for name in (*output_code_logger_names(), COMPILE_LOGGER):
        yield logging.getLogger(name)


def dynamo_logger() -> logging.Logger:
    """Dynamo's own logger (its warnings stay visible through it)."""
    return logging.getLogger(DYNAMO_LOGGER)
