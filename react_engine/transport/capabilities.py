"""What a chat model and the server in front of it accept.

The agent picks a protocol per model and shapes each request to what the server takes, so
it needs to know, before the first request, whether a model does native tool calls,
whether ``stop`` is allowed, and so on. Three layers answer that, each over the one
before::

    shipped registry   capabilities.json: glob patterns per model family, from the docs
    user entries       register(), load_file(), REACT_ENGINE_CAPABILITIES=path
    learned decisions  CapabilityCache: what a server rejected at run time,
                       per (base_url, model), optionally kept in a JSON file

:func:`resolve` combines them and says which layer decided. :func:`classify_rejection`
turns a server's error body into the parameter it rejected, so the agent can drop that
parameter (or fall back to the text protocol), retry once and remember the lesson.

Nothing here talks to the network; it is all pure data and small functions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

from ..errors import ConfigurationError

__all__ = [
    "CACHE_ENV",
    "REGISTRY_ENV",
    "Capabilities",
    "CapabilityCache",
    "CapabilityRegistry",
    "RejectedParam",
    "TextTemplate",
    "classify_rejection",
    "default_cache",
    "default_registry",
    "model_name_candidates",
    "resolve",
]

logger = logging.getLogger(__name__)

REGISTRY_ENV: Final = "REACT_ENGINE_CAPABILITIES"
"""Path of a JSON file (same schema as the shipped one) whose entries override the shipped ones."""

CACHE_ENV: Final = "REACT_ENGINE_CAPABILITY_CACHE"
"""Path of the JSON file in which the default cache keeps what it learned across runs."""

TextTemplate: TypeAlias = Literal["classic", "json", "zh"]
TEXT_TEMPLATES: Final[tuple[str, ...]] = ("classic", "json", "zh")

# What a server refused, as named by classify_rejection(); "stream_tools" (a streamed
# request with tools answered by an empty stream) is named by the loop, never by a body.
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
CONSTRAINT_STYLES: Final[tuple[str, ...]] = ("llama.cpp", "vllm", "json_schema")


# --- capabilities ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What one model, behind its usual server, accepts. The defaults are the registry's
    guess for an unknown model (see ``default`` in ``capabilities.json``)."""

    function_calling: bool = True
    """The server takes ``tools`` and returns ``tool_calls``. Decides the protocol under
    ``protocol="auto"``: native calls when true, the text Thought/Action protocol when
    false. A wrong ``True`` costs one rejected request (the rejection is learned)."""

    parallel_tool_calls: bool = False
    """The server accepts the ``parallel_tool_calls`` parameter and the model may return
    several calls per reply. When false the parameter is not sent at all (several servers
    reject it); several calls that arrive anyway are still executed."""

    tool_choice_required: bool = False
    """``tool_choice="required"`` is accepted and honoured. When false only ``"auto"`` (or
    nothing) is sent, so forcing a call must be done with a retry message instead."""

    stop: bool = True
    """The server accepts ``stop`` sequences. The text protocol uses them to end a reply
    before the model invents its own ``Observation:``; without them it cuts the invented
    part after the fact, which costs tokens but still works. Reasoning APIs reject it."""

    constrained_decoding: bool = False
    """The server can constrain what the model writes (see :attr:`constraint_style`). The
    text protocol then sends a grammar that only admits a well-formed step on this agent's
    tools, and the structured-output protocol a JSON Schema. A server that rejects the
    parameter is learned (``constrained_decoding=False``) and the run goes on without."""

    constraint_style: ConstraintStyle = "json_schema"
    """How the server takes a constraint: ``"llama.cpp"`` (a GBNF ``grammar`` field, which
    llama.cpp's server and llama-cpp-python read; JSON Schemas are sent as grammars too),
    ``"vllm"`` (``guided_grammar`` / ``guided_json``), or ``"json_schema"`` (OpenAI's
    ``response_format`` JSON Schema, also read by Ollama's and most other ``/v1``
    endpoints: JSON only, no grammar for the text protocol)."""

    text_template: TextTemplate = "classic"
    """Which text-protocol prompt suits the model: ``classic`` (Thought/Action/Action Input),
    ``json`` (the action as one JSON object) or ``zh`` (Chinese labels). Every shipped
    family follows ``classic``; the others are for users to pick per model."""

    reasoning: bool = False
    """A reasoning model: it thinks before answering, in ``<think>`` blocks, in a separate
    ``reasoning_content`` or hidden (OpenAI's o-series and GPT-5). Its thinking counts
    against ``max_tokens``: a bound that suits other models cuts it off before the answer
    (the comparison script then sends none; the library sends none unless asked). Think
    blocks never reach the answer or the action search, whatever this flag says: any
    model may write them."""

    reasoning_echo: bool = False
    """The provider wants the reply's ``reasoning_content`` sent back on the assistant
    messages of the current question's tool-call turns (DeepSeek's thinking mode answers
    HTTP 400 without it; Kimi K2 Thinking reasons worse). Earlier questions' reasoning is
    never sent. Only the function-calling protocol sends it: the text protocols make no
    tool-call turns. Learned both ways: a server that asks for the field turns this on,
    one that rejects it turns it off."""

    sampling: bool = True
    """The model takes ``temperature``. False for reasoning APIs that reject any value but
    the default (OpenAI's o-series and GPT-5 answer HTTP 400) or ignore it (deepseek-reasoner):
    the agent then does not send the user's temperature. A rejection is learned."""

    stream_tools: bool = True
    """The server streams its reply to a request that carries ``tools``. Some cannot: a
    few vLLM and Ollama versions, and llama-cpp-python's server before react-engine's
    fix, answer HTTP 200 and a stream with no chunk at all. A streamed run that meets one
    sends the turn again without streaming and learns this as false: from then on its
    requests with tools go unstreamed (each reply reaches the caller as one delta), the
    others still stream."""

    call_format: str = ""
    """The family's own tool-call format, as its chat template writes it (``hermes``,
    ``qwen_xml``, ``glm45``, ``kimi``, ``mistral``, ``llama``, ``llama4``, ``harmony``,
    ...: the recognisers of :mod:`react_engine.parsing.formats`). A call the server left
    in the reply text is read with that recogniser first; ``""`` (unknown) tries them all."""

    source: str = ""
    """Where the entry's facts come from: the provider documentation URL, ``"user"`` for
    :meth:`CapabilityRegistry.register`, or the file it was loaded from."""

    note: str = ""
    """Why the entry says what it says, for ``--explain`` output and for reviewers."""


