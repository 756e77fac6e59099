"""What a chat model and the server in front of it accept: :class:`Capabilities` and the
:class:`CapabilityRegistry` (the shipped ``capabilities.json`` under the user's entries).
What servers rejected at run time is in :mod:`~react_engine.transport.learned`
(docs/capability-cache.md). Nothing here talks to the network.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Generic, Literal, TypeAlias, TypeVar, get_args

from ..errors import ConfigurationError

__all__ = [
    "BOOL_FIELDS",
    "REGISTRY_ENV",
    "Capabilities",
    "CapabilityRegistry",
    "RejectedParam",
    "TextTemplate",
    "default_registry",
    "model_name_candidates",
]

REGISTRY_ENV: Final = "REACT_ENGINE_CAPABILITIES"
"""Path of a JSON file (same schema as the shipped one) whose entries override the shipped ones."""

TextTemplate: TypeAlias = Literal["classic", "json", "zh"]

# What a server refused, as named by classify_rejection() (and "stream_tools" by the loop).
RejectedParam: TypeAlias = Literal[
    "tools",
    "stop",
    "tool_choice",
    "parallel_tool_calls",
    "constrained_decoding",
    "temperature",
    "reasoning_content",
    "reasoning_content_missing",
    "stream_tools",
]

ConstraintStyle: TypeAlias = Literal["llama.cpp", "vllm", "json_schema"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What one model, behind its usual server, accepts. The defaults are the registry's
    guess for an unknown model (see ``default`` in ``capabilities.json``)."""

    function_calling: bool = True
    """The server takes ``tools`` and returns ``tool_calls``: under ``protocol="auto"``,
    native calls, else the text protocol. A wrong ``True`` costs one rejected request."""

    parallel_tool_calls: bool = False
    """The ``parallel_tool_calls`` parameter is accepted (else it is not sent; several calls
    that arrive anyway still run)."""

    tool_choice_required: bool = False
    """``tool_choice="required"`` is honoured (else a call is forced with a retry message)."""

    stop: bool = True
    """``stop`` sequences are accepted (else the text protocol cuts an invented
    ``Observation:`` after the fact). Reasoning APIs reject it."""

    constrained_decoding: bool = False
    """The server can constrain what the model writes (:attr:`constraint_style`): a grammar
    for the text protocol, a JSON Schema for the structured one."""

    constraint_style: ConstraintStyle = "json_schema"
    """``"llama.cpp"`` (a GBNF ``grammar``), ``"vllm"`` (``guided_grammar`` /
    ``guided_json``) or ``"json_schema"`` (OpenAI's ``response_format``: JSON only)."""

    text_template: TextTemplate = "classic"
    """The text-protocol prompt that suits the model: ``classic``, ``json`` or ``zh``."""

    reasoning: bool = False
    """A reasoning model: its thinking counts against ``max_tokens`` (none is sent unless
    asked). Think blocks never reach the answer, whatever this flag says."""

    reasoning_echo: bool = False
    """The provider wants the reply's ``reasoning_content`` sent back on the current
    question's tool-call turns (DeepSeek's thinking mode). Learned both ways."""

    sampling: bool = True
    """The model takes ``temperature`` (false for reasoning APIs that reject or ignore it)."""

    stream_tools: bool = True
    """The server streams replies to requests with ``tools`` (some answer an empty stream:
    such requests then go unstreamed). Learned."""

    call_format: str = ""
    """The family's own tool-call format (``hermes``, ``qwen_xml``, ...: the recognisers of
    :mod:`react_engine.parsing.salvage.formats`), tried first on a call left in the text;
    ``""`` tries them all."""

    source: str = ""
    """Where the entry's facts come from: a documentation URL, ``"user"``, or a file."""

    note: str = ""
    """Why the entry says what it says, for readers and reviewers."""


BOOL_FIELDS: Final = tuple(f.name for f in dataclasses.fields(Capabilities) if f.type == "bool")
_STR_FIELDS: Final = tuple(f.name for f in dataclasses.fields(Capabilities) if f.type != "bool")
_CHOICES: Final = {
    "text_template": get_args(TextTemplate),
    "constraint_style": get_args(ConstraintStyle),
}


