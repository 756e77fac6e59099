"""The package's layers, and the checks that no import goes against them.

From the bottom: the modules at the package root (``errors``, ``types``, ``wording``,
``runtime``, ``paths``, ``nesting``, ``text``, ``version``) < ``tools``, ``parsing`` <
``transport`` < ``protocols`` < ``run`` < ``store`` < ``harness``, ``testing``, ``local``,
``integrations`` < ``compare``, ``eval``, ``report`` < ``cli``. A module may import its
own layer and the layers below it. The package itself (``__init__.py``, the public API that
re-exports every layer) and ``__main__.py`` sit above all of them: no layer imports them.

Every import counts: at module level, inside a function, under ``if TYPE_CHECKING:``
(an annotation is a dependency too), and ``importlib.import_module("...")`` or
``__import__("...")`` with a literal name. The files are read with ``ast``, never
imported. Within a layer, modules import one another without a cycle (here imports under
``if TYPE_CHECKING:`` do not count: they never run), and no module imports a name that
starts with an underscore from another module.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import react_engine

PACKAGE = Path(react_engine.__file__).parent

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"tools", "parsing"}),
    frozenset({"transport"}),
    frozenset({"protocols"}),
    frozenset({"run"}),
    frozenset({"store"}),
    frozenset({"harness", "testing", "local", "integrations"}),
    frozenset({"compare", "eval", "report"}),
    frozenset({"cli"}),
)
"""The sub-packages, lowest first, above the base (every module at the package root)."""

BASE = 0
TOP = len(LAYERS) + 1
"""The package (``__init__.py``) and ``__main__.py``."""


@dataclass(frozen=True)
class Import:
    module: str
    target: str
    """The module imported (for ``from m import name``, ``m``, unless ``name`` is a module)."""
    name: str
    """The name taken from ``target`` by ``from target import name``, else ``""``."""
    line: int
    typing_only: bool
    """Under ``if TYPE_CHECKING:``: a dependency, but one that never runs."""


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


def _absolute(here: str, level: int, name: str) -> str:
    """A relative import's module, from the package ``here``."""
    base = here.split(".")[: len(here.split(".")) - level + 1]
    return ".".join([*base, *([name] if name else [])])


def _literal_import(node: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("x")`` or ``__import__("x")``."""
    function = node.func
    named = (isinstance(function, ast.Attribute) and function.attr == "import_module") or (
        isinstance(function, ast.Name) and function.id in {"import_module", "__import__"}
    )
    if not named or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _typing_only(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                skipped.update(id(n) for n in ast.walk(inner))
    return skipped


def imports(package: Path = PACKAGE) -> list[Import]:
    """Every import of a module of the package by another, of every kind."""
    modules = _modules(package)
    found: list[Import] = []
    for name, path in sorted(modules.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        typing_only = _typing_only(tree)
        for node in ast.walk(tree):
            targets: list[tuple[str, str]] = []
            if isinstance(node, ast.Import):
                targets = [(alias.name, "") for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    source = _absolute(here, node.level, source)
                targets = [(f"{source}.{alias.name}", alias.name) for alias in node.names]
            elif isinstance(node, ast.Call) and (literal := _literal_import(node)):
                if literal.startswith("."):
                    dots = len(literal) - len(literal.lstrip("."))
                    literal = _absolute(here, dots, literal.lstrip("."))
                targets = [(literal, "")]
            for target, imported in targets:
                resolved = _resolve(target, modules)
                if resolved and resolved != name:
                    # ``from pkg import mod`` imports the module; ``from mod import x``, a name.
                    taken = "" if resolved == target else imported
                    found.append(
                        Import(name, resolved, taken, node.lineno, id(node) in typing_only)
                    )
    return found


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return TOP
    for rank, members in enumerate(LAYERS, start=1):
        if parts[1] in members:
            return rank
    if len(parts) == 2:
        return BASE
    raise AssertionError(f"{'.'.join(parts[:2])} is in no layer: add it to LAYERS")


def upward(package: Path = PACKAGE) -> list[str]:
    return sorted(
        {
            f"{i.module}:{i.line} imports {i.target} (layer {layer(i.target)} over {layer(i.module)})"
            for i in imports(package)
            if layer(i.target) > layer(i.module)
        }
    )


def private_names(package: Path = PACKAGE) -> set[str]:
    """``module imports other.name`` for each ``_name`` taken from another module."""
    return {
        f"{i.module} imports {i.target}.{i.name}"
        for i in imports(package)
        if i.name.startswith("_") and not i.name.startswith("__")
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
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


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """What each module imports when it runs (``if TYPE_CHECKING:`` imports left out)."""
    graph: dict[str, set[str]] = {name: set() for name in _modules(package)}
    for i in imports(package):
        if not i.typing_only:
            graph[i.module].add(i.target)
    return graph


# --- the package -----------------------------------------------------------------------------


def test_no_import_goes_up_a_layer() -> None:
    assert upward() == []


def test_every_sub_package_has_a_layer() -> None:
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert packages == set().union(*LAYERS)


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_no_module_imports_a_private_name_of_another() -> None:
    assert private_names() == set()


# --- the measure -----------------------------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_the_check_sees_every_kind_of_upward_import(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "from .run.agent import Agent\n",
            "errors.py": "",
            "types.py": (
                "from typing import TYPE_CHECKING\n"
                "from .errors import *\n"
                "if TYPE_CHECKING:\n"
                "    from .run.agent import Agent\n"
            ),
            "wording.py": "import importlib\nm = importlib.import_module('pkg.store')\n",
            "paths.py": "def f():\n    return __import__('pkg.cli.main')\n",
            "tools/__init__.py": "def f():\n    from ..transport import wire\n",
            "transport/__init__.py": "",
            "transport/wire.py": "from .. import errors\nfrom ..tools import f\n",
            "run/__init__.py": "",
            "run/agent.py": "from importlib import import_module\nimport_module('..store', 'pkg.run')\n",
            "store/__init__.py": "from pkg import Agent\n",
            "cli/__init__.py": "",
            "cli/main.py": "import pkg.run.agent\n",
        },
    )
    assert upward(package) == [
        "pkg.paths:2 imports pkg.cli.main (layer 8 over 0)",
        "pkg.run.agent:2 imports pkg.store (layer 5 over 4)",
        "pkg.store:1 imports pkg (layer 9 over 5)",
        "pkg.tools:2 imports pkg.transport.wire (layer 2 over 1)",
        "pkg.types:4 imports pkg.run.agent (layer 4 over 0)",
        "pkg.wording:2 imports pkg.store (layer 5 over 0)",
    ]


def test_the_check_sees_private_names_and_not_private_modules(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "from . import _helpers\nfrom ._helpers import __all__\n",
            "_helpers.py": "_SECRET = 1\n",
            "types.py": "def f():\n    from ._helpers import _SECRET\n",
        },
    )
    assert private_names(package) == {"pkg.types imports pkg._helpers._SECRET"}


def test_a_deferred_import_closes_a_cycle_and_a_type_checking_one_does_not(
    tmp_path: Path,
) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "def f():\n    from .high import g\n    return g\n",
            "high.py": "from .low import f\n\ndef g():\n    return f\n",
            "typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .user import U\n",
            "user.py": "from .typed import TYPE_CHECKING\n",
        },
    )
    graph = import_graph(package)
    assert graph["pkg.low"] == {"pkg.high"}
    assert graph["pkg.typed"] == set()
    assert cycles(graph) == [["pkg.high", "pkg.low"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