_BOOL_FIELDS: Final[tuple[str, ...]] = (
    "function_calling",
    "parallel_tool_calls",
    "tool_choice_required",
    "stop",
    "constrained_decoding",
    "reasoning",
    "reasoning_echo",
    "sampling",
    "stream_tools",
)
_STR_FIELDS: Final[tuple[str, ...]] = (
    "text_template",
    "constraint_style",
    "call_format",
    "source",
    "note",
)


def _capabilities(base: Capabilities, fields: Mapping[str, Any], where: str) -> Capabilities:
    """``base`` with ``fields`` applied, every name and value checked."""
    changes: dict[str, Any] = {}
    for name, value in fields.items():
        if name in _BOOL_FIELDS:
            if not isinstance(value, bool):
                raise ConfigurationError(f"{where}: {name!r} must be true or false, got {value!r}")
        elif name in _STR_FIELDS:
            if not isinstance(value, str):
                raise ConfigurationError(f"{where}: {name!r} must be a string, got {value!r}")
            if name == "text_template" and value not in TEXT_TEMPLATES:
                raise ConfigurationError(
                    f"{where}: text_template must be one of {', '.join(TEXT_TEMPLATES)}, "
                    f"got {value!r}"
                )
            if name == "constraint_style" and value not in CONSTRAINT_STYLES:
                raise ConfigurationError(
                    f"{where}: constraint_style must be one of {', '.join(CONSTRAINT_STYLES)}, "
                    f"got {value!r}"
                )
        else:
            known = ", ".join(_BOOL_FIELDS + _STR_FIELDS)
            raise ConfigurationError(f"{where}: unknown field {name!r} (known: {known})")
        changes[name] = value
    return dataclasses.replace(base, **changes)


# --- model names ---------------------------------------------------------------------------


def model_name_candidates(model: str) -> tuple[str, ...]:
    """The lowercase names a model is matched under, most specific first.

    Providers dress the same model differently: ``deepseek/deepseek-chat`` (OpenRouter),
    ``Qwen/Qwen2.5-7B-Instruct`` (Hugging Face), ``hf.co/bartowski/...-GGUF:Q4_K_M`` and
    ``llama3.1:8b`` (Ollama), ``/models/smollm2-135m-instruct.Q4_1.gguf`` (llama.cpp),
    ``ft:gpt-4o-mini-2024-07-18:org::id`` (OpenAI fine-tunes). Matching the full name, the
    last path segment and both without an Ollama ``:tag`` lets one pattern per family
    cover them all.
    """
    name = model.strip().lower()
    if name.startswith("ft:"):
        name = name[3:]
    out: list[str] = [name]
    base = re.split(r"[/\\]", name)[-1]
    if base and base != name:
        out.append(base)
    for candidate in list(out):
        if ":" in candidate:
            untagged = candidate.split(":", 1)[0]
            if untagged and untagged not in out:
                out.append(untagged)
    return tuple(out)


