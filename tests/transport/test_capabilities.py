"""The capability registry, the learned-decision cache and the rejection classifier."""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from react_engine.errors import ConfigurationError, UserError
from react_engine.transport import capabilities as caps_module
from react_engine.transport.capabilities import (
    REGISTRY_ENV,
    Capabilities,
    CapabilityRegistry,
    default_registry,
    model_name_candidates,
)
from react_engine.transport.learned import (
    CACHE_ENV,
    CapabilityCache,
    default_cache,
    resolve,
)
from react_engine.transport.rejections import REACTIONS, classify_rejection


@pytest.fixture
def registry() -> CapabilityRegistry:
    return CapabilityRegistry.from_default(env={})


# --- the shipped file ----------------------------------------------------------------------


def shipped_document() -> dict[str, Any]:
    resource = importlib.resources.files("react_engine.transport").joinpath("capabilities.json")
    data: dict[str, Any] = json.loads(resource.read_text(encoding="utf-8"))
    return data


def test_shipped_file_is_package_data() -> None:
    # It sits inside the package, so a wheel carries it and importlib.resources finds it.
    resource = importlib.resources.files("react_engine.transport").joinpath("capabilities.json")
    assert resource.is_file()


def test_every_shipped_entry_cites_documentation_and_explains_itself() -> None:
    data = shipped_document()
    for entry in [data["default"], *data["models"]]:
        assert entry["source"].startswith("https://"), entry
        assert len(entry["note"]) > 20, entry


def test_shipped_patterns_are_lowercase_and_unique() -> None:
    patterns = [p for entry in shipped_document()["models"] for p in entry["patterns"]]
    assert all(p == p.lower() for p in patterns)
    assert len(patterns) == len(set(patterns))


def test_no_shipped_pattern_is_shadowed(registry: CapabilityRegistry) -> None:
    # The simplest name each pattern matches must land on that pattern's own entry,
    # otherwise an earlier, broader pattern hides it.
    for entry in shipped_document()["models"]:
        for pattern in entry["patterns"]:
            sample = pattern.replace("*", "").replace("[5-9]", "5").replace("?", "x")
            _, matched = registry.lookup(sample)
            assert matched in entry["patterns"], (pattern, sample, matched)


def test_shipped_default_matches_the_dataclass_defaults(registry: CapabilityRegistry) -> None:
    default = registry.default
    assert dataclasses.replace(default, source="", note="") == Capabilities()


