"""Start a child as a shell at a terminal would: Ctrl-C (SIGINT) reaches Python's own handler.

A test run started in the background by a script (``make test &`` from a non-interactive shell)
inherits SIGINT *ignored* (POSIX: asynchronous lists without job control), and so would every
child it starts: a real SIGINT then does nothing, and a test of what Ctrl-C does fails for a
reason of the launch, not of annotate. The children of these tests put the handler back first.
"""
from __future__ import annotations

import sys

#: the first statement of a child's ``-c`` code: SIGINT raises KeyboardInterrupt, as at a terminal
AT_A_TERMINAL = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


def annotate_command(*argv: str) -> list[str]:
    """``python -m annotate ARGV`` with SIGINT at Python's handler (see the module's docstring)."""
    code = AT_A_TERMINAL + "import runpy, sys; sys.argv[0] = 'annotate'; runpy.run_module('annotate', run_name='__main__')\n"
    return [sys.executable, "-c", code, *argv]
