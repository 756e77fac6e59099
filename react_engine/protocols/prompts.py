"""Prompt templates: packaged TOML files, filled in strictly.

A template is a TOML file of named strings with :meth:`str.format` ``{placeholder}`` fields.
Each key declares which placeholders it may and must use; a template breaking that fails
when loaded, and filling a key without one of its values fails too
(:class:`~react_engine.errors.TemplateError`). Shipped templates live in ``prompts/``
(``react_engine/prompts/`` in the wheel); users pass a name or the path of their own file.
"""

from __future__ import annotations

import functools
import re
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final

from ..errors import TemplateError

__all__ = [
    "TEMPLATE_KINDS",
    "PromptTemplate",
    "TemplateKind",
    "add_template_kind",
    "list_templates",
    "load_template",
]

KindSchema = dict[str, tuple[frozenset[str], frozenset[str]]]
"""A kind's texts: for each key, the placeholders it may use and those it must use."""


def _schema(**keys: str) -> KindSchema:
    """Each key's placeholders, a ``*`` after those it must use."""
    return {
        key: (
            frozenset(w.rstrip("*") for w in spec.split()),
            frozenset(w[:-1] for w in spec.split() if w.endswith("*")),
        )
        for key, spec in keys.items()
    }


_SHARED: Final = _schema(
    format_error="error* reminder", format_reminder="", force_final="",
    tool_required="tool_names", tool_named="tool*", tool_none="", no_tools="",
)  # fmt: skip
_OUTPUT: Final = _schema(output_schema="schema* type_name", output_retry="")


@dataclass(frozen=True, slots=True)
class TemplateKind:
    """What a template of one ``kind`` may hold (its schema) and must hold; a new protocol
    with templates of its own adds its kind with :func:`add_template_kind`."""

    schema: KindSchema
    needed: frozenset[str] = frozenset({"system"})


TEMPLATE_KINDS: dict[str, TemplateKind] = {
    "text": TemplateKind(
        _schema(
            system="instructions tools* tool_names*", question="question*",
            observation="observation*", observation_item="index tool observation*",
        )
        | _SHARED
        | _schema(action_example="thought tool* input*", final_example="thought answer*")
        | _OUTPUT,
        frozenset({"system", "question", "observation", "format_error"}),
    ),
    "function_calling": TemplateKind(
        _schema(
            system="instructions", force_final="", tool_required="tool_names", empty_reply="",
            output_system="", output_tool="type_name", output_force_final="", output_retry="",
        )
    ),
    # replies are JSON objects: no labels or stop sequences, the JSON shape is in ``system``
    "structured": TemplateKind(
        _schema(
            system="instructions tools* tool_names", question="question*",
            observation="tool observation*",
        )
        | _SHARED
        | _OUTPUT,
        frozenset({"system", "observation", "format_error"}),
    ),
}  # fmt: skip
"""Every kind of template :func:`parse_template` accepts, by name."""


def add_template_kind(name: str, kind: TemplateKind) -> None:
    """Accept templates of kind ``name`` (a later call replaces it)."""
    if "system" not in kind.schema or not kind.needed <= set(kind.schema):
        raise TemplateError(
            f"template kind {name!r}: needs a 'system' text and a schema for each needed one"
        )
    TEMPLATE_KINDS[name] = kind


_META_KEYS = frozenset({"name", "description", "kind", "stop", "labels", "language"})

LABEL_KEYS: frozenset[str] = frozenset(
    {"thought", "action", "action_input", "final_answer", "colon", "final_thought"}
    | {"plan_prefix", "action_format"}
)
"""The keys a ``[labels]`` table may hold: what the text protocol's grammar reads
(:class:`~react_engine.transport.grammar.ReactLabels`); any other is an error, not a no-op."""


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A loaded template: named strings, stop sequences and the labels it teaches the model."""

    name: str
    kind: str
    """One of :data:`TEMPLATE_KINDS`."""
    texts: Mapping[str, str]
    stop: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    language: str = "en"
    """The language the engine's own observations are worded in (``"en"``, ``"zh"``): the
    template's ``language`` key, else ``"zh"`` when its labels are Chinese."""

    def fill(self, key: str, default: str | None = None, /, **values: Any) -> str:
        """Fill one text strictly: every placeholder it uses must be given. A template
        without the text gives ``default``, or fails when there is none."""
        if (text := self.texts.get(key)) is None:
            if default is not None:
                return default
            raise _error(self.name, f"no {key!r} text")
        used = _fields(text, self.name, key)
        if not values.keys() >= used:
            missing = ", ".join(sorted(used - set(values)))
            raise _error(self.name, f"{key!r} needs a value for {missing}")
        return text.format(**values)  # values it does not use are left out