# (model name as users write it, expected pattern, expected fields)
LOOKUPS: list[tuple[str, str, dict[str, Any]]] = [
    ("gpt-4o", "gpt-4o*", {"function_calling": True, "parallel_tool_calls": True, "stop": True}),
    ("gpt-4o-mini-2024-07-18", "gpt-4o*", {"tool_choice_required": True}),
    ("openai/gpt-4.1-mini", "gpt-4.1*", {"function_calling": True}),
    ("gpt-4-turbo", "gpt-4-turbo*", {"function_calling": True}),
    ("gpt-4", "gpt-4", {"parallel_tool_calls": False}),
    ("gpt-3.5-turbo-0125", "gpt-3.5-turbo*", {"function_calling": True}),
    ("ft:gpt-4o-mini-2024-07-18:acme::9abc", "gpt-4o*", {"function_calling": True}),
    ("chatgpt-4o-latest", "chatgpt-4o*", {"function_calling": False}),
    ("gpt-4o-mini-search-preview", "gpt-4o*search*", {"function_calling": False}),
    ("o1-mini", "o1-mini*", {"function_calling": False, "stop": False, "reasoning": True}),
    ("o1", "o1*", {"function_calling": True, "stop": False, "reasoning": True}),
    ("o3-mini", "o3*", {"stop": False, "parallel_tool_calls": False, "reasoning": True}),
    ("o4-mini", "o4*", {"stop": False}),
    ("gpt-5", "gpt-5*", {"function_calling": True, "stop": False, "reasoning": True}),
    ("gpt-5-nano", "gpt-5*", {"stop": False}),
    ("gpt-5-chat-latest", "gpt-5-chat*", {"function_calling": False, "reasoning": False}),
    ("deepseek-chat", "deepseek-chat*", {"function_calling": True, "reasoning": False}),
    ("deepseek/deepseek-chat", "deepseek-chat*", {"function_calling": True}),
    ("deepseek/deepseek-chat-v3-0324", "deepseek-chat*", {"function_calling": True}),
    (
        "deepseek-reasoner",
        "deepseek-reasoner*",
        {"function_calling": True, "reasoning": True, "reasoning_echo": True, "sampling": False},
    ),
    ("deepseek-r1:7b", "deepseek-r1*", {"function_calling": False, "reasoning": True}),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek-r1*", {"reasoning": True}),
    ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3*", {"function_calling": True}),
    ("qwen-plus", "qwen-plus*", {"function_calling": True, "parallel_tool_calls": True}),
    ("qwen-max-latest", "qwen-max*", {"tool_choice_required": False}),
    ("qwen-turbo", "qwen-turbo*", {"function_calling": True}),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2*", {"function_calling": True, "reasoning": False}),
    ("qwen2.5:7b", "qwen2*", {"function_calling": True}),
    ("openrouter/qwen/qwen3-8b", "qwen3*", {"function_calling": True, "reasoning": True}),
    ("qwen3:0.6b", "qwen3*", {"reasoning": True}),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-*instruct*", {"reasoning": False}),
    ("qwen3-coder-plus", "qwen3-coder*", {"function_calling": True, "reasoning": False}),
    ("Qwen/QwQ-32B", "qwq*", {"function_calling": True, "reasoning": True}),
    ("qwen:7b", "qwen", {"function_calling": False}),
    ("glm-4-plus", "glm-4*", {"function_calling": True, "tool_choice_required": False}),
    ("glm-4.5-air", "glm-4.[5-9]*", {"reasoning": True}),
    ("glm-4.6", "glm-4.[5-9]*", {"reasoning": True}),
    ("moonshot-v1-8k", "moonshot-v1*", {"function_calling": True, "tool_choice_required": False}),
    ("kimi-k2-0905-preview", "kimi-k2*", {"function_calling": True}),
    ("moonshotai/Kimi-K2-Instruct", "kimi-k2*", {"reasoning": False}),
    ("kimi-k2-thinking", "kimi-k2*thinking*", {"reasoning": True}),
    ("llama3.1:8b", "*llama3.1*", {"function_calling": True}),
    ("llama3.2", "*llama3.2*", {"function_calling": True}),
    ("llama3.3:70b", "*llama3.3*", {"function_calling": True}),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "*llama-3.1*", {"function_calling": True}),
    (
        "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M",
        "*llama-3.2*",
        {"function_calling": True},
    ),
    ("llama-3.3-70b-versatile", "*llama-3.3*", {"function_calling": True}),
    ("llama3.2-vision:11b", "*llama3.2-vision*", {"function_calling": False}),
    ("llama3", "llama3", {"function_calling": False}),
    ("llama3:8b-instruct-q4_0", "llama3", {"function_calling": False}),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "*llama-3-*", {"function_calling": False}),
    ("llama2:13b", "*llama2*", {"function_calling": False}),
    ("mistral-large-latest", "mistral*", {"function_calling": True, "tool_choice_required": True}),
    ("mistral-small-2409", "mistral*", {"parallel_tool_calls": True}),
    ("open-mistral-nemo", "open-mistral*", {"function_calling": True}),
    ("mistral:7b", "mistral*", {"function_calling": True}),
    (
        "mistralai/Mistral-7B-Instruct-v0.2",
        "*mistral-7b-instruct-v0.2*",
        {"function_calling": False},
    ),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "*mixtral-8x7b*", {"function_calling": False}),
    ("mixtral:8x7b", "mixtral:8x7b*", {"function_calling": False}),
    ("open-mixtral-8x22b", "open-mixtral*", {"function_calling": True}),
    ("magistral-medium-latest", "magistral*", {"reasoning": True}),
    ("gemma:2b", "gemma*", {"function_calling": False}),
    ("gemma2:9b", "gemma*", {"function_calling": False}),
    ("google/gemma-3-4b-it", "gemma*", {"function_calling": False}),
    ("smollm2-135m-instruct.Q4_1.gguf", "smollm2*", {"function_calling": True, "stop": True}),
    (
        "hf.co/bartowski/SmolLM2-135M-Instruct-GGUF",
        "smollm2*",
        {"function_calling": True, "parallel_tool_calls": False, "stop": True},
    ),
    ("/models/SmolLM2-1.7B-Instruct-Q8_0.gguf", "smollm2*", {"function_calling": True}),
    ("smollm:135m", "smollm*", {"function_calling": False}),
    ("HuggingFaceTB/SmolLM3-3B", "smollm3*", {"reasoning": True}),
    ("phi4-mini:3.8b", "phi4-mini*", {"function_calling": True}),
    ("phi4-mini-reasoning", "phi4-mini-reasoning*", {"function_calling": False}),
    ("microsoft/Phi-3-mini-4k-instruct", "phi*", {"function_calling": False}),
    ("phi4:14b", "phi*", {"function_calling": False}),
    ("some-new-model-2030", "default", {"function_calling": True, "stop": True}),
    ("my-azure-deployment", "default", {"parallel_tool_calls": False}),
]


@pytest.mark.parametrize(
    ("model", "pattern", "fields"), [pytest.param(*case, id=case[0]) for case in LOOKUPS]
)
def test_lookup(
    registry: CapabilityRegistry, model: str, pattern: str, fields: dict[str, Any]
) -> None:
    found, matched = registry.lookup(model)
    assert matched == pattern
    assert {name: getattr(found, name) for name in fields} == fields
    assert found.source.startswith("https://")


def test_lookup_ignores_case_and_surrounding_space(registry: CapabilityRegistry) -> None:
    assert registry.lookup("  GPT-4O-Mini ")[1] == "gpt-4o*"
    assert registry.lookup("DeepSeek-Reasoner")[1] == "deepseek-reasoner*"


def test_unknown_model_gets_the_default(registry: CapabilityRegistry) -> None:
    found, matched = registry.lookup("totally-unknown")
    assert matched == "default"
    assert found is registry.default