# --- the registry ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    pattern: str
    caps: Capabilities
    regex: re.Pattern[str]


def _entry(pattern: str, caps: Capabilities, where: str) -> _Entry:
    if not isinstance(pattern, str) or not pattern.strip():
        raise ConfigurationError(f"{where}: a pattern must be a non-empty string, got {pattern!r}")
    pattern = pattern.strip()
    return _Entry(pattern, caps, re.compile(fnmatch.translate(pattern.lower())))


_MAX_FOUND = 256
"""Model names whose lookup a registry keeps (a process that serves more starts over)."""


class CapabilityRegistry:
    """Ordered ``(glob pattern, Capabilities)`` entries; the first match wins.

    Patterns are shell globs (``*``, ``?``, ``[5-9]``) matched case-insensitively against
    every name in :func:`model_name_candidates`. The most recent addition wins:
    :meth:`register` and :meth:`load_file` put their entries in front of all earlier ones
    (within one file, the file's order holds), so user entries beat the shipped ones.

    Entries are replaced as a whole tuple on every change, so concurrent lookups always see
    a consistent list.
    """

    def __init__(
        self,
        entries: Iterable[tuple[str, Capabilities]] = (),
        *,
        default: Capabilities | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._default = default if default is not None else Capabilities()
        self._entries: tuple[_Entry, ...] = tuple(
            _entry(pattern, caps, "CapabilityRegistry") for pattern, caps in entries
        )
        self._servers: tuple[_ServerEntry, ...] = ()
        self._found: dict[str, tuple[tuple[_Entry, ...], Capabilities, Capabilities, str]] = {}
        """:meth:`lookup`'s answers per model name, each with the entries and default it
        was found in (an answer found before a change of either is not used)."""

    @property
    def default(self) -> Capabilities:
        """What a model that matches no pattern gets."""
        return self._default

    @property
    def entries(self) -> tuple[tuple[str, Capabilities], ...]:
        """The entries in lookup order."""
        return tuple((e.pattern, e.caps) for e in self._entries)

    def lookup_server(self, base_url: str | None) -> tuple[Mapping[str, Any], str] | None:
        """What the ``servers`` entries say about the server at ``base_url`` (the fields and
        the matching pattern), or ``None``. Server facts (does it constrain decoding, and
        how) hold whatever model it serves, so they override the model's entry."""
        if not base_url:
            return None
        url = base_url.strip().lower()
        for entry in self._servers:
            if entry.regex.match(url):
                return entry.fields, entry.pattern
        return None

    def lookup(self, model: str) -> tuple[Capabilities, str]:
        """The capabilities of ``model`` and the pattern that matched (``"default"`` if none).

        Every run looks its model up, and the shipped file has about a hundred patterns:
        the answer is kept per model name until the entries or the default change."""
        entries, default = self._entries, self._default
        found = self._found.get(model)
        if found is not None and found[0] is entries and found[1] is default:
            return found[2], found[3]
        caps, pattern = default, "default"
        names = model_name_candidates(model)
        for entry in entries:
            if any(entry.regex.match(name) for name in names):
                caps, pattern = entry.caps, entry.pattern
                break
        if len(self._found) >= _MAX_FOUND:
            self._found.clear()
        self._found[model] = (entries, default, caps, pattern)
        return caps, pattern

    def register(self, pattern: str, **fields: Any) -> Capabilities:
        """Put ``pattern`` in front of every existing entry and return its capabilities.

        Unspecified fields come from :attr:`default`, not from whatever entry the pattern
        would have matched before, so an entry means the same wherever it is registered.
        """
        base = dataclasses.replace(self._default, source="user", note="")
        caps = _capabilities(base, fields, f"register({pattern!r})")
        entry = _entry(pattern, caps, "register()")
        with self._lock:
            self._entries = (entry, *self._entries)
        return caps

    def load_file(self, path: str | os.PathLike[str]) -> None:
        """Put the entries of a JSON file (the shipped file's schema) in front of all others.

        A ``default`` object in the file replaces the registry's default. Raises
        :class:`~react_engine.errors.ConfigurationError` naming the file and the problem.
        """
        where = f"capabilities file {os.fspath(path)}"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"{where}: cannot read it: {exc}") from exc
        self._load_text(text, where, source=f"file: {os.fspath(path)}")

    def _load_text(self, text: str, where: str, *, source: str) -> None:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigurationError(f"{where}: not valid JSON: {exc}") from exc
        default, entries, servers = _parse_document(data, where, self._default, source=source)
        with self._lock:
            self._default = default
            self._entries = (*entries, *self._entries)
            self._servers = (*servers, *self._servers)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> CapabilityRegistry:
        """A registry holding only the entries of one file."""
        registry = cls()
        registry.load_file(path)
        return registry

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


