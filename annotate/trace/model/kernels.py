"""Capture the code Inductor generates for each compiled function (C++ on CPU, Triton on GPU).

Inductor logs the whole generated module ("Output code") through the `output_code` artifact
logger — on a fresh compile and on an FX-graph-cache hit alike — and Dynamo logs
"torchdynamo start compiling <name> <file>:<line>" just before. A handler on those two loggers
pairs them, so each generated module is attributed to the Python function it was compiled from.
The capture is process-wide and must be installed before the first compile: Dynamo compiles a
function once per process and shape, and a later trace in the same process reuses it.
"""
from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field

from annotate.trace.model.internals import compile_loggers, dynamo_logger

_KERNEL_RE = re.compile(
    r"^(?P<name>\w+)\s*=\s*async_compile\.(?P<kind>cpp_pybinding|cpp|triton)\((?P<args>.*?)'''(?P<src>.*?)'''",
    re.S | re.M,
)


@dataclass(frozen=True)
class Kernel:
    """One generated kernel inside an output module."""

    name: str
    language: str   # "cpp" or "triton"
    source: str


@dataclass
class CompiledModule:
    """The module Inductor generated for one compile of one Python function."""

    function_file: str      # co_filename of the compiled function
    function_line: int      # co_firstlineno
    function_name: str      # co_name
    index: int              # nth compile seen in this process
    code: str               # the whole wrapper module (Python calling the kernels)
    kernels: list[Kernel] = field(default_factory=list)


#: Inductor's origin comments (`# File: <path>:<line> in <fn>, code: <the Python statement>`) quote the
#: traced source; a trace is data we may commit, so those lines are dropped at capture
_SOURCE_COMMENT = re.compile(r"^[ \t]*#.*\bcode: .*$\n?", re.M)


def without_source_comments(code: str) -> str:
    """`code` without the comment lines in which Inductor quotes the Python statements it compiled."""
    return _SOURCE_COMMENT.sub("", code)


def split_kernels(code: str) -> list[Kernel]:
    """The kernels defined in an output module, with their language."""
    out = []
    for m in _KERNEL_RE.finditer(code):
        language = "triton" if m.group("kind") == "triton" else "cpp"
        out.append(Kernel(m.group("name"), language, m.group("src").strip("\n")))
    return out


class _Handler(logging.Handler):
    """Pairs Dynamo's "start compiling" with the next Inductor "Output code"."""

    def __init__(self, capture: "KernelCapture") -> None:
        super().__init__(logging.DEBUG)
        self.capture = capture

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg if isinstance(record.msg, str) else ""
        args = record.args if isinstance(record.args, tuple) else ()
        if msg.startswith("torchdynamo start compiling") and len(args) >= 3:
            name, filename, line = args[0], args[1], args[2]
            self.capture.current = (str(filename), int(str(line)), str(name))
        elif msg.startswith("Output code:") and args:
            self.capture.add(str(args[0]))
        elif record.levelno >= logging.WARNING:  # keep Dynamo's own warnings visible
            dynamo_logger().handle(record)


class KernelCapture:
    """Process-wide collector of generated modules; `install()` it once, early."""

    def __init__(self) -> None:
        self.modules: list[CompiledModule] = []
        self.current: tuple[str, int, str] | None = None
        self._saved: dict[str, tuple[int, bool]] = {}
        self._handler = _Handler(self)
        self._lock = threading.Lock()

    def add(self, code: str) -> None:
        """Attribute one output module to the function whose compile started last."""
        code = without_source_comments(code)
        file, line, name = self.current or ("?", 0, "?")
        with self._lock:
            self.modules.append(CompiledModule(file, line, name, len(self.modules), code, split_kernels(code)))

    def install(self) -> None:
        """Route the two loggers to this capture (idempotent)."""
        for log in compile_loggers():
            if self._handler in log.handlers:
                continue
            self._saved[log.name] = (log.level, log.propagate)
            log.setLevel(logging.DEBUG)
            log.propagate = False
            log.addHandler(self._handler)

    def uninstall(self) -> None:
        """Give the loggers back their previous level and propagation."""
        for name, (level, propagate) in self._saved.items():
            log = logging.getLogger(name)
            log.removeHandler(self._handler)
            log.setLevel(level)
            log.propagate = propagate
        self._saved.clear()

    def for_function(self, filename: str, first_line: int) -> list[CompiledModule]:
        """Every module compiled from the function defined at filename:first_line, unique code only."""
        seen: set[str] = set()
        out = []
        for m in self.modules:
            if m.function_file == filename and m.function_line == first_line and m.code not in seen:
                seen.add(m.code)
                out.append(m)
        return out


_CAPTURE: KernelCapture | None = None


def capture() -> KernelCapture:
    """The process-wide capture, installed on first use."""
    global _CAPTURE
    if _CAPTURE is None:
        _CAPTURE = KernelCapture()
        _CAPTURE.install()
    return _CAPTURE