def test_model_name_candidates() -> None:
    assert model_name_candidates("openrouter/qwen/qwen3-8b") == (
        "openrouter/qwen/qwen3-8b",
        "qwen3-8b",
    )
    assert model_name_candidates("llama3.1:8b") == ("llama3.1:8b", "llama3.1")
    assert model_name_candidates("hf.co/org/Model-GGUF:Q4_K_M") == (
        "hf.co/org/model-gguf:q4_k_m",
        "model-gguf:q4_k_m",
        "hf.co/org/model-gguf",
        "model-gguf",
    )
    assert model_name_candidates("ft:gpt-4o:org::id") == ("gpt-4o:org::id", "gpt-4o")
    assert "smollm2.gguf" in model_name_candidates(r"C:\models\smollm2.gguf")


def test_capabilities_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Capabilities().stop = False  # type: ignore[misc]


# --- user entries --------------------------------------------------------------------------


def test_register_takes_priority_and_inherits_the_default(registry: CapabilityRegistry) -> None:
    registered = registry.register("gpt-4o*", stop=False)
    found, matched = registry.lookup("gpt-4o")
    assert matched == "gpt-4o*"
    assert found is registered
    assert found.stop is False
    # unspecified fields come from the default, not from the shipped gpt-4o* entry
    assert found.parallel_tool_calls is registry.default.parallel_tool_calls
    assert found.source == "user"


def test_latest_registration_wins(registry: CapabilityRegistry) -> None:
    registry.register("my-model*", function_calling=False)
    registry.register("my-model-v2*", function_calling=True, text_template="zh")
    assert registry.lookup("my-model-v2-large")[0].text_template == "zh"
    assert registry.lookup("my-model-v1")[0].function_calling is False
    assert registry.entries[0][0] == "my-model-v2*"


@pytest.mark.parametrize(
    ("pattern", "fields", "message"),
    [
        ("x*", {"function_call": True}, "unknown field 'function_call'"),
        ("x*", {"stop": "no"}, "'stop' must be true or false"),
        ("x*", {"stop": 0}, "'stop' must be true or false"),
        ("x*", {"text_template": "yaml"}, "text_template must be one of"),
        ("x*", {"note": 3}, "'note' must be a string"),
        ("  ", {}, "non-empty string"),
    ],
)
def test_register_rejects_bad_input(
    registry: CapabilityRegistry, pattern: str, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        registry.register(pattern, **fields)
    assert isinstance(info.value, UserError)


def write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_load_file_puts_its_entries_first(registry: CapabilityRegistry, tmp_path: Path) -> None:
    path = write(
        tmp_path / "caps.json",
        {
            "version": 1,
            "models": [
                {"patterns": ["gpt-4o-mini*"], "stop": False, "note": "proxy strips stop"},
                {"patterns": ["gpt-4o*", "corp-*"], "function_calling": False},
            ],
        },
    )
    registry.load_file(path)
    mini, matched = registry.lookup("gpt-4o-mini")
    assert (matched, mini.stop, mini.note) == ("gpt-4o-mini*", False, "proxy strips stop")
    assert mini.source == f"file: {path}"
    assert registry.lookup("gpt-4o")[0].function_calling is False
    assert registry.lookup("corp-llm")[1] == "corp-*"
    # shipped entries remain behind
    assert registry.lookup("deepseek-reasoner")[1] == "deepseek-reasoner*"


def test_load_file_default_replaces_the_default(tmp_path: Path) -> None:
    path = write(
        tmp_path / "caps.json",
        {
            "default": {"function_calling": False, "stop": False, "source": "https://x.test"},
            "models": [{"patterns": ["tooly*"], "function_calling": True}],
        },
    )
    registry = CapabilityRegistry()
    registry.load_file(path)
    unknown, matched = registry.lookup("whatever")
    assert (matched, unknown.function_calling, unknown.stop) == ("default", False, False)
    tooly = registry.lookup("tooly-7b")[0]
    # entries inherit the file's default
    assert (tooly.function_calling, tooly.stop) == (True, False)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        ([], "top level must be a JSON object"),
        ({"models": [], "extra": 1}, "unknown top-level key"),
        ({"version": 2, "models": []}, "unsupported version 2"),
        ({"models": {}}, "'models' must be a list"),
        ({"default": [], "models": []}, "'default' must be an object"),
        ({"models": ["gpt-4o*"]}, r"models\[0\]: each entry must be an object"),
        ({"models": [{"stop": False}]}, r"models\[0\]: needs 'patterns'"),
        ({"models": [{"patterns": []}]}, r"models\[0\]: needs 'patterns'"),
        ({"models": [{"patterns": "gpt*"}]}, r"models\[0\]: needs 'patterns'"),
        ({"models": [{"patterns": [3]}]}, "pattern must be a non-empty string"),
        ({"models": [{"patterns": ["a"], "fc": True}]}, r"models\[0\]: unknown field 'fc'"),
        ({"models": [{"patterns": ["a"], "stop": "yes"}]}, "'stop' must be true or false"),
        ({"default": {"stop": None}}, "default: 'stop' must be true or false"),
    ],
)
def test_bad_files_name_the_path_and_the_problem(
    tmp_path: Path, content: Any, problem: str
) -> None:
    path = write(tmp_path / "bad.json", content)
    registry = CapabilityRegistry()
    with pytest.raises(ConfigurationError, match=problem) as info:
        registry.load_file(path)
    assert str(path) in str(info.value)
    assert registry.entries == ()  # nothing half-loaded