@dataclass(frozen=True, slots=True)
class _ServerEntry:
    pattern: str
    fields: Mapping[str, Any]
    regex: re.Pattern[str]


_SERVER_FIELDS: Final = frozenset({"constrained_decoding", "constraint_style"})
"""What a server entry may say: facts of the server software, whatever model it serves."""


def _server_entries(servers: Any, where: str) -> list[_ServerEntry]:
    if not isinstance(servers, list):
        raise ConfigurationError(f"{where}: 'servers' must be a list")
    out: list[_ServerEntry] = []
    for index, item in enumerate(servers):
        at = f"{where}: servers[{index}]"
        if not isinstance(item, dict):
            raise ConfigurationError(f"{at}: each entry must be an object")
        fields = {k: v for k, v in item.items() if k not in ("base_urls", "source", "note")}
        patterns = item.get("base_urls")
        if not isinstance(patterns, list) or not patterns:
            raise ConfigurationError(f"{at}: needs 'base_urls' (a list of globs)")
        unknown = set(fields) - _SERVER_FIELDS
        if unknown:
            raise ConfigurationError(
                f"{at}: a server entry may set only {sorted(_SERVER_FIELDS)}, not {sorted(unknown)}"
            )
        _capabilities(Capabilities(), fields, at)  # checks names and values
        for pattern in patterns:
            if not isinstance(pattern, str) or not pattern.strip():
                raise ConfigurationError(f"{at}: a base_url pattern must be a non-empty string")
            regex = re.compile(fnmatch.translate(pattern.strip().lower()))
            out.append(_ServerEntry(pattern.strip(), dict(fields), regex))
    return out


def _parse_document(
    data: Any, where: str, default: Capabilities, *, source: str
) -> tuple[Capabilities, list[_Entry], list[_ServerEntry]]:
    """The default, model entries and server entries described by one document."""
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
    models = data.get("models", [])
    if not isinstance(models, list):
        raise ConfigurationError(f"{where}: 'models' must be a list")
    entries: list[_Entry] = []
    base = dataclasses.replace(default, source=source, note="")
    for index, item in enumerate(models):
        at = f"{where}: models[{index}]"
        if not isinstance(item, dict):
            raise ConfigurationError(f"{at}: each entry must be an object")
        fields = dict(item)
        patterns: Any = []
        if "pattern" in fields:
            patterns = [fields.pop("pattern")]
        if "patterns" in fields:
            patterns = fields.pop("patterns")
        if not isinstance(patterns, list) or not patterns:
            raise ConfigurationError(f"{at}: needs 'pattern' (a string) or 'patterns' (a list)")
        caps = _capabilities(base, fields, at)
        entries.extend(_entry(pattern, caps, at) for pattern in patterns)
    return default, entries, _server_entries(data.get("servers", []), where)


_default_registry: CapabilityRegistry | None = None
_default_registry_lock = threading.Lock()


def default_registry() -> CapabilityRegistry:
    """The process-wide registry: shipped entries plus ``REACT_ENGINE_CAPABILITIES``.

    Built on first use (so importing the module does no I/O). Entries registered on it
    apply to every agent that does not pass its own registry.
    """
    global _default_registry
    with _default_registry_lock:
        if _default_registry is None:
            _default_registry = CapabilityRegistry.from_default()
        return _default_registry


# --- learned decisions -----------------------------------------------------------------------


_CacheKey: TypeAlias = tuple[str, str]


def _cache_key(base_url: str | None, model: str) -> _CacheKey:
    return ((base_url or "").strip().rstrip("/"), model.strip())


