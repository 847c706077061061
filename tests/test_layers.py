"""The package imports one way: no module imports, even inside a function or only for typing, a
module that imports it back. A circle is what made a layer impossible to read alone, so the test
reads every import the code has, the lazy ones included, and names the circle it finds."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "aider_gardener"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Package modules ``name`` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("aider_gardener"):
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & known
            found.update(subs or ({target} & known))
    found.discard(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_reader_sees_every_kind_of_import():
    graph = _graph()
    assert "aider_gardener.store.db" in graph["aider_gardener.store.recall"]  # top level
    assert "aider_gardener.store.recall" in graph["aider_gardener.clients.mcp_server"]  # lazy
    assert "aider_gardener.critical" in graph["aider_gardener.compress.base"]  # from .. import


def test_no_module_imports_one_that_imports_it_back():
    assert _circles(_graph()) == []


def test_no_package_imports_one_that_imports_it_back():
    """The same one level up: classify, compress, store, continuity, integration, clients (and
    the top-level modules) form layers, not a web."""
    graph: dict[str, set[str]] = {}
    for name, deps in _graph().items():
        group = ".".join(name.split(".")[:2])
        targets = {".".join(d.split(".")[:2]) for d in deps}
        graph.setdefault(group, set()).update(targets - {group})
    graph.pop("aider_gardener", None)  # the root's lazy re-exports name the layers it fronts
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