def test_a_file_nested_past_the_parser_s_depth_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000, encoding="utf-8")
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        CapabilityRegistry().load_file(path)


def test_missing_file_is_a_configuration_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigurationError, match="cannot read it") as info:
        CapabilityRegistry().load_file(missing)
    assert str(missing) in str(info.value)


def test_env_var_loads_an_override_file(tmp_path: Path) -> None:
    path = write(
        tmp_path / "o.json",
        {"models": [{"patterns": ["deepseek-reasoner"], "function_calling": True}]},
    )
    registry = CapabilityRegistry.from_default(env={REGISTRY_ENV: str(path)})
    found, matched = registry.lookup("deepseek-reasoner")
    assert (matched, found.function_calling) == ("deepseek-reasoner", True)


def test_env_var_naming_a_missing_file_fails_loudly(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"nope\.json"):
        CapabilityRegistry.from_default(env={REGISTRY_ENV: str(tmp_path / "nope.json")})


def test_default_registry_is_shared_and_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(caps_module, "_default_registry", None)
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    first = default_registry()
    assert default_registry() is first
    assert first.lookup("gpt-4o")[1] == "gpt-4o*"


# --- learned decisions ---------------------------------------------------------------------

URL = "http://localhost:8000/v1"


def test_cache_in_memory() -> None:
    cache = CapabilityCache()
    assert cache.path is None
    assert cache.get(URL, "m") == {}
    cache.remember(URL, "m", function_calling=False)
    cache.remember(URL + "/", " m ", stop=False)  # same server, same model
    assert cache.get(URL, "m") == {"function_calling": False, "stop": False}
    assert cache.get(URL, "other") == {}
    assert cache.get("http://elsewhere/v1", "m") == {}
    assert cache.entries() == [(URL, "m", {"function_calling": False, "stop": False})]
    cache.forget(URL, "m")
    assert cache.get(URL, "m") == {}
    cache.forget(URL, "m")  # forgetting twice is fine


def test_cache_get_returns_a_copy() -> None:
    cache = CapabilityCache()
    cache.remember(None, "m", stop=False)
    cache.get(None, "m")["stop"] = True
    assert cache.get(None, "m") == {"stop": False}
    assert cache.get("", "m") == {"stop": False}  # None means the default endpoint


def test_cache_clear() -> None:
    cache = CapabilityCache()
    cache.remember(URL, "a", stop=False)
    cache.remember(URL, "b", parallel_tool_calls=False)
    cache.clear()
    assert cache.entries() == []


