"""Every exception the library defines is in its error tree, and stays what it was.

``except ReactEngineError`` catches whatever the engine raises on purpose; the built-in
bases that callers may have relied on before (``except ValueError`` around a tool's
``validate``, a protocol's constructor, a final answer's reading; ``TimeoutError`` for the
engine's own time limit) still hold, through multiple inheritance.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings
from types import ModuleType

import pytest

import react_engine
from react_engine.errors import ModelBehaviorError, ReactEngineError, TemplateError, UserError


def modules() -> list[ModuleType]:
    """Every module of the package that imports here (an optional extra may be absent)."""
    found = []
    for info in pkgutil.walk_packages(react_engine.__path__, "react_engine."):
        if info.name.endswith("__main__"):
            continue  # running it is the CLI
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an old module path warns that it moved
            try:
                found.append(importlib.import_module(info.name))
            except ImportError:
                continue
    return found


def public_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class a module defines under a public name."""
    classes = {}
    for module in modules():
        for name, value in vars(module).items():
            if (
                not name.startswith("_")
                and inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                classes[f"{module.__name__}.{name}"] = value
    return classes


def test_every_public_exception_derives_from_the_library_root() -> None:
    classes = public_exceptions()
    # The walk saw the ones that once sat outside the tree (it would pass on nothing).
    names = {cls.__name__ for cls in classes.values()}
    assert {"ToolArgumentsError", "GrammarError", "OutputError", "ThreadsExhausted"} <= names
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, ReactEngineError))
    # Ctrl-C's own exception, with the run so far: a KeyboardInterrupt, which no
    # ``except Exception`` (nor ``except ReactEngineError``) may swallow.
    assert outside == ["react_engine.errors.RunInterrupted"]
    assert issubclass(react_engine.RunInterrupted, KeyboardInterrupt)
    assert not issubclass(react_engine.RunInterrupted, Exception)


@pytest.mark.parametrize(
    ("qualified", "branch", "builtin"),
    [
        ("react_engine.tools.base.ToolArgumentsError", ModelBehaviorError, ValueError),
        ("react_engine.protocols.output.OutputError", ModelBehaviorError, ValueError),
        ("react_engine.transport.grammar.GrammarError", UserError, ValueError),
        ("react_engine.errors.TemplateError", UserError, ValueError),
        ("react_engine.runtime.ThreadsExhausted", ReactEngineError, RuntimeError),
        ("react_engine.runtime.DeadlinePassed", ReactEngineError, TimeoutError),
        ("react_engine.errors.UnknownOptionError", UserError, TypeError),
    ],
)
def test_each_keeps_the_builtin_base_callers_may_catch(
    qualified: str, branch: type[Exception], builtin: type[Exception]
) -> None:
    module, _, name = qualified.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, branch) and issubclass(cls, builtin)


@pytest.mark.parametrize(
    ("protocol", "template"),
    [
        ("TextReActProtocol", "function_calling"),
        ("FunctionCallingProtocol", "classic"),
        ("StructuredOutputProtocol", "classic"),
    ],
)
def test_a_protocol_given_another_protocols_template_raises_a_template_error(
    protocol: str, template: str
) -> None:
    cls = getattr(react_engine, protocol)
    with pytest.raises(TemplateError, match=f"template {template!r} is not a") as caught:
        cls(template=template)
    assert isinstance(caught.value, ValueError)  # what it raised before: still caught there
    assert caught.value.template == template
