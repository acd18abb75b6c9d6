"""The package's import graph: no circles between modules, none between rooms, and the rules DESIGN.md
states about which room knows which. Every import counts, late ones inside functions too (a late import
hides a circle from the interpreter, not from a reader). Read with stdlib ``ast``: nothing is imported.

A room is a top-level module or subpackage of ``annotate`` (``annotate.trace``, ``annotate.notes``); the
package's own ``__init__`` belongs to no room."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "annotate"

#: room -> rooms it must never import (DESIGN.md: a lower room never imports a higher one)
NEVER = {
    "annotate.source": ("annotate.notes", "annotate.pages", "annotate.plugin", "annotate.trace"),
    "annotate.trace": ("annotate.pages", "annotate.plugin", "annotate.notes", "annotate.cli", "annotate.lesson",
                       "annotate.claims"),
    "annotate.vendoring": ("annotate.notes", "annotate.pages", "annotate.plugin", "annotate.trace", "annotate.cli"),
    "annotate.notes": ("annotate.pages", "annotate.plugin", "annotate.experiments", "annotate.framework_map"),
    "annotate.pages": ("annotate.plugin", "annotate.cli"),
}


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        out[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = path
    return out


def _targets(mods: dict[str, Path], current: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The package modules one import statement reads (``from a import b`` may name module a.b)."""
    names: set[str] = set()
    if isinstance(node, ast.Import):
        names = {a.name for a in node.names}
    else:
        base = node.module or ""
        if node.level:
            parts = current.split(".")
            keep = len(parts) - node.level + (1 if mods[current].name == "__init__.py" else 0)
            base = ".".join(parts[:keep] + ([base] if base else []))
        names = {base} | {f"{base}.{a.name}" for a in node.names}
    out = set()
    for name in names:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        if name and name != current and not current.startswith(name + "."):
            out.add(name)
    return out


def edges() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= _targets(mods, name, node)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = defaultdict(set)
    for source, targets in graph.items():
        for target in targets:
            if room(source) != room(target) and target != "annotate":
                rooms[room(source)].add(room(target))
    return rooms


def test_no_module_imports_itself_back() -> None:
    found = circles(edges())
    assert not found, "import circles (move the shared fact into a room below both): " + "; ".join(
        " ↔ ".join(c) for c in found)


def test_rooms_import_one_way() -> None:
    found = circles(room_graph(edges()))
    assert not found, "rooms that import each other: " + "; ".join(" ↔ ".join(c) for c in found)


def test_lower_rooms_know_nothing_of_higher_ones() -> None:
    rooms = room_graph(edges())
    wrong = [f"{low} imports {high}" for low, highs in NEVER.items() for high in highs if high in rooms.get(low, ())]
    assert not wrong, "; ".join(wrong)


def test_the_finder_sees_a_circle_and_a_late_import(tmp_path: Path) -> None:
    """The checker itself: a circle made of one top-level and one late import is found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    mods = {"annotate.x": tmp_path / "x.py", "annotate.y": tmp_path / "y.py"}
    late = ast.parse("def f():\n    from annotate.y import g\n")
    node = next(n for n in ast.walk(late) if isinstance(n, ast.ImportFrom))
    assert _targets(mods, "annotate.x", node) == {"annotate.y"}


#: annotate/pages' families, lowest first: each imports only itself and those before it (issue 37)
PAGE_FAMILIES = ("base", "traces", "source", "lesson", "experiments")


def _family_breaches(graph: dict[str, set[str]], package: str, order: tuple[str, ...]) -> list[str]:
    """Imports between ``package``'s subpackages that point up ``order`` (or into a module at its top)."""
    def family(module: str) -> str | None:   # a family's own __init__ belongs to it
        first = module.removeprefix(package + ".").split(".")[0]
        return first if module.startswith(package + ".") and first in order else None
    wrong = []
    for source, targets in graph.items():
        mine = family(source)
        for target in targets:
            theirs = family(target)
            if mine is None or not target.startswith(package + "."):
                continue
            if theirs is None or order.index(theirs) > order.index(mine):
                wrong.append(f"{source} imports {target}")
    return sorted(wrong)


def test_page_families_import_one_way() -> None:
    mods = modules()
    found = {m.split(".")[2] for m in mods if m.startswith("annotate.pages.") and m.count(".") >= 3}
    assert found == set(PAGE_FAMILIES), found
    loose = [m for m in mods if m.startswith("annotate.pages.") and m.count(".") == 2 and m.split(".")[2] not in PAGE_FAMILIES]
    assert loose == [], f"every page module lives in a family: {loose}"
    assert _family_breaches(edges(), "annotate.pages", PAGE_FAMILIES) == []


def test_the_family_check_sees_an_upward_import() -> None:
    graph = {"p.a.x": {"p.b.y"}, "p.b.y": {"p.a.z"}, "p.a.z": set()}
    assert _family_breaches(graph, "p", ("a", "b")) == ["p.a.x imports p.b.y"]


#: annotate/trace's stages, lowest first (the format first: every stage may read and write a trace); the
#: modules at the package's top (assemble, pipeline, parallel, freshness) join them and may import any
TRACE_STAGES = ("format", "model", "record", "identify", "reports")


def test_trace_stages_import_one_way() -> None:
    mods = modules()
    found = {m.split(".")[2] for m in mods if m.startswith("annotate.trace.") and m.count(".") >= 3}
    assert found == set(TRACE_STAGES), found
    top = sorted(m.split(".")[2] for m in mods if m.startswith("annotate.trace.") and m.count(".") == 2
                 and m.split(".")[2] not in TRACE_STAGES)
    assert top == ["assemble", "freshness", "parallel", "pipeline"], top
    assert _family_breaches(edges(), "annotate.trace", TRACE_STAGES) == []


def test_every_module_is_named_in_the_layout_page() -> None:
    """docs/guide/layout.md says where each fact lives: every module of the package is named there."""
    page = (PACKAGE.parent / "docs" / "guide" / "layout.md").read_text(encoding="utf-8")
    unnamed = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                     if p.name != "__init__.py" and "_native" not in p.parts and p.name not in page)
    assert unnamed == [], f"modules docs/guide/layout.md does not name: {unnamed}"