class CapabilityCache:
    """What servers rejected at run time, per ``(base_url, model)``.

    After a server answers "does not support tools", the agent falls back to text and calls
    ``remember(base_url, model, function_calling=False)``; the next run against the same
    server skips the doomed request. The same model name can mean different things on
    different servers (DeepSeek-V3 with and without a tool parser), hence the base URL in
    the key.

    In memory by default. With a ``path`` every change is written to a small JSON file,
    atomically (temp file + :func:`os.replace`) so a crash never leaves half a file. Before
    each change the file is read again, so several processes sharing it keep each other's
    lessons. A file that cannot be read or parsed is ignored with a logged warning:
    forgetting a lesson costs one request, crashing a run costs the run. All methods are
    thread-safe.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._path = Path(path) if path is not None else None
        self._lock = threading.RLock()
        self._data: dict[_CacheKey, dict[str, bool]] = {}
        if self._path is not None:
            self._data = self._read() or {}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CapabilityCache:
        """A cache persisted to ``REACT_ENGINE_CAPABILITY_CACHE`` if set, else in memory."""
        path = (os.environ if env is None else env).get(CACHE_ENV, "").strip()
        return cls(path or None)

    @property
    def path(self) -> Path | None:
        """The file the cache is kept in, or ``None`` for memory only."""
        return self._path

    def get(self, base_url: str | None, model: str) -> dict[str, bool]:
        """The learned overrides for this server and model (a copy; empty if none)."""
        with self._lock:
            return dict(self._data.get(_cache_key(base_url, model), {}))

    def entries(self) -> list[tuple[str, str, dict[str, bool]]]:
        """Every ``(base_url, model, overrides)`` learned so far, for display."""
        with self._lock:
            return [(url, model, dict(o)) for (url, model), o in sorted(self._data.items())]

    def remember(self, base_url: str | None, model: str, **overrides: bool) -> None:
        """Record capability overrides, e.g. ``function_calling=False``, merged into any
        already known for this server and model."""
        for name, value in overrides.items():
            if name not in _BOOL_FIELDS:
                raise ConfigurationError(
                    f"CapabilityCache.remember: unknown capability {name!r} "
                    f"(known: {', '.join(_BOOL_FIELDS)})"
                )
            if not isinstance(value, bool):
                raise ConfigurationError(
                    f"CapabilityCache.remember: {name} must be a bool, got {value!r}"
                )
        if not overrides:
            return
        key = _cache_key(base_url, model)

        def change(data: dict[_CacheKey, dict[str, bool]]) -> None:
            data[key] = {**data.get(key, {}), **overrides}

        self._mutate(change)

    def forget(self, base_url: str | None, model: str) -> None:
        """Drop what was learned about this server and model."""
        key = _cache_key(base_url, model)
        self._mutate(lambda data: data.pop(key, None))

    def clear(self) -> None:
        """Drop everything learned (and empty the file, if there is one)."""
        self._mutate(lambda data: data.clear())

    def _mutate(self, change: Callable[[dict[_CacheKey, dict[str, bool]]], object]) -> None:
        with self._lock:
            data = self._data
            if self._path is not None:
                on_disk = self._read()
                if on_disk is not None:
                    data = on_disk
            data = {k: dict(v) for k, v in data.items()}
            change(data)
            self._data = data
            if self._path is not None:
                self._write(data)

    def _read(self) -> dict[_CacheKey, dict[str, bool]] | None:
        """The file's entries; ``{}`` if it does not exist, ``None`` if it is unusable."""
        assert self._path is not None
        try:
            text = self._path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            logger.warning("ignoring capability cache %s: cannot read it: %s", self._path, exc)
            return None
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
                raise ValueError("expected an object with an 'entries' list")
        except ValueError as exc:
            logger.warning("ignoring corrupt capability cache %s: %s", self._path, exc)
            return None
        data: dict[_CacheKey, dict[str, bool]] = {}
        for item in raw["entries"]:
            try:
                url, model, overrides = item["base_url"], item["model"], item["overrides"]
                if not (isinstance(url, str) and isinstance(model, str)):
                    raise TypeError("base_url and model must be strings")
                clean = {
                    k: v for k, v in overrides.items() if k in _BOOL_FIELDS and isinstance(v, bool)
                }
            except (KeyError, TypeError, AttributeError) as exc:
                logger.warning("ignoring a bad entry in capability cache %s: %s", self._path, exc)
                continue
            if clean:
                data[_cache_key(url, model)] = clean
        return data

    def _write(self, data: Mapping[_CacheKey, Mapping[str, bool]]) -> None:
        assert self._path is not None
        document = {
            "version": 1,
            "entries": [
                {"base_url": url, "model": model, "overrides": dict(sorted(o.items()))}
                for (url, model), o in sorted(data.items())
            ],
        }
        import tempfile  # with the first lesson written, not with the library

        tmp_name: str | None = None
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(
                "w",
                encoding="utf-8",
                dir=self._path.parent,
                prefix=f".{self._path.name}.",
                suffix=".tmp",
                delete=False,
            ) as fh:
                tmp_name = fh.name
                json.dump(document, fh, indent=2, ensure_ascii=False)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp_name, self._path)
            tmp_name = None
        except OSError as exc:
            logger.warning("could not save capability cache %s: %s", self._path, exc)
        finally:
            if tmp_name is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp_name)


_default_cache: CapabilityCache | None = None
_default_cache_lock = threading.Lock()


def default_cache() -> CapabilityCache:
    """The process-wide cache: in memory, or in ``REACT_ENGINE_CAPABILITY_CACHE`` if set.

    Built on first use, so the environment variable is read then, not at import.
    """
    global _default_cache
    with _default_cache_lock:
        if _default_cache is None:
            _default_cache = CapabilityCache.from_env()
        return _default_cache