def _capabilities(base: Capabilities, fields: Mapping[str, Any], where: str) -> Capabilities:
    for name, value in fields.items():
        if name in BOOL_FIELDS:
            if not isinstance(value, bool):
                raise ConfigurationError(f"{where}: {name!r} must be true or false, got {value!r}")
        elif name in _STR_FIELDS:
            if not isinstance(value, str):
                raise ConfigurationError(f"{where}: {name!r} must be a string, got {value!r}")
            choices = _CHOICES.get(name)
            if choices is not None and value not in choices:
                raise ConfigurationError(
                    f"{where}: {name} must be one of {', '.join(choices)}, got {value!r}"
                )
        else:
            known = ", ".join(BOOL_FIELDS + _STR_FIELDS)
            raise ConfigurationError(f"{where}: unknown field {name!r} (known: {known})")
    return dataclasses.replace(base, **fields)


def model_name_candidates(model: str) -> tuple[str, ...]:
    """The lowercase names a model is matched under, most specific first: the full name
    (without ``ft:``), its last path segment, and both without an Ollama ``:tag``, so that
    one pattern covers ``Qwen/Qwen2.5-7B-Instruct``, ``llama3.1:8b`` and the like."""
    name = model.strip().lower().removeprefix("ft:")
    base = re.split(r"[/\\]", name)[-1]
    untagged = [n.split(":", 1)[0] for n in (name, base)]
    return tuple(dict.fromkeys([name, *(n for n in (base, *untagged) if n)]))


V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class _Entry(Generic[V]):
    pattern: str
    value: V
    regex: re.Pattern[str]


def _entry(pattern: Any, value: V, where: str) -> _Entry[V]:
    if not isinstance(pattern, str) or not pattern.strip():
        raise ConfigurationError(f"{where}: a pattern must be a non-empty string, got {pattern!r}")
    pattern = pattern.strip()
    return _Entry(pattern, value, re.compile(fnmatch.translate(pattern.lower())))


_MAX_FOUND = 256
"""Model names whose lookup a registry keeps (a process that serves more starts over)."""


class CapabilityRegistry:
    """Ordered ``(glob pattern, Capabilities)`` entries; the first match wins.

    Patterns are case-insensitive shell globs matched against every name in
    :func:`model_name_candidates`. :meth:`register` and :meth:`load_file` put their entries
    in front of all earlier ones, so user entries beat the shipped ones.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._default = Capabilities()
        self._entries: tuple[_Entry[Capabilities], ...] = ()
        self._servers: tuple[_Entry[Mapping[str, Any]], ...] = ()
        # lookup()'s answers per model name, with the entries and default they were found in
        self._found: dict[str, tuple[tuple[_Entry[Any], ...], Capabilities, Capabilities, str]] = {}

    @property
    def default(self) -> Capabilities:
        """What a model that matches no pattern gets."""
        return self._default

    @property
    def entries(self) -> tuple[tuple[str, Capabilities], ...]:
        """The entries in lookup order."""
        return tuple((e.pattern, e.value) for e in self._entries)

    def lookup_server(self, base_url: str | None) -> tuple[Mapping[str, Any], str] | None:
        """What the ``servers`` entries say about the server at ``base_url`` (the fields and
        the matching pattern), or ``None``: they override the model's entry."""
        if not base_url:
            return None
        url = base_url.strip().lower()
        for entry in self._servers:
            if entry.regex.match(url):
                return entry.value, entry.pattern
        return None

    def lookup(self, model: str) -> tuple[Capabilities, str]:
        """The capabilities of ``model`` and the pattern that matched (``"default"`` if none),
        kept per model name until the entries or the default change."""
        entries, default = self._entries, self._default
        found = self._found.get(model)
        if found is not None and found[0] is entries and found[1] is default:
            return found[2], found[3]
        caps, pattern = default, "default"
        names = model_name_candidates(model)
        for entry in entries:
            if any(entry.regex.match(name) for name in names):
                caps, pattern = entry.value, entry.pattern
                break
        if len(self._found) >= _MAX_FOUND:
            self._found.clear()
        self._found[model] = (entries, default, caps, pattern)
        return caps, pattern

    def register(self, pattern: str, **fields: Any) -> Capabilities:
        """Put ``pattern`` in front of every existing entry and return its capabilities
        (unspecified fields come from :attr:`default`)."""
        base = dataclasses.replace(self._default, source="user", note="")
        caps = _capabilities(base, fields, f"register({pattern!r})")
        entry = _entry(pattern, caps, "register()")
        with self._lock:
            self._entries = (entry, *self._entries)
        return caps

    def load_file(self, path: str | os.PathLike[str]) -> None:
        """Put the entries of a JSON file (the shipped file's schema) in front of all others;
        its ``default`` replaces the registry's. :class:`ConfigurationError` if it is bad."""
        where = f"capabilities file {os.fspath(path)}"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"{where}: cannot read it: {exc}") from exc
        self._load_text(text, where, source=f"file: {os.fspath(path)}")

    def _load_text(self, text: str, where: str, *, source: str) -> None:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ConfigurationError(f"{where}: not valid JSON: {exc}") from exc
        default, entries, servers = _parse_document(data, where, self._default, source=source)
        with self._lock:
            self._default = default
            self._entries = (*entries, *self._entries)
            self._servers = (*servers, *self._servers)

    @classmethod
    def from_default(cls, *, env: Mapping[str, str] | None = None) -> CapabilityRegistry:
        """A fresh registry with the shipped entries, plus the file named by
        ``REACT_ENGINE_CAPABILITIES`` in ``env`` (``os.environ`` when ``None``), if set."""
        import importlib.resources  # with the registry's first use, not with the library

        registry = cls()
        resource = importlib.resources.files("react_engine.transport").joinpath("capabilities.json")
        registry._load_text(
            resource.read_text(encoding="utf-8"),
            "shipped react_engine/transport/capabilities.json",
            source="react-engine",
        )
        override = (os.environ if env is None else env).get(REGISTRY_ENV, "").strip()
        if override:
            registry.load_file(override)
        return registry


