"""The package's modules import one another without a cycle.

Every import counts: at module level or inside a function (an import done at call time
is a cycle all the same, only deferred). Imports under `if TYPE_CHECKING:` do not run and
do not count. A package importing its own modules is an edge like any other, so a module
that imports the package root back closes a cycle through it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import react_engine

PACKAGE = Path(react_engine.__file__).parent


def _modules(package: Path) -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                skipped.update(id(n) for n in ast.walk(inner))
    return skipped


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = _modules(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        skipped = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{alias.name}" for alias in node.names]
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved and resolved != name:
                    graph[name].add(resolved)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_the_check_sees_a_cycle() -> None:
    # The measure itself: a deferred import inside a function closes a cycle as well.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_graph_reads_function_level_imports() -> None:
    graph = import_graph()
    assert "react_engine.run.agent" in graph
    assert any(graph.values())
    # Every import written inside a function of the package is an edge of the graph, and
    # there are such imports (so this check is not vacuous).
    deferred = _function_level_edges()
    assert deferred
    assert all(target in graph[source] for source, target in deferred)


def _function_level_edges() -> set[tuple[str, str]]:
    """``(module, imported module)`` for each relative import inside a function body."""
    modules = _modules(PACKAGE)
    edges: set[tuple[str, str]] = set()
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                    target = _resolve(f"{package}.{node.module}", modules)
                    if target and target != name:
                        edges.add((name, target))
    return edges


def test_a_deferred_import_closes_a_cycle_and_a_type_checking_one_does_not(
    tmp_path: Path,
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from .high import g\n    return g\n")
    (package / "high.py").write_text("from .low import f\n\ndef g():\n    return f\n")
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .user import U\n"
    )
    (package / "user.py").write_text("from .typed import TYPE_CHECKING\n")
    graph = import_graph(package)
    assert graph["pkg.low"] == {"pkg.high"}
    assert graph["pkg.typed"] == set()
    assert cycles(graph) == [["pkg.high", "pkg.low"]]