def resolve(
    registry: CapabilityRegistry | None,
    cache: CapabilityCache | None,
    base_url: str | None,
    model: str,
) -> tuple[Capabilities, str]:
    """The capabilities to use for ``model`` on ``base_url``, and why.

    Learned overrides win over the registry. The reason is ``"registry: <pattern>"`` when
    the registry decided alone, or ``"learned: stop=False (registry: o3*)"`` when a learned
    override changed something. ``None`` means the process-wide default registry or cache.
    """
    registry = default_registry() if registry is None else registry
    cache = default_cache() if cache is None else cache
    caps, pattern = registry.lookup(model)
    server = registry.lookup_server(base_url)
    if server is not None:
        fields, server_pattern = server
        changes = {k: v for k, v in fields.items() if getattr(caps, k) != v}
        if changes:
            caps = dataclasses.replace(caps, **changes)
            pattern = f"{pattern}, server {server_pattern}"
    learned = cache.get(base_url, model)
    changed: dict[str, Any] = {k: v for k, v in sorted(learned.items()) if getattr(caps, k) != v}
    if not changed:
        return caps, f"registry: {pattern}"
    what = ", ".join(f"{k}={v}" for k, v in changed.items())
    return dataclasses.replace(caps, **changed), f"learned: {what} (registry: {pattern})"


# --- recognising rejections ---------------------------------------------------------------------


_PRIORITY: Final[tuple[RejectedParam, ...]] = (
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "stop",
    "temperature",
    "constrained_decoding",
    "reasoning_content",
)
_KINDS: Final[frozenset[str]] = frozenset(_PRIORITY)

# 400/422 are the usual answers; 404 and 501 come from servers that treat an unknown
# feature as a missing route; llama.cpp answers 500 for "tools param requires --jinja flag".
# Every rule below needs the body to name the parameter or feature as unsupported, so a
# 500 is only classified when its body says so. 401/403/429 and 502-504 never are.
_REJECTION_STATUSES: Final = frozenset({400, 404, 422, 500, 501})
_MAX_BODY: Final = 100_000


class _Pattern:
    """A ``regex`` pattern compiled on first use (``regex`` is imported then too), so that
    importing the library does not pay for patterns only a rejected request needs."""

    __slots__ = ("_compiled", "_source")

    def __init__(self, source: str) -> None:
        self._source = source
        self._compiled: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            import regex

            self._compiled = regex.compile(self._source)
        return getattr(self._compiled, name)


_PARAM = r"(tools|tool_choice|parallel_tool_calls|stop)"
_NOT_SUPPORTED = r"(?:not supported|unsupported|not allowed|not permitted|not enabled)"
_NEGATED_SUPPORT = r"(?:does not|doesn't|do not|don't|cannot|can't|unable to) support"

