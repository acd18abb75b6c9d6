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


def test_trace_and_experiment_share_one_set_of_output_flags() -> None:
    """annotate/cli/flags.py is the one home of --force, --if-stale, --full-tensors and --quiet (issue 37)."""
    import argparse

    from annotate.cli import experiment, trace

    def flags(register) -> dict[str, str]:
        sub = argparse.ArgumentParser().add_subparsers()
        register(sub)
        (p,) = sub.choices.values()
        return {a.option_strings[0]: a.help for a in p._actions if a.option_strings
                and a.option_strings[0] in ("--force", "--if-stale", "--full-tensors", "--quiet")}

    got_trace, got_exp = flags(trace.register), flags(experiment.register)
    assert set(got_trace) == set(got_exp) == {"--force", "--if-stale", "--full-tensors", "--quiet"}
    assert got_trace["--force"] == "replace --out when it already holds a trace"
    assert got_exp["--force"] == "replace traces/experiments/NAME when it already holds a trace"
    assert got_trace["--full-tensors"] == got_exp["--full-tensors"] and got_trace["--quiet"] == got_exp["--quiet"]
