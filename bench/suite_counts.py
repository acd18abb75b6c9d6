"""How big the test suite is: tests collected, and assertions written (issue 37 asks that a faster suite keep both).

Run: ``.venv/bin/python bench/suite_counts.py [TESTS_DIR]``. Prints one JSON object:

- ``collected``: what ``pytest --collect-only`` finds (every parametrised case counts once);
- ``assert_statements``: ``assert`` statements in the test files and their helpers (``ast``, so a commented-out
  or quoted ``assert`` does not count);
- ``raises_checks``: ``pytest.raises`` / ``pytest.warns`` uses, the other way a test asserts;
- ``test_functions``: ``def test_*`` in ``test_*.py``.

Static counts, not run-time ones: an assertion inside a loop counts once. They are for comparing one commit's
suite with another's, and are measured the same way on both.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def static_counts(tests: Path) -> dict[str, int]:
    """Assert statements, raises/warns checks and test functions over every .py file under ``tests``."""
    asserts = raises = functions = 0
    for path in sorted(tests.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert):
                asserts += 1
            elif isinstance(node, ast.Attribute) and node.attr in ("raises", "warns") and \
                    isinstance(node.value, ast.Name) and node.value.id == "pytest":
                raises += 1
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_") \
                    and path.name.startswith("test_"):
                functions += 1
    return {"assert_statements": asserts, "raises_checks": raises, "test_functions": functions}


def collected(tests: Path) -> int:
    """What pytest collects under ``tests`` (its summary line: "N tests collected")."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", str(tests)],
                          capture_output=True, text=True, cwd=ROOT)
    found = re.search(r"(\d+) tests? collected", proc.stdout)
    if not found:
        raise SystemExit(f"suite_counts: pytest --collect-only printed no count (exit {proc.returncode}); "
                         f"run it by hand to see why: {proc.stdout[-300:]}{proc.stderr[-300:]}")
    return int(found.group(1))


def main(argv: list[str]) -> int:
    tests = Path(argv[0]) if argv else ROOT / "tests"
    print(json.dumps({"collected": collected(tests), **static_counts(tests)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