# Patterns over the lowercased error text. Each is linear: no nested quantifiers, and every
# "anything" gap is bounded and cannot cross a sentence.
# "Unsupported parameter: 'stop' ...", "Unrecognized request arguments supplied: a, b"
_RE_PARAM_LIST = _Pattern(
    r"(?:unsupported|unknown|unrecognized|unrecognised) (?:request )?"
    r"(?:parameter|param|argument|field)s?(?: supplied)?\s*:\s*([^.\n]{1,200})"
)
# one name of such a list; "'tools[0].function.strict'" names a nested field, not ``tools``
_RE_LIST_ITEM = _Pattern(r"\s*['\"`]?([a-z_]+)(?:['\"`]|\s|$)")
# "'parallel_tool_calls' is not supported", "tools is not supported with this model"
_RE_PARAM_NOT_SUPPORTED = _Pattern(
    rf"['\"`]?\b{_PARAM}\b['\"`]? (?:param(?:eter)? |argument )?(?:is|are) {_NOT_SUPPORTED}"
)
# llama.cpp without --jinja: "tools param requires --jinja flag"
_RE_PARAM_REQUIRES = _Pattern(rf"\b{_PARAM} param(?:eter)? requires\b")
# a Python server passing the request on as keyword arguments
_RE_UNEXPECTED_KWARG = _Pattern(rf"unexpected keyword argument ['\"]{_PARAM}['\"]")
# pydantic errors quoted as Python reprs (older vLLM) or as pydantic's own text
_RE_EXTRA_REPR = _Pattern(rf"'type': 'extra_forbidden', 'loc': \('body', '{_PARAM}'\)")
_RE_EXTRA_TEXT = _Pattern(rf"(?m)^{_PARAM}\n[ \t]+extra (?:inputs|fields) (?:are )?not permitted")
# some context saying the named thing is not accepted (used with a JSON "param" field)
_RE_UNSUPPORTED_CONTEXT = _Pattern(
    rf"{_NOT_SUPPORTED}|{_NEGATED_SUPPORT}|unrecognized|unknown parameter|"
    r"supported values are|extra_forbidden|extra inputs|requires --jinja"
)
# vLLM without --enable-auto-tool-choice: no tool calls at all under tool_choice "auto"
_RE_VLLM_AUTO = _Pattern(r"--enable-auto-tool-choice|\"auto\" tool choice requires")
_RE_PARALLEL = _Pattern(
    rf"parallel[ _](?:tool|function)[ _]calls?\b[^.\n]{{0,60}}?{_NOT_SUPPORTED}"
    rf"|{_NEGATED_SUPPORT} parallel[ _](?:tool|function)"
)
_RE_TOOL_CHOICE = _Pattern(
    rf"tool[ _]choice\b[^.\n]{{0,60}}?{_NOT_SUPPORTED}"
    rf"|{_NEGATED_SUPPORT} (?:the )?['\"`]?tool[ _]choice"
)
_TOOL_WORDS = (
    r"(?:tools?|tool[ _]use|tool[ _]calls?|tool[ _]calling|"
    r"function[ _]calling|function[ _]calls?|functions)"
)
_RE_TOOLS = _Pattern(
    rf"{_NEGATED_SUPPORT} (?:the )?{_TOOL_WORDS}\b"
    rf"|\b{_TOOL_WORDS}\b(?: is| are)? (?:not supported|unsupported|not enabled|not available)"
    r"|not supported for [^.\n]{0,60}?(?:function[ _]calling|tool[ _]use|tools)"
)
_RE_STOP = _Pattern(
    r"\bstop(?:[ _](?:sequences?|words?))?\b['\"`]?(?: param(?:eter)?)? (?:is|are) "
    rf"{_NOT_SUPPORTED}"
    rf"|{_NEGATED_SUPPORT} (?:the )?['\"`]?stop\b"
)

# OpenAI's reasoning models: "Unsupported value: 'temperature' does not support 0 with this
# model. Only the default (1) value is supported."
_RE_TEMPERATURE = _Pattern(
    r"\btemperature\b['\"`]?(?: param(?:eter)?)? (?:does not support|is not supported|"
    r"is unsupported|not supported)"
    r"|unsupported value:? ['\"`]?temperature\b"
)
# DeepSeek's thinking mode with tools: "Missing `reasoning_content` field in the assistant
# message at message index 2" (the reasoning must be sent back while the tool loop goes on)
_RE_REASONING_MISSING = _Pattern(
    r"\bmissing\b[^.\n]{0,20}?\breasoning_content\b"
    r"|\breasoning_content\b[^.\n]{0,40}?\b(?:is required|must be (?:passed|sent|provided|"
    r"included))"
)
# a server that takes no reasoning_content in messages: "('reasoning_content' was
# unexpected)", "reasoning_content ... not supported", "unknown field reasoning_content"
_RE_REASONING_REJECTED = _Pattern(
    rf"['\"`]?\breasoning_content\b['\"`]? (?:was unexpected|(?:is |are )?{_NOT_SUPPORTED})"
    r"|(?:unknown|unrecognized|unexpected|extra) (?:field|key|property|argument)s?:? "
    r"['\"`]?reasoning_content\b"
)


_CONSTRAINT_PARAMS: Final = frozenset(
    {"grammar", "response_format", "guided_grammar", "guided_json", "json_schema", "format"}
)
_RE_CONSTRAINT: Final = _Pattern(
    r"\b(grammar|response_format|guided_(?:grammar|json|decoding)|json_schema|structured output)"
    r"\b[^.\n]{0,80}?\b(not supported|unsupported|not allowed|unknown|unrecognized|"
    r"not permitted|invalid|extra)\b"
    r"|\b(unsupported|unknown|unrecognized|extra)\b[^.\n]{0,40}?\b(grammar|response_format|"
    r"guided_(?:grammar|json)|json_schema)\b"
)


