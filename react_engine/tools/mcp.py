"""Tools from Model Context Protocol servers (usage: docs/mcp.md).

The optional ``mcp`` package is imported when a handle is created, never by
``import react_engine``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import (
    ConfigurationError,
    MCPServerError,
    MCPToolError,
    ReactEngineError,
    ToolDefinitionError,
)
from ..types import is_seconds
from .base import Tool, ToolAnnotations

if TYPE_CHECKING:  # the mcp package is optional: imported for real only when a handle is made
    from mcp import Client
    from mcp.client import Transport
    from mcp.types import CallToolResult
    from mcp.types import Tool as ToolSpec

__all__ = [
    "MCPConnection",
    "MCPServerHTTP",
    "MCPServerHandle",
    "MCPServerStdio",
    "MCPToolError",
    "connected_tools",
    "mcp_tools",
]

log = logging.getLogger("react_engine")

_MAX_PAGES = 100
"""Pages of ``tools/list`` read at most: a server whose cursor never ends cannot hang a run."""

_API_NAME = re.compile(r"[^A-Za-z0-9_\-]")  # not allowed in a tool name sent to a chat API

_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,31}$")


class MCPServerHandle:
    """How to reach an MCP server, and, inside ``async with``, a connection to it.

    ``prefix`` goes before each of its tool names; ``timeout``: seconds to wait for any one
    answer (``None``: no limit)."""

    def __init__(
        self,
        name: str,
        *,
        prefix: str = "",
        requires_approval: bool = False,
        timeout: float | None = 60.0,
    ) -> None:
        try:
            import mcp  # noqa: F401
        except ImportError as exc:
            raise ConfigurationError(
                "MCP servers need the mcp package, which is not installed: "
                "pip install 'react-engine[mcp]'"
            ) from exc
        if prefix and (not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix)):
            raise ConfigurationError(
                f"MCP tool prefix {prefix!r}: use letters, digits, '_' or '-', at most 32 "
                "characters, not starting with a digit"
            )
        if timeout is not None and not is_seconds(timeout):
            raise ConfigurationError(
                f"MCP server timeout must be a positive number of seconds or None, not {timeout!r}"
            )
        self.name = name
        """The command or URL: what errors and clash messages call this server."""
        self.prefix = prefix
        self.requires_approval = requires_approval
        self.timeout = timeout
        self._stack: AsyncExitStack | None = None
        self._connection: MCPConnection | None = None

    def _transport(self, stack: AsyncExitStack) -> Transport:
        """The ``mcp`` transport for one connection; what else it needs closed goes on ``stack``."""
        raise NotImplementedError

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[MCPConnection]:
        """A new connection, its tools listed, closed when the ``async with`` ends."""
        from mcp import Client

        yielded = False
        raised: list[BaseException] = []
        try:
            async with AsyncExitStack() as stack:
                try:
                    transport = self._transport(stack)
                    client = await stack.enter_async_context(
                        Client(transport, read_timeout_seconds=self.timeout)
                    )
                    connection = MCPConnection(self, client)
                    await connection.list_tools()
                except ReactEngineError:
                    raise
                except Exception as exc:
                    raise MCPServerError(
                        f"could not connect to the MCP server {self.name}: {_one_line(exc)}",
                        server=self.name,
                    ) from exc
                try:
                    yielded = True
                    yield connection
                except BaseException as exc:
                    raised.append(exc)
                    raise
                finally:
                    connection.closed = True
        except BaseExceptionGroup as group:
            # The mcp client's task groups wrap what the block raised: the caller gets its own
            # exception back. A block that went well is not undone by a failed close.
            if raised:
                _, rest = group.split(lambda exc: exc is raised[0])
                if rest is not None:
                    log.warning("closing the MCP server %s failed: %s", self.name, _one_line(rest))
                raise raised[0] from raised[0].__cause__
            if not yielded or not isinstance(group, ExceptionGroup):
                raise
            log.warning("closing the MCP server %s failed: %s", self.name, _one_line(group))

    async def __aenter__(self) -> MCPServerHandle:
        if self._stack is not None:
            raise ConfigurationError(
                f"the MCP server {self.name} is already connected: leave its 'async with' "
                "first (concurrent runs can share a handle through Agent(mcp_servers=...), "
                "which connects once per run)"
            )
        stack = AsyncExitStack()  # holds nothing unless the connection opened
        self._connection = await stack.enter_async_context(self.connect())
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        stack, self._stack, self._connection = self._stack, None, None
        if stack is not None:
            await stack.__aexit__(*exc_info)

    @property
    def tools(self) -> list[Tool]:
        """The tools listed when the connection opened (``async with`` only)."""
        return self._connected().tools

    async def list_tools(self) -> list[Tool]:
        """List the server's tools again (``async with`` only): a server may change them."""
        return await self._connected().list_tools()

    def _connected(self) -> MCPConnection:
        if self._connection is None:
            raise ConfigurationError(
                f"the MCP server {self.name} is not connected: use 'async with server:' "
                "around mcp_tools(server), or pass it as Agent(mcp_servers=[...])"
            )
        return self._connection

    def __repr__(self) -> str:
        state = "connected" if self._connection is not None else "not connected"
        return f"{type(self).__name__}({self.name!r}, {state})"