@functools.lru_cache(maxsize=512)
def _fields(text: str, name: str, key: str) -> frozenset[str]:
    """The placeholders ``text`` uses (parsed once per text: templates fill it every turn)."""
    try:
        return frozenset(f for _, f, _, _ in string.Formatter().parse(text) if f is not None)
    except ValueError as exc:
        raise _error(name, f"{key!r} is malformed ({exc}); {_BRACES}") from None


_BRACES = "write literal braces as {{ }}"


def _error(name: str, clause: str) -> TemplateError:
    return TemplateError(f"template {name!r}: {clause}", template=name)


def _check(template: PromptTemplate) -> PromptTemplate:
    name, kind = template.name, TEMPLATE_KINDS[template.kind]
    for key, text in template.texts.items():
        if key not in kind.schema:
            raise _error(name, f"unknown key {key!r} (known: {', '.join(kind.schema)})")
        allowed, required = kind.schema[key]
        used = _fields(text, name, key)
        if any(not f.isidentifier() for f in used):
            raise _error(
                name, f"{key!r} has a placeholder that is not a name ({sorted(used)}); {_BRACES}"
            )
        if unknown := ", ".join(sorted(used - allowed)):
            allowed_names = ", ".join(sorted(allowed)) or "(none)"
            raise _error(
                name, f"{key!r} uses unknown placeholder(s) {unknown}; allowed: {allowed_names}"
            )
        if absent := ", ".join(sorted(required - used)):
            raise _error(name, f"{key!r} must use {absent}")
    if lacking := sorted(kind.needed - set(template.texts)):
        raise _error(name, f"lacks {', '.join(lacking)}")
    return template


def parse_template(data: Mapping[str, Any], *, name: str, source: str = "") -> PromptTemplate:
    """Build and check a template from already-decoded TOML data."""
    kind = str(data.get("kind", "text"))
    if kind not in TEMPLATE_KINDS:
        raise _error(name, f"unknown kind {kind!r}")
    texts = {key: value for key, value in data.items() if key not in _META_KEYS}
    if wrong := [key for key, value in texts.items() if not isinstance(value, str)]:
        raise _error(name, f"{wrong[0]!r} must be a string")
    stop = data.get("stop", [])
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise _error(name, "stop must be a list of strings")
    labels = data.get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise _error(name, "labels must be a table of strings")
    if unknown := sorted(set(labels) - LABEL_KEYS):
        known = ", ".join(sorted(LABEL_KEYS))
        raise _error(name, f"unknown labels {', '.join(unknown)} (known: {known})")
    language = data.get("language")
    if language is None:
        language = "zh" if any(_CJK.search(v) for v in labels.values()) else "en"
    if not isinstance(language, str) or not language:
        raise _error(name, "language must be a string")
    name = str(data.get("name", name))
    return _check(PromptTemplate(name, kind, texts, tuple(stop), dict(labels), source, language))


_CJK = re.compile("[\u4e00-\u9fff]")  # labels in Chinese make a "zh" template


def _builtin_dir() -> Path | None:
    packaged = resources.files("react_engine").joinpath("prompts")
    if packaged.is_dir():
        return Path(str(packaged))
    source_tree = Path(__file__).resolve().parents[2] / "prompts"
    return source_tree if source_tree.is_dir() else None


def list_templates() -> list[str]:
    """Names of the templates shipped with react-engine."""
    folder = _builtin_dir()
    return sorted(p.stem for p in folder.glob("*.toml")) if folder else []


def load_template(
    name_or_path: str | Path | PromptTemplate, *, kind: str | None = None
) -> PromptTemplate:
    """Load a shipped template by name, or a user's template from a ``.toml`` path (a
    loaded template is taken as it is); with ``kind``, refuse a template of another kind."""
    template = name_or_path if isinstance(name_or_path, PromptTemplate) else _load(name_or_path)
    if kind is not None and template.kind != kind:
        name = template.name
        raise TemplateError(f"template {name!r} is not a {kind} template", template=name)
    return template


@functools.cache
def _load(name_or_path: str | Path) -> PromptTemplate:
    key = str(name_or_path)
    path = Path(key)
    if path.suffix != ".toml" or not path.exists():
        folder = _builtin_dir()
        candidate = folder / f"{key}.toml" if folder else None
        if candidate is None or not candidate.exists():
            raise TemplateError(
                f"no template {key!r}: give one of {', '.join(list_templates())} "
                "or the path of a .toml file",
                template=key,
            )
        path = candidate
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TemplateError(f"cannot read template {str(path)!r}: {exc}", template=key) from exc
    return parse_template(data, name=path.stem, source=str(path))
