"""MCP tools against a real MCP server (tests/support/mcp_server.py, built with the ``mcp``
package's own server API): over stdio as a subprocess the agent starts for each run, and
over streamable HTTP on 127.0.0.1, in a subprocess started once for the module.

The model is scripted; everything between the agent and the server is real.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from react_engine import (
    Agent,
    ConfigurationError,
    ModelUnavailableError,
    RetryPolicy,
    ScriptedModel,
    reply,
    tool,
    tool_call_reply,
)
from react_engine.errors import MCPServerError
from react_engine.tools.mcp import MCPServerHTTP, MCPServerStdio, MCPToolError, mcp_tools

pytestmark = pytest.mark.slow  # real MCP servers in child processes

SERVER = Path(__file__).parents[1] / "support" / "mcp_server.py"
PROTOCOLS = ["function_calling", "text"]


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The test server over streamable HTTP, on an ephemeral loopback port."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"the MCP HTTP server did not start: {line!r} {err[-2000:]}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def stdio_server(**kwargs: Any) -> MCPServerStdio:
    return MCPServerStdio(sys.executable, [str(SERVER)], **kwargs)


def server_for(transport: str, http_url: str, **kwargs: Any) -> MCPServerStdio | MCPServerHTTP:
    if transport == "stdio":
        return stdio_server(**kwargs)
    return MCPServerHTTP(http_url, **kwargs)


def call(protocol: str, name: str, arguments: dict[str, Any]) -> Any:
    """A scripted reply that calls one tool, in the protocol's own form."""
    if protocol == "function_calling":
        return tool_call_reply((name, arguments))
    if protocol == "structured":
        return json.dumps({"thought": "t", "action": {"tool": name, "arguments": arguments}})
    return f"Thought: I use {name}.\nAction: {name}\nAction Input: {json.dumps(arguments)}"


def answer(protocol: str, text: str) -> Any:
    if protocol == "function_calling":
        return reply(text)
    if protocol == "structured":
        return json.dumps({"thought": "t", "action": {"final_answer": text}})
    return f"Final Answer: {text}"


