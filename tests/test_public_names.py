"""Every public name in the package is unique, so a name says one thing wherever it is read
(griffe keeps the same rule with a test like this one).

A public name is a module-level class, function or assignment not starting with ``_``, in any
module under ``annotate/``. Modules are read with ``ast``, so nothing is imported.

The one exception is a small set of *protocol* functions: the single entry point that every module
of one kind has, always called through its module (``status.render(…)``, ``site.register(…)``),
so the module's name says which one is meant. Each is listed with its kind; a new duplicate of any
other name fails."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "annotate"

PROTOCOLS = {
    "register": "a CLI command group (annotate/cli/*): adds its subcommands to the parser",
    "main": "a runnable module (python -m …): its command line",
    "render": "a text renderer: one page, report or reference as Markdown/HTML/text",
    "family": "a lesson claim family (annotate/lesson/*): computes its claims from the vendored code",
    "expand": "a page placeholder expander ({{= …}}, {{value …}}, {{diagram …}}) run by the plugin",
}


def public_names(path: Path) -> list[str]:
    names = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return [n for n in names if not n.startswith("_")]


def test_public_names_are_unique_across_the_package() -> None:
    homes: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in public_names(path):
            homes[name].append(str(path.relative_to(PACKAGE.parent)))
    twice = {name: where for name, where in homes.items() if len(where) > 1 and name not in PROTOCOLS}
    assert not twice, "one name, several homes (rename one): " + "; ".join(
        f"{name}: {', '.join(where)}" for name, where in sorted(twice.items()))


def test_every_protocol_name_is_still_used_by_more_than_one_module() -> None:
    """A protocol with a single member is just a name: drop it from PROTOCOLS (and keep it unique)."""
    counts = {name: 0 for name in PROTOCOLS}
    for path in PACKAGE.rglob("*.py"):
        for name in set(public_names(path)) & set(PROTOCOLS):
            counts[name] += 1
    assert all(n > 1 for n in counts.values()), counts
