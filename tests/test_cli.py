"""annotate/cli/__init__.py: the one entry every command goes through."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: a real SIGINT while the parser imports the rooms (most of a command's first ~0.1 s)
CTRL_C_IN_THE_PARSER = """
import os, signal
import annotate.cli as cli
real = cli.build_parser
def slow_parser():
    os.kill(os.getpid(), signal.SIGINT)      # Python's own handler: KeyboardInterrupt at the next bytecode
    return real()
cli.build_parser = slow_parser
raise SystemExit(cli.main(["--root", ROOT, "check", "--no-claims", "--no-math"]))
"""


def test_ctrl_c_while_the_parser_loads_is_one_line_and_exit_130() -> None:
    """Before, the parser was built outside main's try: a Ctrl-C in the first ~0.2 s printed a traceback."""
    code = CTRL_C_IN_THE_PARSER.replace("ROOT", repr(str(REPO)))
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stderr.strip() == "annotate: interrupted; nothing half-written was kept" and proc.stdout == ""


def test_a_missing_root_is_one_line(tmp_path: Path, capsys) -> None:
    from annotate.cli import main

    assert main(["--root", str(tmp_path / "nowhere"), "check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("annotate: error: --root ") and "no such folder" in err and err.count("\n") == 1
