"""A small MCP server for the tests, built with the ``mcp`` package's own server API.

``python mcp_server.py`` serves over stdin/stdout; ``python mcp_server.py http`` serves
streamable HTTP on 127.0.0.1 at an ephemeral port, and prints ``PORT <n>`` once it listens.
With ``MCP_TEST_PIDFILE`` set, the server writes its process id there when it starts;
with ``MCP_TEST_CALLLOG`` set, it also lists ``book_room``, which appends the arguments of
every call it gets to that file;
with ``MCP_TEST_BROKEN_TOOL`` set, it also lists a tool whose schema is not JSON Schema.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("react-engine-tests", log_level="WARNING")

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
"""What the server says of its tools that change nothing (all but ``delete_note``)."""
NOTES = {"a": "first note", "b": "second note"}


@server.tool(annotations=READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(annotations=READ_ONLY)
def get_weather(city: str, unit: str = "C") -> str:
    """The current weather in a city."""
    return f"{city}: sunny, 24°{unit} (from the MCP server, pid {os.getpid()})"


@server.tool(annotations=READ_ONLY)
def forecast(city: str) -> str:
    """Tomorrow's weather in a city: a tool that always fails (its result is an error)."""
    raise ToolError(f"no forecast for {city}: the station is down")


@server.tool(annotations=READ_ONLY)
async def wait(seconds: float) -> str:
    """Wait, then say so."""
    await asyncio.sleep(seconds)
    return f"waited {seconds}s"


@server.tool(annotations=READ_ONLY)
def dump(size: int) -> str:
    """A result of ``size`` characters (a tool that returns far too much)."""
    return "x" * size


@server.tool(name="files.read", annotations=READ_ONLY)
def read_file(path: str) -> str:
    """A tool whose name the chat APIs refuse (it has a dot)."""
    return f"contents of {path}"


@server.tool(
    annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False)
)
def delete_note(key: str) -> str:
    """Delete a note: a tool that changes things (and says so)."""
    return f"deleted {key}: {NOTES.pop(key, 'no such note')}"


@server.tool()
def touch(key: str) -> str:
    """A tool that says nothing of its effects (MCP's defaults apply)."""
    return f"touched {key}"


BOOK_ROOM_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Beijing", "Shanghai", "Guangzhou"]},
        "product_sku": {"type": "string", "minLength": 10, "pattern": "^[A-Z0-9-]+$"},
        "nights": {"type": "integer", "minimum": 1, "maximum": 14},
        "guests": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["city", "product_sku"],
}


def book_room(
    city: str, product_sku: str, nights: int = 1, guests: list[dict[str, object]] | None = None
) -> str:
    """Book a hotel room. Its function takes whatever it is given, like many servers' tools:
    the constraints are only in the schema it advertises (BOOK_ROOM_SCHEMA)."""
    arguments = {"city": city, "product_sku": product_sku, "nights": nights, "guests": guests}
    with open(os.environ["MCP_TEST_CALLLOG"], "a") as out:
        out.write(json.dumps(arguments) + "\n")
    return f"booked {product_sku} in {city} for {nights} nights"


if os.environ.get("MCP_TEST_CALLLOG"):
    server.add_tool(book_room)
    server._tool_manager.get_tool("book_room").parameters = BOOK_ROOM_SCHEMA

if os.environ.get("MCP_TEST_BROKEN_TOOL"):

    def broken(x: str) -> str:
        """A tool whose advertised schema is not JSON Schema."""
        return x

    server.add_tool(broken)
    server._tool_manager.get_tool("broken").parameters = {
        "type": "object",
        "properties": {"x": {"type": "strnig"}},
    }


async def _serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await http.serve(sockets=[sock])


if __name__ == "__main__":
    if os.environ.get("MCP_TEST_PIDFILE"):
        with open(os.environ["MCP_TEST_PIDFILE"], "w") as pidfile:
            pidfile.write(str(os.getpid()))
    if sys.argv[1:] == ["http"]:
        asyncio.run(_serve_http())
    else:
        server.run("stdio")