def second_request_text(model: ScriptedModel) -> str:
    """What the model was sent after the first step: the observation is in there."""
    return json.dumps(model.payloads[1]["messages"], ensure_ascii=False)


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until_gone(pid: int, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while is_running(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


# --- the agent runs MCP tools under both protocols, over both transports ---------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_agent_calls_an_mcp_tool(transport: str, protocol: str, http_url: str) -> None:
    model = ScriptedModel([call(protocol, "add", {"a": 19, "b": 23}), answer(protocol, "42")])

    @tool
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    agent = Agent(
        "m",
        tools=[shout],
        mcp_servers=[server_for(transport, http_url)],
        client=model,
        protocol=protocol,
    )
    result = agent.run("What is 19 + 23?")  # the blocking run wraps the async one

    assert result.answer == "42"
    (action,) = result.tool_calls
    assert (action.tool, action.status, action.observation) == ("add", "ok", "42")
    # The server's result is what the model reads next.
    if protocol == "function_calling":
        seen = {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    else:
        seen = {"role": "user", "content": "Observation: <observation>42</observation>"}
    assert model.payloads[1]["messages"][-1] == seen
    first = model.payloads[0]
    if protocol == "function_calling":
        by_name = {t["function"]["name"]: t["function"] for t in first["tools"]}
        assert list(by_name) == [
            "shout",
            "add",
            "get_weather",
            "forecast",
            "wait",
            "dump",
            "files_read",
            "delete_note",
            "touch",
        ]
        assert by_name["add"] == {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
            "strict": True,
        }
    else:
        assert "tools" not in first
        system = first["messages"][0]["content"]
        assert '{"name": "add", "description": "Add two integers."' in system
        assert '"name": "get_weather", "description": "The current weather in a city."' in system
        assert (
            "one of [shout, add, get_weather, forecast, wait, dump, files_read, delete_note, touch]"
            in system
        )


@pytest.mark.parametrize("protocol", [*PROTOCOLS, "structured"])
async def test_mcp_tool_error_is_an_observation_the_model_sees(
    protocol: str, http_url: str
) -> None:
    model = ScriptedModel(
        [
            call(protocol, "forecast", {"city": "Oslo"}),
            call(protocol, "get_weather", {"city": "Oslo"}),
            answer(protocol, "Sunny today; no forecast for tomorrow."),
        ]
    )
    agent = Agent("m", mcp_servers=[MCPServerHTTP(http_url)], client=model, protocol=protocol)
    result = await agent.arun("Weather in Oslo, today and tomorrow?")

    assert result.answer == "Sunny today; no forecast for tomorrow."
    failed, fine = result.tool_calls
    assert failed.status == "error"
    assert "no forecast for Oslo: the station is down" in failed.observation
    assert "MCPToolError" in failed.observation
    assert "no forecast for Oslo: the station is down" in second_request_text(model)
    assert fine.status == "ok"
    assert fine.observation.startswith("Oslo: sunny, 24°C (from the MCP server")


async def test_arguments_are_checked_against_the_servers_schema(http_url: str) -> None:
    model = ScriptedModel(
        [
            tool_call_reply(("add", {"a": "nineteen", "b": 23}), ("add", {"a": 1})),
            tool_call_reply(("get_weather", {"city": "Rome", "unit": "F"})),
            reply("done"),
        ]
    )
    agent = Agent(
        "m", mcp_servers=[MCPServerHTTP(http_url)], client=model, protocol="function_calling"
    )
    result = await agent.arun("q")
    bad_type, missing, weather = result.tool_calls
    assert bad_type.status == missing.status == "invalid_arguments"
    assert "a: Input should be a valid integer" in bad_type.observation
    assert "b: Field required" in missing.observation
    # The optional argument the model gave reaches the server; the ones it left out are
    # not sent as null.
    assert weather.observation.startswith("Rome: sunny, 24°F")


async def test_a_name_the_apis_refuse_is_rewritten_and_the_server_called_by_its_own(
    http_url: str,
) -> None:
    model = ScriptedModel([tool_call_reply(("files_read", {"path": "/etc/motd"})), reply("ok")])
    agent = Agent(
        "m", mcp_servers=[MCPServerHTTP(http_url)], client=model, protocol="function_calling"
    )
    result = await agent.arun("q")
    assert result.tool_calls[0].observation == "contents of /etc/motd"


async def test_a_call_past_its_timeout_leaves_the_session_usable(http_url: str) -> None:
    model = ScriptedModel(
        [
            tool_call_reply(("wait", {"seconds": 30}), ("add", {"a": 1, "b": 2})),
            tool_call_reply(("add", {"a": 3, "b": 4})),
            reply("done"),
        ]
    )
    agent = Agent(
        "m",
        mcp_servers=[MCPServerHTTP(http_url)],
        client=model,
        protocol="function_calling",
        tool_timeout=1.0,
    )
    result = await agent.arun("q")
    waited, parallel, later = result.tool_calls
    assert waited.status == "timeout"
    assert waited.observation == "Error: wait did not finish within 1s"
    assert (parallel.observation, later.observation) == ("3", "7")


async def test_concurrent_runs_and_a_blocking_run_inside_the_loop(http_url: str) -> None:
    def script(n: int) -> ScriptedModel:
        return ScriptedModel([tool_call_reply(("add", {"a": n, "b": n})), reply(str(2 * n))])

    server = MCPServerHTTP(http_url)  # one handle: each run opens its own connection
    agents = [
        Agent("m", mcp_servers=[server], client=script(n), protocol="function_calling")
        for n in range(3)
    ]
    results = await asyncio.gather(*(agent.arun("q") for agent in agents))
    assert [r.tool_calls[0].observation for r in results] == ["0", "2", "4"]
    # agent.run() inside a running loop runs on a thread of its own, with its own loop.
    blocking = Agent("m", mcp_servers=[server], client=script(5), protocol="function_calling")
    assert blocking.run("q").tool_calls[0].observation == "10"


# --- names ------------------------------------------------------------------------------------


async def test_a_clash_with_a_local_tool_is_a_configuration_error(http_url: str) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """A local add."""
        return a + b

    model = ScriptedModel([reply("never sent")])
    agent = Agent("m", tools=[add], mcp_servers=[MCPServerHTTP(http_url)], client=model)
    history: list[Any] = []
    with pytest.raises(ConfigurationError, match=r"tool named 'add'.*prefix="):
        await agent.arun("q", history=history)
    assert model.requests == [] and history == []


async def test_a_prefix_keeps_two_servers_apart(http_url: str) -> None:
    model = ScriptedModel(
        [tool_call_reply(("a_add", {"a": 1, "b": 2}), ("b_add", {"a": 3, "b": 4})), reply("3, 7")]
    )
    servers = [MCPServerHTTP(http_url, prefix="a_"), MCPServerHTTP(http_url, prefix="b_")]
    agent = Agent("m", mcp_servers=servers, client=model, protocol="function_calling")
    result = await agent.arun("q")
    assert [a.observation for a in result.tool_calls] == ["3", "7"]
    names = [t["function"]["name"] for t in model.payloads[0]["tools"]]
    assert names[:2] == ["a_add", "a_get_weather"] and "b_files_read" in names

    with pytest.raises(ConfigurationError, match="tool named 'add'"):
        await Agent("m", mcp_servers=[MCPServerHTTP(http_url)] * 2, client=model).arun("q")


# --- an explicit connection ------------------------------------------------------------------


async def test_explicit_connection_serves_several_runs_then_closes(http_url: str) -> None:
    model = ScriptedModel(
        [
            tool_call_reply(("add", {"a": 1, "b": 1})),
            reply("2"),
            tool_call_reply(("add", {"a": 2, "b": 2})),
            reply("4"),
            tool_call_reply(("add", {"a": 3, "b": 3})),
            reply("no server"),
        ]
    )
    server = MCPServerHTTP(http_url, headers={"Authorization": "Bearer test-token"})
    with pytest.raises(ConfigurationError, match="not connected"):
        mcp_tools(server)
    async with server:
        tools = mcp_tools(server)
        assert [t.name for t in await server.list_tools()] == [t.name for t in tools]
        agent = Agent("m", tools=tools, client=model, protocol="function_calling")
        conversation = agent.conversation()
        assert (await conversation.aask("1+1?")).answer == "2"
        assert (await conversation.aask("2+2?")).answer == "4"
        with pytest.raises(ConfigurationError, match="already connected"):
            await server.__aenter__()
    # The tools outlive the connection: a call now is an error observation, not a crash.
    late = await conversation.aask("3+3?")
    assert late.tool_calls[0].status == "error"
    assert "connection to the MCP server" in late.tool_calls[0].observation
    assert "is closed" in late.tool_calls[0].observation


async def test_a_tool_called_directly_raises_mcp_tool_error(http_url: str) -> None:
    async with MCPServerHTTP(http_url) as server:
        forecast = {t.name: t for t in mcp_tools(server)}["forecast"]
        with pytest.raises(MCPToolError, match="the station is down") as caught:
            await forecast.ainvoke(forecast.check({"city": "Oslo"}))
        assert caught.value.tool_name == "forecast"


# --- the connection's life: opened per run, closed however the run ends -------------------------


def test_the_stdio_server_ends_with_the_run(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    model = ScriptedModel([tool_call_reply(("get_weather", {"city": "Paris"})), reply("sunny")])
    server = stdio_server(env={"MCP_TEST_PIDFILE": str(pidfile)})
    agent = Agent("m", mcp_servers=[server], client=model, protocol="function_calling")
    result = agent.run("Weather in Paris?")
    pid = int(pidfile.read_text())
    assert f"pid {pid}" in result.tool_calls[0].observation
    assert wait_until_gone(pid)


async def test_an_error_in_the_run_closes_the_server_and_comes_out_as_itself(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "pid"
    failure = ModelUnavailableError("the model is down", status_code=503)
    model = ScriptedModel([tool_call_reply(("add", {"a": 1, "b": 2})), failure])
    server = stdio_server(env={"MCP_TEST_PIDFILE": str(pidfile)})
    agent = Agent(
        "m",
        mcp_servers=[server],
        client=model,
        protocol="function_calling",
        retry=RetryPolicy(max_attempts=1),
    )
    with pytest.raises(ModelUnavailableError) as caught:  # not an exception group
        await agent.arun("q")
    assert caught.value.result is not None
    assert caught.value.result.tool_calls[0].observation == "3"
    assert wait_until_gone(int(pidfile.read_text()))


async def test_a_cancelled_run_closes_the_server(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    model = ScriptedModel([tool_call_reply(("wait", {"seconds": 60})), reply("never")])
    server = stdio_server(env={"MCP_TEST_PIDFILE": str(pidfile)})
    agent = Agent("m", mcp_servers=[server], client=model, protocol="function_calling")
    run = asyncio.create_task(agent.arun("q"))
    while not model.requests:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # the wait call is in flight
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert wait_until_gone(int(pidfile.read_text()))


async def test_a_server_that_cannot_start_is_an_mcp_server_error() -> None:
    model = ScriptedModel([reply("never sent")])
    history: list[Any] = []
    missing = MCPServerStdio(sys.executable, ["-c", "import sys; sys.exit(3)"], timeout=20)
    agent = Agent("m", mcp_servers=[missing], client=model)
    with pytest.raises(MCPServerError, match="could not connect to the MCP server") as caught:
        await agent.arun("q", history=history)
    assert caught.value.server.startswith(sys.executable)
    assert "MCPError: Connection closed" in str(caught.value)
    assert model.requests == [] and history == []


async def test_an_unreachable_http_server_is_an_mcp_server_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    agent = Agent(
        "m", mcp_servers=[MCPServerHTTP(f"http://127.0.0.1:{port}/mcp")], client=ScriptedModel()
    )
    with pytest.raises(MCPServerError, match=f"127.0.0.1:{port}"):
        await agent.arun("q")


# --- configuration ------------------------------------------------------------------------------


def test_handles_check_their_arguments() -> None:
    with pytest.raises(ConfigurationError, match="prefix"):
        MCPServerHTTP("http://127.0.0.1:1/mcp", prefix="1 bad")
    with pytest.raises(ConfigurationError, match="URL"):
        MCPServerHTTP("127.0.0.1:1/mcp")
    with pytest.raises(ConfigurationError, match="args"):
        MCPServerStdio("python", "server.py")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="timeout"):
        MCPServerStdio("python", timeout=0)
    with pytest.raises(ConfigurationError, match="mcp_servers must be"):
        Agent("m", mcp_servers="python server.py", client=ScriptedModel())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="every MCP server"):
        Agent("m", mcp_servers=["python server.py"], client=ScriptedModel())  # type: ignore[list-item]
    assert "not connected" in repr(MCPServerHTTP("http://127.0.0.1:1/mcp"))


def test_without_the_mcp_package_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # what an absent package looks like
    with pytest.raises(ConfigurationError, match=r"react-engine\[mcp\]"):
        MCPServerStdio("python", ["server.py"])


def test_what_the_model_sees_of_each_kind_of_content() -> None:
    from mcp.types import (
        BlobResourceContents,
        CallToolResult,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    from react_engine.tools.mcp import result_text

    mixed = CallToolResult(
        content=[
            TextContent(text="first"),
            ImageContent(data="aGVsbG8h", mime_type="image/png"),
            ResourceLink(name="notes", uri="file:///notes.md"),
            EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="inline")),
            EmbeddedResource(resource=BlobResourceContents(uri="file:///b.bin", blob="AAAA")),
        ],
        structured_content={"ignored": True},
    )
    assert result_text(mixed).splitlines() == [
        "first",
        "[image: image/png, about 6 bytes, not shown]",
        "[resource: file:///notes.md]",
        "inline",
        "[resource: file:///b.bin, binary, not shown]",
    ]
    structured = CallToolResult(content=[], structured_content={"temp": 24, "city": "北京"})
    assert result_text(structured) == '{"temp": 24, "city": "北京"}'
    assert result_text(CallToolResult(content=[])) == ""


def test_a_twenty_megabyte_stdio_result_is_read_and_truncated_not_timed_out() -> None:
    # The mcp package's stdio reader joined every 64 KiB chunk to the
    # unfinished line before it: a 20 MB result took over 30 s and the call timed out.
    size = 20_000_000
    model = ScriptedModel([call("function_calling", "dump", {"size": size}), reply("big")])
    agent = Agent("m", mcp_servers=[stdio_server()], client=model, protocol="function_calling")
    result = agent.run("Dump it.", tool_timeout=15)
    (action,) = result.steps[0].actions
    assert action.status == "ok", action.observation
    assert "truncated" in (action.observation or "") and len(action.observation or "") < 10_000
    assert result.answer == "big"