def test_remember_nothing_is_a_no_op(tmp_path: Path) -> None:
    cache = CapabilityCache(tmp_path / "c.json")
    cache.remember(URL, "m")
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"tools": False}, "tools=False"),
        ({"text_template": "zh"}, "text_template='zh'"),
        ({"stop": "false"}, "stop='false'"),
    ],
)
def test_remember_rejects_bad_overrides(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        CapabilityCache().remember(URL, "m", **overrides)


def test_cache_persists_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "cache.json"
    first = CapabilityCache(path)
    first.remember(URL, "qwen3:8b", function_calling=False)
    first.remember("https://api.example.test/v1", "o3-mini", stop=False)
    second = CapabilityCache(path)
    assert second.get(URL, "qwen3:8b") == {"function_calling": False}
    assert second.get("https://api.example.test/v1", "o3-mini") == {"stop": False}
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["version"] == 1
    assert {"base_url": URL, "model": "qwen3:8b", "overrides": {"function_calling": False}} in (
        document["entries"]
    )
    # no temp files left; the (empty) lock file stays
    assert sorted(p.name for p in path.parent.iterdir()) == [".cache.json.lock", "cache.json"]


def test_instances_sharing_a_file_keep_each_others_lessons(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    one, two = CapabilityCache(path), CapabilityCache(path)
    one.remember(URL, "a", stop=False)
    two.remember(URL, "b", function_calling=False)
    assert CapabilityCache(path).entries() == [
        (URL, "a", {"stop": False}),
        (URL, "b", {"function_calling": False}),
    ]
    two.forget(URL, "a")
    assert CapabilityCache(path).get(URL, "a") == {}


@pytest.mark.parametrize(
    "content",
    [
        "{corrupt",
        "[]",
        '{"entries": 3}',
        "\ud800".encode("utf-8", "surrogatepass").decode("latin-1"),
        "[" * 100_000,  # past the JSON parser's depth: a RecursionError
    ],
)
def test_corrupt_cache_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str
) -> None:
    path = tmp_path / "cache.json"
    path.write_text(content, encoding="latin-1")
    with caplog.at_level(logging.WARNING, logger="react_engine.transport.learned"):
        cache = CapabilityCache(path)
    assert cache.entries() == []
    assert "capability cache" in caplog.text
    assert str(path) in caplog.text
    # the next lesson replaces the corrupt file with a good one
    cache.remember(URL, "m", stop=False)
    assert CapabilityCache(path).get(URL, "m") == {"stop": False}


def test_bad_cache_entries_are_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(
        tmp_path / "cache.json",
        {
            "version": 1,
            "entries": [
                {"base_url": URL, "model": "good", "overrides": {"stop": False}},
                {"base_url": URL, "model": "no-overrides"},
                {"base_url": 1, "model": "bad-url", "overrides": {"stop": False}},
                {"base_url": URL, "model": "junk", "overrides": {"nope": False, "stop": "x"}},
                "not an object",
            ],
        },
    )
    with caplog.at_level(logging.WARNING, logger="react_engine.transport.learned"):
        cache = CapabilityCache(path)
    assert cache.entries() == [(URL, "good", {"stop": False})]
    assert "bad entry" in caplog.text


def test_unreadable_cache_path_never_crashes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "a-directory"
    path.mkdir()
    with caplog.at_level(logging.WARNING, logger="react_engine.transport.learned"):
        cache = CapabilityCache(path)
        cache.remember(URL, "m", stop=False)  # cannot be saved: still learned in memory
    assert cache.get(URL, "m") == {"stop": False}
    assert "could not save" in caplog.text


def test_cache_is_thread_safe(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    cache = CapabilityCache(path)

    def learn(worker: int) -> None:
        for i in range(20):
            cache.remember(URL, f"model-{worker}-{i}", function_calling=False)
            cache.remember(URL, f"model-{worker}-{i}", stop=False)

    threads = [threading.Thread(target=learn, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reloaded = CapabilityCache(path)
    assert len(reloaded.entries()) == 160
    assert all(o == {"function_calling": False, "stop": False} for *_, o in reloaded.entries())


def test_cache_from_env(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    assert CapabilityCache.from_env({CACHE_ENV: str(path)}).path == path
    assert CapabilityCache.from_env({CACHE_ENV: "off"}).path is None
    assert CapabilityCache.from_env({CACHE_ENV: " OFF "}).path is None


def test_default_cache_reads_the_env_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c.json"))
    first = default_cache()
    assert default_cache() is first
    assert first.path == tmp_path / "c.json"


# --- resolve -----------------------------------------------------------------------------------


def test_resolve_from_the_registry(registry: CapabilityRegistry) -> None:
    found, reason = resolve(registry, CapabilityCache(), URL, "gpt-4o")
    assert reason == "registry: gpt-4o*"
    assert found == registry.lookup("gpt-4o")[0]


def test_resolve_applies_learned_overrides(registry: CapabilityRegistry) -> None:
    cache = CapabilityCache()
    cache.remember(URL, "qwen2.5:7b", function_calling=False, stop=False)
    found, reason = resolve(registry, cache, URL, "qwen2.5:7b")
    assert (found.function_calling, found.stop) == (False, False)
    assert reason == "learned: function_calling=False, stop=False (registry: qwen2*)"
    # other servers with the same model are not affected
    assert resolve(registry, cache, "http://other/v1", "qwen2.5:7b")[1] == "registry: qwen2*"


def test_resolve_ignores_overrides_that_change_nothing(registry: CapabilityRegistry) -> None:
    cache = CapabilityCache()
    cache.remember(URL, "o3-mini", stop=False)  # the registry already says so
    assert resolve(registry, cache, URL, "o3-mini")[1] == "registry: o3*"


def test_a_classified_rejection_is_learned(registry: CapabilityRegistry) -> None:
    cache = CapabilityCache()
    body = '{"error":"registry.ollama.ai/library/gemma:2b does not support tools"}'
    kind = classify_rejection(400, body)
    assert kind == "tools"
    cache.remember("http://localhost:11434/v1", "my-gemma", **{REACTIONS[kind].capability: False})
    found, reason = resolve(registry, cache, "http://localhost:11434/v1", "my-gemma")
    assert found.function_calling is False
    assert reason.startswith("learned: function_calling=False")


def test_every_rejection_kind_has_a_reaction() -> None:
    assert set(REACTIONS) == {
        "tools",
        "stop",
        "tool_choice",
        "parallel_tool_calls",
        "constrained_decoding",
        "temperature",
        "reasoning_content",
        "reasoning_content_missing",
        "stream_tools",
    }
    for reaction in REACTIONS.values():
        CapabilityCache().remember(URL, "m", **{reaction.capability: reaction.value})


# --- classify_rejection -------------------------------------------------------------------------


def openai_error(message: str, param: str | None, code: str | None) -> str:
    """OpenAI's error envelope (also used by Azure, DeepSeek, Moonshot, DashScope...)."""
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return json.dumps({"error": error})


# (id, status, body as the server sends it, expected)
REJECTIONS: list[tuple[str, int | None, str, str | None]] = [
    # OpenAI: reasoning models
    (
        "openai-stop",
        400,
        openai_error(
            "Unsupported parameter: 'stop' is not supported with this model.",
            "stop",
            "unsupported_parameter",
        ),
        "stop",
    ),
    (
        "openai-tools",
        400,
        openai_error(
            "Unsupported parameter: 'tools' is not supported with this model.",
            "tools",
            "unsupported_parameter",
        ),
        "tools",
    ),
    (
        "openai-parallel-tool-calls",
        400,
        openai_error(
            "Unsupported parameter: 'parallel_tool_calls' is not supported with this model.",
            "parallel_tool_calls",
            "unsupported_parameter",
        ),
        "parallel_tool_calls",
    ),
    (
        "openai-tool-choice-values",
        400,
        openai_error(
            "Invalid value: 'required'. Supported values are: 'none' and 'auto'.",
            "tool_choice",
            "invalid_value",
        ),
        "tool_choice",
    ),
    (
        "openai-message-without-param",
        400,
        '{"error": {"message": "Unsupported parameter: \'stop\' is not supported with this '
        'model.", "type": "invalid_request_error"}}',
        "stop",
    ),
    # Azure OpenAI with an API version older than tools
    (
        "azure-unrecognized-tools",
        400,
        openai_error("Unrecognized request argument supplied: tools", None, None),
        "tools",
    ),
    (
        "azure-unrecognized-several",
        400,
        openai_error(
            "Unrecognized request arguments supplied: parallel_tool_calls, tools", None, None
        ),
        "tools",
    ),
    (
        "unknown-parameter",
        400,
        openai_error("Unknown parameter: 'parallel_tool_calls'.", "parallel_tool_calls", None),
        "parallel_tool_calls",
    ),
    # DeepSeek
    (
        "deepseek-reasoner-function-calling",
        400,
        openai_error(
            "deepseek-reasoner does not support Function Calling", None, "invalid_request_error"
        ),
        "tools",
    ),
    # Ollama, OpenAI-compatible endpoint and native endpoint
    (
        "ollama-openai-endpoint",
        400,
        '{"error":{"message":"registry.ollama.ai/library/gemma:2b does not support tools",'
        '"type":"api_error","param":null,"code":null}}',
        "tools",
    ),
    (
        "ollama-native-endpoint",
        400,
        '{"error":"registry.ollama.ai/library/llama3:latest does not support tools"}',
        "tools",
    ),
    (
        "ollama-unknown-status",
        None,
        '{"error":"registry.ollama.ai/library/gemma:2b does not support tools"}',
        "tools",
    ),
    # vLLM started without --enable-auto-tool-choice: no tool calls under "auto" at all
    (
        "vllm-auto-tool-choice-old-envelope",
        400,
        '{"object":"error","message":"\\"auto\\" tool choice requires '
        '--enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError",'
        '"param":null,"code":400}',
        "tools",
    ),
    (
        "vllm-auto-tool-choice-new-envelope",
        400,
        '{"error":{"message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and '
        '--tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}}',
        "tools",
    ),
    (
        "vllm-extra-forbidden-repr",
        400,
        "{\"object\":\"error\",\"message\":\"[{'type': 'extra_forbidden', 'loc': ('body', "
        "'parallel_tool_calls'), 'msg': 'Extra inputs are not permitted', 'input': False}]\","
        '"type":"BadRequestError","param":null,"code":400}',
        "parallel_tool_calls",
    ),
    # llama.cpp server without --jinja (500 in the versions that raise it as an exception)
    (
        "llama-cpp-tools-jinja-500",
        500,
        '{"error":{"code":500,"message":"tools param requires --jinja flag",'
        '"type":"server_error"}}',
        "tools",
    ),
    (
        "llama-cpp-tools-jinja-400",
        400,
        '{"error":{"code":400,"message":"tools param requires --jinja flag",'
        '"type":"invalid_request_error"}}',
        "tools",
    ),
    (
        "llama-cpp-tool-choice-jinja",
        500,
        '{"error":{"code":500,"message":"tool_choice param requires --jinja flag",'
        '"type":"server_error"}}',
        "tool_choice",
    ),
    # FastAPI / pydantic servers (custom proxies) that forbid unknown fields
    (
        "fastapi-422-extra-tools",
        422,
        json.dumps(
            {
                "detail": [
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", "tools"],
                        "msg": "Extra inputs are not permitted",
                        "input": [{"type": "function", "function": {"name": "get_weather"}}],
                    }
                ]
            }
        ),
        "tools",
    ),
    (
        "fastapi-422-extra-stop-pydantic-v1",
        422,
        json.dumps(
            {
                "detail": [
                    {
                        "loc": ["body", "stop"],
                        "msg": "extra fields not permitted",
                        "type": "value_error.extra",
                    }
                ]
            }
        ),
        "stop",
    ),
    (
        "mistral-style-nested-detail",
        422,
        json.dumps(
            {
                "object": "error",
                "message": {
                    "detail": [
                        {
                            "type": "extra_forbidden",
                            "loc": ["body", "parallel_tool_calls"],
                            "msg": "Extra inputs are not permitted",
                            "input": False,
                        }
                    ]
                },
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        ),
        "parallel_tool_calls",
    ),
    (
        "pydantic-plain-text",
        400,
        "1 validation error for ChatCompletionRequest\nstop\n  Extra inputs are not permitted "
        "[type=extra_forbidden, input_value=['Observation:'], input_type=list]",
        "stop",
    ),
    (
        "python-server-unexpected-kwarg",
        500,
        '{"error":{"message":"create_chat_completion() got an unexpected keyword argument '
        '\'parallel_tool_calls\'","type":"internal_server_error"}}',
        "parallel_tool_calls",
    ),
    # Plain-text and other OpenAI-compatible servers
    ("plain-tool-use", 400, "Tool use is not supported", "tools"),
    ("plain-tool-use-501", 501, "Tool use is not supported for this model.", "tools"),
    (
        "tool-choice-required",
        400,
        '{"error":{"message":"tool_choice \'required\' is not supported",'
        '"type":"invalid_request_error"}}',
        "tool_choice",
    ),
    (
        "quoted-parallel",
        400,
        '{"error":{"message":"\'parallel_tool_calls\' is not supported",'
        '"type":"invalid_request_error"}}',
        "parallel_tool_calls",
    ),
    (
        "parallel-phrase",
        400,
        '{"error":{"message":"This model does not support parallel tool calls."}}',
        "parallel_tool_calls",
    ),
    (
        "function-calling-not-supported-for",
        400,
        openai_error(
            "meta-llama/Llama-2-70b-chat-hf is not supported for JSON mode/function calling",
            "model",
            "constraints_model",
        ),
        "tools",
    ),
    (
        "tool-calling-phrase",
        400,
        '{"error":{"message":"tool calling is not supported with this model"}}',
        "tools",
    ),
    (
        "stop-phrase",
        400,
        '{"error":{"message":"stop sequences are not supported for this model"}}',
        "stop",
    ),
    # --- reasoning models: temperature, reasoning_content both ways ------------------------
    (
        "openai-temperature",
        400,
        openai_error(
            "Unsupported value: 'temperature' does not support 0.2 with this model. Only the "
            "default (1) value is supported.",
            "temperature",
            "unsupported_value",
        ),
        "temperature",
    ),
    (
        "openai-temperature-parameter",
        400,
        openai_error(
            "Unsupported parameter: 'temperature' is not supported with this model.",
            "temperature",
            "unsupported_parameter",
        ),
        "temperature",
    ),
    (
        "deepseek-missing-reasoning-content",
        400,
        openai_error(
            "Missing `reasoning_content` field in the assistant message at message index 2. "
            "For more information, please refer to "
            "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
            None,
            "invalid_request_error",
        ),
        "reasoning_content_missing",
    ),
    (
        "openai-reasoning-content-unexpected",
        400,
        openai_error(
            "Additional properties are not allowed ('reasoning_content' was unexpected) - "
            "'messages.2'",
            "messages.[2]",
            None,
        ),
        "reasoning_content",
    ),
    (
        "vllm-reasoning-content-extra",
        400,
        json.dumps(
            {
                "detail": [
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", "messages", 2, "reasoning_content"],
                        "msg": "Extra inputs are not permitted",
                        "input": "I need the weather.",
                    }
                ]
            }
        ),
        "reasoning_content",
    ),
    # --- not a missing feature: never fall back for these --------------------------------
    (
        "reasoning-content-in-a-tool-result",
        400,
        openai_error(
            "Invalid 'messages[3].content': string too long. The tool said: reasoning_content "
            "is fine",
            "messages[3].content",
            "string_above_max_length",
        ),
        None,
    ),
    (
        "openai-system-role-o1-mini",
        400,
        openai_error(
            "Unsupported value: 'messages[0].role' does not support 'system' with this model.",
            "messages[0].role",
            "unsupported_value",
        ),
        None,
    ),
    (
        "openai-stop-too-long-is-our-bug",
        400,
        openai_error(
            "Invalid 'stop': array too long. Expected an array with maximum length 4, but got "
            "an array with length 5 instead.",
            "stop",
            "array_above_max_length",
        ),
        None,
    ),
    (
        "openai-bad-tool-name-is-our-bug",
        400,
        openai_error(
            "Invalid 'tools[0].function.name': string does not match pattern. Expected a "
            "string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
            "tools[0].function.name",
            "invalid_value",
        ),
        None,
    ),
    (
        "openai-unknown-nested-tool-field",
        400,
        openai_error(
            "Unknown parameter: 'tools[0].function.strict_mode'.",
            "tools[0].function.strict_mode",
            "unknown_parameter",
        ),
        None,
    ),
    (
        "openai-tool-choice-without-tools",
        400,
        openai_error(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
            "specified.",
            "tool_choice",
            None,
        ),
        None,
    ),
    (
        "openai-tool-message-order",
        400,
        openai_error(
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
            "message with 'tool_calls'.",
            "messages.[2].role",
            None,
        ),
        None,
    ),
    (
        "openai-context-length",
        400,
        openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130412 tokens (129000 in the messages, 1412 in the functions). "
            "Please reduce the length of the messages or functions.",
            "messages",
            "context_length_exceeded",
        ),
        None,
    ),
    (
        "deepseek-successive-messages",
        400,
        openai_error(
            "deepseek-reasoner does not support successive user or assistant messages "
            "(messages[1] and messages[2] in your input). You should interleave the "
            "user/assistant messages in the message sequence.",
            None,
            "invalid_request_error",
        ),
        None,
    ),
    (
        "ollama-model-not-found",
        404,
        '{"error":{"message":"model \\"llama3.9\\" not found, try pulling it first",'
        '"type":"api_error","param":null,"code":null}}',
        None,
    ),
    (
        "fastapi-422-nested-extra-field",
        422,
        json.dumps(
            {
                "detail": [
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", "tools", 0, "function", "strict"],
                        "msg": "Extra inputs are not permitted",
                        "input": True,
                    }
                ]
            }
        ),
        None,
    ),
    (
        "fastapi-422-missing-messages",
        422,
        json.dumps(
            {
                "detail": [
                    {
                        "type": "missing",
                        "loc": ["body", "messages"],
                        "msg": "Field required",
                        "input": {"model": "x", "tools": []},
                    }
                ]
            }
        ),
        None,
    ),
    (
        "tool-description-echoed-in-input-is-not-an-error",
        422,
        json.dumps(
            {
                "detail": [
                    {
                        "type": "missing",
                        "loc": ["body", "model"],
                        "msg": "Field required",
                        "input": {"tools": [{"description": "Tool use is not supported here"}]},
                    }
                ]
            }
        ),
        None,
    ),
    ("tool-not-found", 400, '{"error":{"message":"Tool \'get_weather\' not found"}}', None),
    ("internal-error", 500, '{"error":{"code":500,"message":"Internal server error"}}', None),
    ("html-404", 404, "<html><body><h1>404 Not Found</h1></body></html>", None),
    ("empty-body", 400, "", None),
    ("json-null", 400, "null", None),
    # statuses that never mean "unsupported parameter", whatever the body says
    ("auth", 401, openai_error("Incorrect API key provided: tools", None, "invalid_api_key"), None),
    ("forbidden", 403, "Tool use is not supported", None),
    ("rate-limit", 429, "Rate limit reached. Tool use is not supported", None),
    ("bad-gateway", 502, "tools param requires --jinja flag", None),
    (
        "unavailable",
        503,
        '{"error":"registry.ollama.ai/library/gemma does not support tools"}',
        None,
    ),
]


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [pytest.param(status, body, expected, id=i) for i, status, body, expected in REJECTIONS],
)
def test_classify_rejection(status: int | None, body: str, expected: str | None) -> None:
    assert classify_rejection(status, body) == expected


def test_classify_rejection_on_huge_or_deep_bodies() -> None:
    assert classify_rejection(400, "[" * 200_000) is None
    assert classify_rejection(400, "x" * 1_000_000 + " does not support tools") is None
    deep = '{"error": ' * 50 + '"does not support tools"' + "}" * 50
    assert classify_rejection(400, deep) in (None, "tools")  # depth-limited, never raises
    nested = json.dumps({"error": {"message": json.dumps({"error": "does not support tools"})}})
    assert classify_rejection(400, nested) == "tools"


def test_server_entries_say_which_servers_constrain() -> None:
    registry = CapabilityRegistry.from_default(env={})
    cache = CapabilityCache()
    # The model's entry (smollm2: llama.cpp grammar) is overridden by what serves it.
    caps, why = resolve(registry, cache, "http://localhost:11434/v1", "smollm2:135m")
    assert caps.constrained_decoding and caps.constraint_style == "json_schema"
    assert "server http://localhost:11434/*" in why
    caps, _ = resolve(registry, cache, "https://api.openai.com/v1", "gpt-4o-mini")
    assert caps.constrained_decoding and caps.constraint_style == "json_schema"
    caps, _ = resolve(registry, cache, "https://api.deepseek.com/v1", "deepseek-chat")
    assert not caps.constrained_decoding
    # An unknown server leaves the model's entry alone; a learned rejection still wins.
    caps, why = resolve(registry, cache, "http://127.0.0.1:40123/v1", "smollm2-135m-instruct")
    assert caps.constraint_style == "llama.cpp" and "server" not in why
    cache.remember("http://localhost:11434/v1", "smollm2:135m", constrained_decoding=False)
    caps, _ = resolve(registry, cache, "http://localhost:11434/v1", "smollm2:135m")
    assert not caps.constrained_decoding


def test_server_entries_are_checked(tmp_path: Path) -> None:
    bad = [
        {"servers": [{"base_urls": ["http://x/*"], "function_calling": False}]},
        {"servers": [{"constrained_decoding": True}]},
        {"servers": [{"base_urls": ["http://x/*"], "constraint_style": "magic"}]},
        {"servers": {}},
    ]
    for doc in bad:
        path = tmp_path / "caps.json"
        path.write_text(json.dumps(doc))
        with pytest.raises(ConfigurationError):
            CapabilityRegistry().load_file(path)


def test_an_error_body_too_costly_to_scan_is_left_unclassified(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The rejection patterns run with ``regex``'s timeout on the server's text: when it
    fires, the error is raised as it is instead of being "fixed" by dropping a feature."""
    import react_engine.transport.rejections as rejections

    body = "tools is not supported " + "x" * 90_000
    assert classify_rejection(400, body) == "tools"
    monkeypatch.setattr(rejections, "SCAN_TIMEOUT", 1e-9)
    assert classify_rejection(400, body) is None
    assert "too long to classify" in caplog.text