def classify_rejection(status_code: int | None, body: str) -> RejectedParam | None:
    """Which request parameter a server rejected as unsupported, if its error says so.

    ``"tools"`` means the server (or model) takes no tools at all: fall back to the text
    protocol. The others name a parameter to drop before retrying, except
    ``"reasoning_content_missing"``: the server wants the reply's reasoning sent back on
    the assistant messages (DeepSeek's thinking mode with tools). ``None`` means the error
    is something else (a bad schema, a context overflow, auth, a rate limit...) and must
    not be "fixed" by dropping features. ``status_code=None`` (unknown) is read like a 400.

    The body may be JSON in any of the usual envelopes (OpenAI's ``{"error": {"message",
    "param"}}``, vLLM's ``{"object": "error", ...}``, FastAPI's ``{"detail": [...]}``,
    Ollama's ``{"error": "..."}``) or plain text. A JSON ``param`` field is trusted only
    when the message also says the parameter is unsupported: OpenAI sets ``param: "stop"``
    for a too-long stop list too, which is our bug and not a missing feature.
    """
    if status_code is not None and status_code not in _REJECTION_STATUSES:
        return None
    try:
        return _classify(body)
    except TimeoutError:
        # The patterns are linear, but the body is a stranger's text: a scan that takes
        # this long is not worth finishing, and an unclassified error is simply raised.
        logger.warning("an error body took too long to classify; leaving it unclassified")
        return None


SCAN_TIMEOUT: float = 0.5
"""Seconds each pattern may spend on one error body (``regex``'s ``timeout=``)."""


def _classify(body: str) -> RejectedParam | None:
    t = SCAN_TIMEOUT
    text, params, extra = _error_parts(body[:_MAX_BODY])
    text = text.lower()
    if _RE_REASONING_MISSING.search(text, timeout=t):
        return "reasoning_content_missing"
    found: set[str] = set()

    for match in _RE_PARAM_LIST.finditer(text, timeout=t):
        for item in match.group(1).split(","):
            name = _RE_LIST_ITEM.match(item, timeout=t)
            if name:
                found.add(name.group(1))
    for pattern in (
        _RE_PARAM_NOT_SUPPORTED,
        _RE_PARAM_REQUIRES,
        _RE_UNEXPECTED_KWARG,
        _RE_EXTRA_REPR,
        _RE_EXTRA_TEXT,
    ):
        found.update(m.group(1) for m in pattern.finditer(text, timeout=t))
    found.update(extra)
    if any(p in _KINDS for p in params) and _RE_UNSUPPORTED_CONTEXT.search(text, timeout=t):
        found.update(params)
    for kind in _PRIORITY:
        if kind in found:
            return kind

    if _RE_VLLM_AUTO.search(text, timeout=t):
        return "tools"
    if _RE_PARALLEL.search(text, timeout=t):
        return "parallel_tool_calls"
    if _RE_TOOL_CHOICE.search(text, timeout=t):
        return "tool_choice"
    if _RE_TOOLS.search(text, timeout=t):
        return "tools"
    if _RE_STOP.search(text, timeout=t):
        return "stop"
    if _RE_TEMPERATURE.search(text, timeout=t):
        return "temperature"
    if _RE_REASONING_REJECTED.search(text, timeout=t):
        return "reasoning_content"
    if found & _CONSTRAINT_PARAMS or _RE_CONSTRAINT.search(text, timeout=t):
        return "constrained_decoding"
    return None


def _error_parts(body: str) -> tuple[str, list[str], list[str]]:
    """From an error body: its messages joined, the ``param`` fields, and the top-level
    request fields that pydantic reported as forbidden extras."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body, [], []
    texts: list[str] = []
    params: list[str] = []
    extra: list[str] = []
    _walk_error(data, texts, params, extra, 0)
    return "\n".join(texts), params, extra


def _walk_error(
    node: Any, texts: list[str], params: list[str], extra: list[str], depth: int
) -> None:
    if depth > 12:
        return
    if isinstance(node, str):
        texts.append(node)
        stripped = node.strip()
        if stripped[:1] in ("{", "[") and depth < 12:
            try:
                nested = json.loads(stripped)
            except (ValueError, RecursionError):
                return
            _walk_error(nested, texts, params, extra, depth + 1)
    elif isinstance(node, list):
        for item in node:
            _walk_error(item, texts, params, extra, depth + 1)
    elif isinstance(node, dict):
        loc = node.get("loc")
        kind = str(node.get("type", "")) + " " + str(node.get("msg", ""))
        if (
            isinstance(loc, list)
            and len(loc) == 2
            and loc[0] == "body"
            and isinstance(loc[1], str)
            and re.search(r"extra_forbidden|extra (?:inputs|fields)", kind.lower())
        ):
            extra.append(loc[1])
        elif (
            isinstance(loc, list)
            and loc[-1:] == ["reasoning_content"]
            and re.search(r"extra_forbidden|extra (?:inputs|fields)", kind.lower())
        ):
            extra.append("reasoning_content")  # a message field: body.messages.N.<field>
        param = node.get("param")
        if isinstance(param, str):
            params.append(param)
        for key, value in node.items():
            if key in ("input", "loc", "param"):
                continue  # the request echoed back (tool descriptions are not errors)
            _walk_error(value, texts, params, extra, depth + 1)