_SERVER_FIELDS: Final = frozenset({"constrained_decoding", "constraint_style"})
"""What a server entry may say: facts of the server software, whatever model it serves."""


def _items(
    data: Any, section: str, key: str, where: str
) -> Iterator[tuple[str, dict[str, Any], list[Any]]]:
    """Each entry of the list ``data[section]``: where it is, its fields, its ``key`` globs."""
    items = data.get(section, [])
    if not isinstance(items, list):
        raise ConfigurationError(f"{where}: {section!r} must be a list")
    for index, item in enumerate(items):
        at = f"{where}: {section}[{index}]"
        if not isinstance(item, dict):
            raise ConfigurationError(f"{at}: each entry must be an object")
        fields = dict(item)
        patterns = fields.pop(key, None)
        if not isinstance(patterns, list) or not patterns:
            raise ConfigurationError(f"{at}: needs {key!r} (a list of globs)")
        yield at, fields, patterns


def _parse_document(
    data: Any, where: str, default: Capabilities, *, source: str
) -> tuple[Capabilities, list[_Entry[Capabilities]], list[_Entry[Mapping[str, Any]]]]:
    if not isinstance(data, dict):
        raise ConfigurationError(f"{where}: the top level must be a JSON object")
    unknown = set(data) - {"version", "default", "models", "servers"}
    if unknown:
        raise ConfigurationError(f"{where}: unknown top-level key(s) {sorted(unknown)}")
    version = data.get("version", 1)
    if version != 1:
        raise ConfigurationError(f"{where}: unsupported version {version!r} (expected 1)")
    if "default" in data:
        raw_default = data["default"]
        if not isinstance(raw_default, dict):
            raise ConfigurationError(f"{where}: 'default' must be an object")
        default = _capabilities(Capabilities(source=source), raw_default, f"{where}: default")
    entries: list[_Entry[Capabilities]] = []
    base = dataclasses.replace(default, source=source, note="")
    for at, fields, patterns in _items(data, "models", "patterns", where):
        caps = _capabilities(base, fields, at)
        entries.extend(_entry(pattern, caps, at) for pattern in patterns)
    servers: list[_Entry[Mapping[str, Any]]] = []
    for at, fields, patterns in _items(data, "servers", "base_urls", where):
        fields = {k: v for k, v in fields.items() if k not in ("source", "note")}
        unknown = set(fields) - _SERVER_FIELDS
        if unknown:
            raise ConfigurationError(
                f"{at}: a server entry may set only {sorted(_SERVER_FIELDS)}, not {sorted(unknown)}"
            )
        _capabilities(Capabilities(), fields, at)  # checks names and values
        servers.extend(_entry(pattern, fields, at) for pattern in patterns)
    return default, entries, servers


_default_registry: CapabilityRegistry | None = None
_default_registry_lock = threading.Lock()


def default_registry() -> CapabilityRegistry:
    """The process-wide registry (shipped entries plus ``REACT_ENGINE_CAPABILITIES``),
    built on first use; it serves every agent that does not pass its own."""
    global _default_registry
    with _default_registry_lock:
        if _default_registry is None:
            _default_registry = CapabilityRegistry.from_default()
        return _default_registry