class MCPServerStdio(MCPServerHandle):
    """An MCP server run as a subprocess, speaking over its stdin and stdout.

    ``env`` is added to the few variables the ``mcp`` package passes on by default (not the
    whole environment, so API keys stay out)."""

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: TextIO | None = None,
        prefix: str = "",
        requires_approval: bool = False,
        timeout: float | None = 60.0,
    ) -> None:
        if not isinstance(command, str) or not command:
            raise ConfigurationError(f"an MCP stdio server needs a command, not {command!r}")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise ConfigurationError(f"MCP server args must be a list of str, not {args!r}")
        super().__init__(
            " ".join([command, *args])[:200],
            prefix=prefix,
            requires_approval=requires_approval,
            timeout=timeout,
        )
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.stderr = stderr

    def _transport(self, stack: AsyncExitStack) -> Transport:
        from mcp.client import stdio
        from mcp.client.stdio import StdioServerParameters, stdio_client

        _read_whole_lines(stdio)

        params = StdioServerParameters(
            command=self.command,
            args=self.args,
            env=self.env,
            cwd=Path(self.cwd) if self.cwd is not None else None,
        )
        return stdio_client(params, errlog=self.stderr or sys.stderr)


def _read_whole_lines(stdio: Any) -> None:
    """Make the mcp package's stdio client read a long message in linear time (its reader
    re-splits the unfinished line at each 64 KiB chunk: a 20 MB result took over 30 s)."""
    found = getattr(stdio, "TextReceiveStream", None)
    if found is None or getattr(found, "_react_engine_lines", False):
        return
    original: Any = found

    class WholeLines:
        _react_engine_lines = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._inner = original(*args, **kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def __aiter__(self) -> AsyncIterator[str]:
            return self._lines()

        async def _lines(self) -> AsyncIterator[str]:
            pending: list[str] = []
            async for chunk in self._inner:
                cut = chunk.rfind("\n") + 1
                if not cut:
                    pending.append(chunk)
                    continue
                pending.append(chunk[:cut])
                yield "".join(pending)
                pending = [chunk[cut:]] if cut < len(chunk) else []
            if pending:
                yield "".join(pending)

    stdio.TextReceiveStream = WholeLines


class MCPServerHTTP(MCPServerHandle):
    """An MCP server at a streamable-HTTP URL; ``headers`` go with every request."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        prefix: str = "",
        requires_approval: bool = False,
        timeout: float | None = 60.0,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"an MCP HTTP server needs an http(s) URL, not {url!r}")
        super().__init__(url, prefix=prefix, requires_approval=requires_approval, timeout=timeout)
        self.url = url
        self.headers = dict(headers) if headers is not None else None

    def _transport(self, stack: AsyncExitStack) -> Transport:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        if not self.headers:
            return streamable_http_client(self.url)
        # The mcp package's own timeouts; the transport does not close a client it did not make.
        http = httpx2.AsyncClient(headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0))
        stack.push_async_callback(http.aclose)
        return streamable_http_client(self.url, http_client=http)


class MCPConnection:
    """One open connection to an MCP server, and the tools it listed."""

    def __init__(self, server: MCPServerHandle, client: Client) -> None:
        self.server = server
        self.client = client
        self.tools: list[Tool] = []
        self.closed = False

    async def list_tools(self) -> list[Tool]:
        """List the server's tools (every page) as react-engine tools; keep them in ``tools``."""
        specs: list[ToolSpec] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await self.client.list_tools(cursor=cursor)
            specs.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        tools: list[Tool] = []
        for spec in specs:
            try:
                tools.append(self._tool(spec))
            except ToolDefinitionError as exc:  # one broken tool does not cost the others
                log.warning("the MCP server %s: tool left out: %s", self.server.name, exc)
        self.tools = tools
        return self.tools

    def _tool(self, spec: ToolSpec) -> Tool:
        remote_name: str = spec.name
        name = (self.server.prefix + _API_NAME.sub("_", remote_name))[:64]
        if name[:1].isdigit() or name[:1] == "-":
            name = "_" + name[:63]

        async def call(arguments: dict[str, Any]) -> str:
            return await self.call_tool(remote_name, arguments)

        description = spec.description or spec.title or ""
        return Tool.from_schema(
            name,
            spec.input_schema,
            call,
            description=description,
            requires_approval=self.server.requires_approval,
            annotations=ToolAnnotations.from_mcp(spec.annotations),
        )

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Call the server's tool ``name``: its text, or :class:`MCPToolError`."""
        if self.closed:
            raise MCPServerError(
                f"the connection to the MCP server {self.server.name} is closed",
                server=self.server.name,
            )
        result = await self.client.call_tool(name, dict(arguments))
        text = result_text(result)
        if result.is_error:
            raise MCPToolError(
                text or "the tool reported an error and said nothing more",
                tool_name=name,
                server=self.server.name,
            )
        return text


def result_text(result: CallToolResult) -> str:
    """What the model sees of an MCP tool result: its text blocks (others as placeholders),
    else its structured content as JSON."""
    from mcp.types import (
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    parts: list[str] = []
    for block in result.content:
        match block:
            case TextContent(text=text):
                parts.append(text)
            case ImageContent() | AudioContent():
                size = len(block.data) * 3 // 4
                parts.append(f"[{block.type}: {block.mime_type}, about {size} bytes, not shown]")
            case ResourceLink(uri=uri):
                parts.append(f"[resource: {uri}]")
            case EmbeddedResource(resource=TextResourceContents(text=text)):
                parts.append(text)
            case EmbeddedResource(resource=inner):
                parts.append(f"[resource: {inner.uri}, {inner.mime_type or 'binary'}, not shown]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "\n".join(parts)


def mcp_tools(*servers: MCPServerHandle) -> list[Tool]:
    """The tools of connected servers (inside their ``async with``), in order; a name two
    servers share is a :class:`~react_engine.errors.ConfigurationError`."""
    tools: list[Tool] = []
    for server in check_servers(servers):
        tools = merge_tools(tools, server.tools, server.name)
    return tools


def merge_tools(tools: Sequence[Tool], added: Iterable[Tool], server: str) -> list[Tool]:
    """``tools`` followed by a server's tools; a name already taken is a configuration error."""
    out = list(tools)
    taken = {t.name for t in out}
    for t in added:
        if t.name in taken:
            raise ConfigurationError(
                f"the MCP server {server} has a tool named {t.name!r}, and so does another "
                "tool of this agent: give the server a prefix (prefix='...' on its handle) "
                "so that its tool names are its own"
            )
        taken.add(t.name)
        out.append(t)
    return out


def check_servers(servers: Any) -> list[MCPServerHandle]:
    """``Agent(mcp_servers=...)`` as a list of handles, or a configuration error."""
    if isinstance(servers, str | bytes | Mapping) or not isinstance(servers, Iterable):
        raise ConfigurationError(
            f"mcp_servers must be a list of MCPServerStdio / MCPServerHTTP, not {servers!r}"
        )
    items = list(servers)
    for item in items:
        if not isinstance(item, MCPServerHandle):
            raise ConfigurationError(
                "every MCP server must be an MCPServerStdio or MCPServerHTTP, not "
                f"{type(item).__name__}"
            )
    return items


@asynccontextmanager
async def connected_tools(
    servers: Sequence[MCPServerHandle], tools: Sequence[Tool]
) -> AsyncIterator[list[Tool]]:
    """``tools`` plus the tools of ``servers``, each connected for the ``async with``."""
    async with AsyncExitStack() as stack:
        combined = list(tools)
        for server in servers:
            connection = await stack.enter_async_context(server.connect())
            combined = merge_tools(combined, connection.tools, server.name)
        yield combined


def _one_line(exc: BaseException) -> str:
    """An exception as ``Type: message`` on one line; a group as its leaves."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_one_line(e) for e in exc.exceptions)[:300]
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__
