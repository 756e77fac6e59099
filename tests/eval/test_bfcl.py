"""``react-engine eval bfcl``: BFCL's data, its schemas as ours, the one-step runner, the CLI.

These tests read BFCL's cases from the ``bfcl-eval`` wheel, which ``make venv`` / ``make
test`` install (``pip install --no-deps bfcl-eval``). Without it they fail, saying so, rather
than skip: a skipped benchmark test under ``make test`` would hide a broken install step.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support.parts import BFCL, BFCL_HINT, require_module

from react_engine.cli import main
from react_engine.errors import ConfigurationError
from react_engine.eval import bfcl_data
from react_engine.eval.bfcl import DEFAULT_PROTOCOLS, run_bfcl
from react_engine.eval.bfcl_data import (
    CATEGORIES,
    BfclDataMissing,
    api_name,
    case_tools,
    load_cases,
    to_json_schema,
)
from react_engine.eval.bfcl_recording import DEFAULT_RECORDINGS, load_recording, save_recording
from react_engine.eval.bfcl_report import format_report
from react_engine.testing import (
    ScriptedServer,
    completion,
    reply,
    tool_call_reply,
    tool_calls_completion,
)
from react_engine.types import ModelResponse

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def _bfcl_data() -> None:
    require_module("bfcl_eval", BFCL, BFCL_HINT, module_level=False)


# --- the data ----------------------------------------------------------------------------------


def test_every_category_loads_with_its_answers() -> None:
    cases = load_cases(list(CATEGORIES))
    counts = {c: sum(1 for x in cases if x.category == c) for c in CATEGORIES}
    assert counts == {
        "simple": 400,
        "multiple": 200,
        "parallel": 200,
        "parallel_multiple": 200,
        "irrelevance": 240,
        "live_simple": 258,
        "live_multiple": 1053,
        "live_parallel": 16,
        "live_parallel_multiple": 24,
        "live_irrelevance": 884,
    }
    assert [c.category for c in load_cases()] == [c.category for c in cases[:1240]]
    for case in cases:
        assert case.question
        assert case.functions or case.category == "live_irrelevance"
        assert (case.answers == ()) == ("irrelevance" in case.category)
    # Live cases may open with a system message or carry an earlier exchange.
    by_id = {c.id: c for c in cases}
    assert sum(c.system is not None for c in cases) == 91
    assert sum(bool(c.history) for c in cases) == 9
    assert all(role in ("user", "assistant") for c in cases for role, _ in c.history)
    assert by_id["simple_python_0"].system is None
    first = cases[0]
    assert first.id == "simple_python_0"
    assert first.answers == (
        {"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}},
    )


def test_limit_and_ids_pick_cases_in_file_order() -> None:
    cases = load_cases(["parallel", "irrelevance"], limit=2)
    assert [c.id for c in cases] == ["parallel_0", "parallel_1", "irrelevance_0", "irrelevance_1"]
    picked = load_cases(["multiple"], only=["multiple_7", "multiple_3", "parallel_0"])
    assert [c.id for c in picked] == ["multiple_3", "multiple_7"]


def test_an_unknown_category_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="unknown BFCL categories"):
        load_cases(["live_relevance"])


def test_missing_data_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "bfcl_eval", None)  # import bfcl_eval: not found
    with pytest.raises(BfclDataMissing, match="pip install --no-deps bfcl-eval"):
        load_cases()
    monkeypatch.setattr(bfcl_data, "data_root", lambda: tmp_path)
    with pytest.raises(BfclDataMissing, match=r"no BFCL_v4_simple_python\.json"):
        load_cases(["simple"])


# --- schemas and tools ---------------------------------------------------------------------------


def test_bfcl_types_become_json_schema() -> None:
    bfcl = {
        "type": "dict",
        "properties": {
            "rate": {"type": "float", "description": "r", "default": 0.5, "optional": True},
            "pair": {"type": "tuple", "items": {"type": "integer"}},
            "anything": {"type": "any"},
            "filters": {
                "type": "dict",
                "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
                "required": ["tags", "gone"],
            },
            "mode": {"type": "string", "enum": ["a", "b"]},
            "weights": {"type": "array", "items": {"type": "float"}},
        },
        "required": ["pair"],
    }
    # As BFCL converts functions for FC models: a float property says so (items do not),
    # and ``any`` is sent as a string.
    assert to_json_schema(bfcl) == {
        "type": "object",
        "properties": {
            "rate": {
                "type": "number",
                "format": "float",
                "description": "r This is a float type value.",
                "default": 0.5,
            },
            "pair": {"type": "array", "items": {"type": "integer"}},
            "anything": {"type": "string"},
            "filters": {
                "type": "object",
                "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
                "required": ["tags"],
            },
            "mode": {"type": "string", "enum": ["a", "b"]},
            "weights": {"type": "array", "items": {"type": "number"}},
        },
        "required": ["pair"],
    }
    with pytest.raises(ConfigurationError, match="unknown BFCL type 'complex'"):
        to_json_schema({"type": "complex"})


def test_every_function_of_the_ast_categories_converts() -> None:
    allowed = {"object", "number", "array", "integer", "string", "boolean"}

    def types(node: Any) -> set[str]:
        if isinstance(node, dict):
            found = {node["type"]} if isinstance(node.get("type"), str) else set()
            return found.union(*(types(v) for k, v in node.items() if k != "enum"), set())
        if isinstance(node, list):
            return set().union(*(types(v) for v in node), set())
        return set()

    for case in load_cases(list(CATEGORIES)):
        tools, names = case_tools(case.functions)
        assert sorted(names.values()) == sorted(f["name"] for f in case.functions)
        for tool in tools:
            assert tool.description.endswith(
                " Note that the provided function is in Python 3 syntax."
            )
            assert tool.parameters["type"] == "object"
            assert tool.parameters["additionalProperties"] is False
            assert types(tool.parameters) <= allowed, case.id


def test_function_names_become_api_safe() -> None:
    assert api_name("math.factorial") == "math_factorial"
    assert api_name("get weather/now") == "get_weather_now"
    assert api_name("3d.render") == "_3d_render"
    assert len(api_name("x" * 100)) == 64


def test_the_tools_accept_any_arguments_and_never_run_the_case() -> None:
    (case,) = load_cases(["simple"], only=["simple_python_1"])
    tools, names = case_tools(case.functions)
    (tool,) = tools
    assert names == {"math_factorial": "math.factorial"}
    assert tool.openai_schema()["function"]["name"] == "math_factorial"
    # The checker judges values, so validation lets everything through...
    assert tool.check({"number": "five", "extra": [1]}).model_dump() == {
        "number": "five",
        "extra": [1],
    }
    # ...and a one-parameter tool takes a plain-text input as any tool of ours does.
    assert tool.check("5").model_dump() == {"number": "5"}


# --- the runner ----------------------------------------------------------------------------------

CASES = ["simple_python_0", "parallel_0", "irrelevance_0"]


def _cases() -> list[bfcl_data.Case]:
    return load_cases(["simple", "parallel", "irrelevance"], only=CASES)


def _replies() -> dict[str, dict[str, ModelResponse]]:
    return {
        "function_calling": {
            "simple_python_0": tool_call_reply(
                ("calculate_triangle_area", {"base": 10, "height": 5})
            ),
            "parallel_0": tool_call_reply(
                ("spotify_play", {"artist": "Maroon 5", "duration": 15}),
                ("spotify_play", {"artist": "taylor swift", "duration": 20}),
            ),
            "irrelevance_0": reply("The area is 25 square meters."),
        },
        "text": {
            "simple_python_0": reply(
                'Thought: I can compute it.\nAction: calculate_triangle_area\nAction Input: {"base": 10, "height": 5}'
            ),
            "parallel_0": reply("I would play both."),
            "irrelevance_0": reply(
                'Thought: no tool fits.\nAction: determine_body_mass_index\nAction Input: {"weight": 10, "height": 5}'
            ),
        },
        "structured": {
            "simple_python_0": reply(
                '{"thought": "t", "action": {"tool": "calculate_triangle_area", "arguments": {"base": 10, "height": 5.5}}}'
            ),
            "parallel_0": tool_call_reply(("spotify_play", '{"artist": ')),
            "irrelevance_0": reply('{"thought": "t", "action": {"final_answer": "25"}}'),
        },
    }


def test_each_case_is_one_step_scored_per_protocol() -> None:
    report = run_bfcl(_cases(), DEFAULT_PROTOCOLS, recorded=_replies())
    got = {(r.protocol, r.case): (r.correct, r.decode_failure, r.reason) for r in report.results}
    assert got[("function_calling", "simple_python_0")] == (True, False, "")
    assert got[("function_calling", "parallel_0")] == (True, False, "")
    assert got[("function_calling", "irrelevance_0")] == (True, False, "")
    assert got[("text", "simple_python_0")] == (True, False, "")
    correct, decode, why = got[("text", "parallel_0")]
    assert (correct, decode) == (False, True) and why.startswith("format error: ")
    assert got[("text", "irrelevance_0")] == (
        False,
        False,
        "called determine_body_mass_index; expected no call",
    )
    assert got[("structured", "simple_python_0")][:2] == (False, False)
    assert "height: expected integer, got float 5.5" in got[("structured", "simple_python_0")][2]
    assert got[("structured", "irrelevance_0")] == (True, False, "")
    calls = next(r.calls for r in report.results if r.case == "parallel_0")
    assert calls == [
        {"name": "spotify.play", "arguments": {"artist": "Maroon 5", "duration": 15}},
        {"name": "spotify.play", "arguments": {"artist": "taylor swift", "duration": 20}},
    ]
    table = format_report(report)
    assert "function_calling  TOTAL" in table
    assert "text protocol decode failures: 33.3%" in table and "misses it" in table


def test_recorded_replies_are_required_for_every_case() -> None:
    replies = _replies()
    del replies["text"]["parallel_0"]
    with pytest.raises(ConfigurationError, match="no recorded text reply for parallel_0"):
        run_bfcl(_cases(), DEFAULT_PROTOCOLS, recorded=replies)


def test_a_recording_round_trips(tmp_path: Path) -> None:
    replies = _replies()["function_calling"]
    save_recording(tmp_path, "function_calling", replies, {"model": "m"})
    meta, loaded = load_recording(tmp_path, "function_calling")
    assert meta == {"model": "m"}
    assert loaded.keys() == replies.keys()
    for key, original in replies.items():
        assert loaded[key].content == original.content
        assert loaded[key].tool_calls == original.tool_calls
    with pytest.raises(ConfigurationError, match="no recorded text replies"):
        load_recording(tmp_path, "text")


# --- the command -------------------------------------------------------------------------------

RECORDINGS = sorted(p.parent for p in DEFAULT_RECORDINGS.rglob("expected.txt"))
"""Each directory of recorded replies beside ``expected.txt``, the table its scripted run
prints, every row: a change in a protocol's parser or in the checker that moves one score
shows up as a diff. Make it deliberately: ``pytest --update-goldens`` rewrites the files
(and update docs/bfcl.md with them)."""


def test_every_recording_has_its_expected_table() -> None:
    assert [p.relative_to(DEFAULT_RECORDINGS).as_posix() for p in RECORDINGS] == [
        ".",
        "multi-turn",
        "no-constraints",
        "required",
    ]


@pytest.mark.parametrize(
    "directory", RECORDINGS, ids=[p.relative_to(DEFAULT_RECORDINGS).as_posix() for p in RECORDINGS]
)
def test_scripted_eval_replays_the_recorded_set(
    directory: Path, capsys: pytest.CaptureFixture[str], update_goldens: bool
) -> None:
    args = ["--scripted"] if directory == DEFAULT_RECORDINGS else ["--scripted", str(directory)]
    code = main(["eval", "bfcl", *args, "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    head, *table = out.splitlines()
    assert "smollm2-135m-instruct (recorded replies in " in head
    expected = directory / "expected.txt"
    if update_goldens:
        expected.write_text("\n".join(table) + "\n", encoding="utf-8")
    assert table == expected.read_text(encoding="utf-8").splitlines()


def test_the_default_recording_runs_every_protocol_on_every_category(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["eval", "bfcl", "--scripted", "--quiet"]) == 0
    assert "50 cases × 3 protocol(s)" in capsys.readouterr().out


def test_the_recordings_are_of_the_embedded_model() -> None:
    for directory in RECORDINGS:
        for path in directory.glob("*.json"):
            meta, replies = load_recording(directory, path.stem)
            assert meta["model"].startswith("smollm2")
            assert meta["settings"]["temperature"] == 0 and meta["settings"]["seed"] == 42
            assert len(replies) in (40, 50) or directory.name == "multi-turn"
    for protocol in DEFAULT_PROTOCOLS:
        _, replies = load_recording(DEFAULT_RECORDINGS, protocol)
        assert {k.rsplit("_", 1)[0] for k in replies} == {
            "simple_python",
            "multiple",
            "parallel",
            "parallel_multiple",
            "irrelevance",
        }


def test_a_live_run_records_what_a_scripted_run_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    seen: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        if body.get("tools"):
            return tool_calls_completion(
                ("calculate_triangle_area", {"base": 10, "height": 5}), prompt_tokens=120
            )
        return completion(
            'Thought: t\nAction: calculate_triangle_area\nAction Input: {"base": 10}',
            prompt_tokens=150,
        )

    args = ["eval", "bfcl", "--categories", "simple", "--limit", "1", "--quiet"]
    args += ["--protocol", "function_calling", "--protocol", "text"]
    with ScriptedServer(default=respond) as server:
        code = main(
            [*args, "--base-url", server.base_url, "--model", "m", "--record", str(tmp_path)]
        )
    live = capsys.readouterr().out
    assert code == 0
    assert len(seen) == 2  # one request per case and protocol: nothing runs after the step
    assert [t["function"]["name"] for t in seen[0]["tools"]] == ["calculate_triangle_area"]
    assert "tools" not in seen[1] and "calculate_triangle_area" in json.dumps(seen[1]["messages"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["function_calling.json", "text.json"]
    assert " ".join(live.split()).count("simple 1 1/1 100.0% 0 0.0% 1 120 5 0 0") == 1
    assert "simple 1 0/1 0.0% 0 0.0% 1 150 5 0 0" in " ".join(live.split())

    out_file = tmp_path / "report.json"
    code = main([*args, "--scripted", str(tmp_path), "--out", str(out_file)])
    replayed = capsys.readouterr().out
    assert code == 0
    assert replayed.splitlines()[1:] == live.splitlines()[1:]
    data = json.loads(out_file.read_text())
    assert data["totals"]["text"]["TOTAL"]["correct"] == 0
    assert (
        data["results"][1]["reason"]
        == "calculate_triangle_area: missing required parameter 'height'"
    )


def test_eval_without_an_endpoint_says_what_to_pass(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "REACT_ENGINE_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["eval", "bfcl", "--limit", "1"]) == 2
    err = capsys.readouterr().err
    assert "no endpoint" in err and "--scripted" in err and "--local" in err


def test_eval_rejects_a_bad_recording_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", "bfcl", "--scripted", str(tmp_path)]) == 2
    assert "no recorded function_calling replies" in capsys.readouterr().err
    assert main(["eval", "bfcl", "--scripted", "--local"]) == 2
    assert main(["eval", "bfcl", "--scripted", "--limit", "0"]) == 2


def test_a_rejected_key_stops_the_eval(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from react_engine.testing import MockResponse

    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-0123456789")

    def deny(body: dict[str, Any]) -> MockResponse:
        return MockResponse(401, {"error": {"message": "Incorrect API key provided"}})

    with ScriptedServer(default=deny) as server:
        code = main(
            [
                "eval",
                "bfcl",
                "--base-url",
                server.base_url,
                "--model",
                "m",
                "--limit",
                "1",
                "--quiet",
            ]
        )
    assert code == 4
    assert "sk-wrong-0123456789" not in capsys.readouterr().err


def test_bfcls_published_pair_is_shown_for_a_model_it_covers() -> None:
    report = run_bfcl(_cases(), ["text"], recorded=_replies(), model="Qwen2.5-7B-Instruct")
    assert "BFCL leaderboard, overall score for this model: FC 44.7 / Prompt 42.7" in format_report(
        report
    )
    report.model = "some-other-model"
    assert "BFCL leaderboard" not in format_report(report)


def test_tool_choice_required_is_sent_and_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    seen: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return tool_calls_completion(("determine_body_mass_index", {"weight": 10, "height": 5}))

    args = ["eval", "bfcl", "--categories", "irrelevance", "--limit", "1", "--quiet"]
    args += ["--protocol", "function_calling"]
    with ScriptedServer(default=respond) as server:
        live = [
            *args,
            "--base-url",
            server.base_url,
            "--model",
            "gpt-4o",
            "--tool-choice",
            "required",
        ]
        assert main([*live, "--record", str(tmp_path)]) == 0
    assert seen[0]["tool_choice"] == "required"
    assert "tool_choice required" in capsys.readouterr().out
    # The replay sends what was recorded, whatever the flag says.
    assert main([*args, "--scripted", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "tool_choice required" in out and "irrelevance 1 0/1 0.0%" in " ".join(out.split())


def test_no_constraints_leaves_the_grammar_out(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    seen: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return completion("Thought: none fits.\nFinal Answer: 25")

    args = ["eval", "bfcl", "--categories", "irrelevance", "--limit", "1", "--quiet"]
    args += ["--protocol", "text", "--model", "smollm2-135m-instruct"]
    with ScriptedServer(default=respond) as server:
        assert main([*args, "--base-url", server.base_url]) == 0
        assert main([*args, "--base-url", server.base_url, "--no-constraints"]) == 0
    constrained, free = seen
    assert "grammar" in json.dumps(constrained) and "grammar" not in json.dumps(free)
    assert "no constrained decoding" in capsys.readouterr().out
