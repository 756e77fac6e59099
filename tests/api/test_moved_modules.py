"""The module paths of before the layout by layer keep working, as the same objects.

Every old path (``react_engine.loop``, ``react_engine.model``, ...) imports, warns with a
:class:`DeprecationWarning` that names its new path, and is the very module of the new
path, so a patch through the old path patches the code that runs. Inside the package
nothing imports an old path.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import react_engine
from react_engine import _moved

PACKAGE = Path(react_engine.__file__).parent
OLD = sorted(_moved.MOVED)


def _forget(old: str) -> None:
    """Make the next import of ``react_engine.<old>`` go through the finder again."""
    sys.modules.pop(f"react_engine.{old}", None)
    react_engine.__dict__.pop(old, None)


@pytest.mark.parametrize("old", OLD)
def test_old_path_is_the_new_module_and_warns(old: str) -> None:
    new = f"react_engine.{_moved.MOVED[old]}"
    module = importlib.import_module(new)
    _forget(old)
    with pytest.warns(DeprecationWarning, match=rf"react_engine\.{old} moved to {new}\b"):
        alias = importlib.import_module(f"react_engine.{old}")
    assert alias is module
    assert module.__name__ == new
    assert module.__spec__ is not None and module.__spec__.name == new
    assert sys.modules[f"react_engine.{old}"] is module


def test_from_import_of_an_old_path_names_the_caller() -> None:
    _forget("loop")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from react_engine.loop import Loop  # noqa: F401
    (warning,) = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert "react_engine.run.loop" in str(warning.message)
    assert warning.filename == __file__


def test_attribute_of_an_old_name_warns() -> None:
    _forget("selection")
    with pytest.warns(DeprecationWarning, match=r"react_engine\.protocols\.registry"):
        module = react_engine.selection  # type: ignore[attr-defined]
    assert module is importlib.import_module("react_engine.protocols.registry")


def test_patch_through_an_old_path_patches_the_real_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from react_engine.transport import capabilities

    _forget("capabilities")
    with pytest.warns(DeprecationWarning):
        monkeypatch.setattr("react_engine.capabilities._default_registry", "patched")
    assert capabilities._default_registry == "patched"


def test_old_paths_work_in_a_fresh_interpreter() -> None:
    """Without the test's imports before: the finder alone loads them."""
    code = (
        "import warnings; warnings.simplefilter('error');"
        "import react_engine.run.loop as new\n"
        "try:\n    import react_engine.loop\nexcept DeprecationWarning as w: print(w)\n"
        "warnings.simplefilter('ignore'); import react_engine.loop as old;"
        "print(old is new)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == "react_engine.loop moved to react_engine.run.loop; import it from there"
    assert out[1] == "True"


def _imported(path: Path, package_dir: Path = PACKAGE) -> list[tuple[int, str]]:
    """Every module ``path`` imports (relative imports resolved), with its line."""
    module = ".".join(path.relative_to(package_dir.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    if path.name == "__init__.py":
        module = package
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return found


def test_no_module_of_the_package_imports_an_old_path() -> None:
    old = {f"react_engine.{name}" for name in OLD}
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {target}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, target in _imported(path)
        if target in old or any(target.startswith(f"{o}.") for o in old)
    ]
    assert offenders == []


def test_the_scan_sees_an_old_import(tmp_path: Path) -> None:
    """The scan above would catch one: relative and absolute imports of old paths."""
    package_dir = tmp_path / "react_engine"
    (package_dir / "run").mkdir(parents=True)
    root_module = package_dir / "_x.py"
    root_module.write_text("from .loop import Loop\nfrom . import model\n")
    nested = package_dir / "run" / "_y.py"
    nested.write_text("from ..protocol import Protocol\nimport react_engine.selection\n")
    targets = {t for f in (root_module, nested) for _, t in _imported(f, package_dir)}
    old = {f"react_engine.{name}" for name in ("loop", "model", "protocol", "selection")}
    assert old <= targets


def test_names_of_a_split_module_stay_importable_from_it() -> None:
    """model.py was split (seam, wire format, OpenAI adapter, clients, retries): its names
    are still read from it, as the objects of the modules they live in."""
    from react_engine.transport import base, model, openai_model, retries, streaming, wire

    assert model.ChatModel is base.ChatModel
    assert model.OpenAIChatModel is openai_model.OpenAIChatModel
    assert model.with_retries is retries.with_retries
    assert model.request_payload is wire.request_payload
    assert set(model.__all__) <= set(vars(model))
    with pytest.warns(DeprecationWarning, match=r"transport\.retries\.stream_with_retries"):
        moved = streaming.stream_with_retries  # type: ignore[attr-defined]
    assert moved is retries.stream_with_retries


def test_names_of_the_split_capabilities_stay_importable_from_it() -> None:
    """capabilities.py was split (registry / learned decisions / rejections): the names it
    had still resolve there, with a warning naming their module now."""
    from react_engine.transport import capabilities, learned, rejections

    for name, module in [
        ("CapabilityCache", learned),
        ("default_cache", learned),
        ("resolve", learned),
        ("CACHE_ENV", learned),
        ("classify_rejection", rejections),
    ]:
        with pytest.warns(DeprecationWarning, match=rf"{module.__name__}\.{name}\b"):
            value = getattr(capabilities, name)
        assert value is getattr(module, name)
    with pytest.raises(AttributeError):
        capabilities.no_such_name  # noqa: B018
    from react_engine.protocols import registry

    assert registry.REACTIONS is rejections.REACTIONS
