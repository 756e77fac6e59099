"""The react-engine error tree.

Every error the engine raises derives from one root, and the caller's own mistakes are
kept apart from the model's misbehaviour and from transport failures::

    ReactEngineError
    ├── UserError                  the caller's mistake: fix your code or configuration
    │   ├── ToolDefinitionError    a tool whose schema and signature disagree, a bad name...
    │   ├── TemplateError          a template with a bad placeholder, or another protocol's
    │   ├── GrammarError           a JSON Schema the grammar writer cannot turn into GBNF
    │   ├── ConfigurationError     no endpoint, an unknown protocol name, bad limits...
    │   │   └── UnknownOptionError an option nobody takes (also a TypeError)
    │   ├── UnknownApprovalError   an approval for a call that is not awaiting one (a ValueError)
    │   └── RunExistsError         a new run given the run_id of a stored run (a ValueError)
    ├── ModelBehaviorError         the model answered, but not in a usable way
    │   ├── ReActParseError        a text reply from which nothing could be recovered
    │   ├── JSONRepairError        action input that is not JSON and cannot be repaired
    │   ├── ToolArgumentsError     arguments a tool cannot take (tools/base.py: an observation)
    │   └── OutputError            an answer not valid for the output_type (protocols/output.py)
    ├── ModelAPIError              the chat API failed (after retries, where retrying made sense)
    │   ├── ModelRequestError      a 4xx the server will answer the same way again
    │   │   └── ContextWindowExceeded  the request did not fit the model's context window
    │   ├── ModelUnavailableError  transient failures that outlived the retry budget
    │   └── LocalServerError       the embedded llama.cpp server could not start (local/)
    ├── MCPServerError             an MCP server could not be reached or listed (mcp.py)
    ├── MCPToolError               an MCP tool's result flagged isError (an observation in a run)
    ├── ThreadsExhausted           too many sync calls stuck past their timeout (runtime.py)
    ├── DeadlinePassed             the engine's own time limit for a call (runtime.py)
    ├── StoreError                 a store that cannot be read or written (react_engine.store)
    │   └── RunBusy                a stored run another worker holds
    └── RunAborted                 a run the engine gave up on; carries the transcript so far
        └── ErrorBudgetExhausted   too many consecutive errors

    KeyboardInterrupt
    └── RunInterrupted             Ctrl-C in a blocking run; carries the run so far

Limits do not raise: they end the run with a ``stop_reason`` (docs/errors.md). A class
that was a built-in error before it joined the tree still is one. Constructors only store
what they are given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .wording import NoticeCode

if TYPE_CHECKING:
    from .types import RunResult


class ReactEngineError(Exception):
    """Root of every error raised by react-engine."""


class UserError(ReactEngineError):
    """A mistake in how react-engine is called or configured."""


class ToolDefinitionError(UserError):
    """A tool that cannot be built: bad name, schema and signature disagree, ..."""

    def __init__(self, message: str, *, tool_name: str | None = None) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class TemplateError(UserError, ValueError):
    """A prompt template with a missing, unknown or malformed placeholder, or of another
    protocol's kind."""

    def __init__(self, message: str, *, template: str | None = None) -> None:
        super().__init__(message)
        self.template = template


class ConfigurationError(UserError):
    """Bad settings: no endpoint, unknown protocol, negative limits, ..."""


class UnknownOptionError(ConfigurationError, TypeError):
    """A keyword that neither ``Agent(...)`` nor a run takes (``Agent(max_stesp=3)``); the
    message names the option probably meant."""


class UnknownApprovalError(UserError, ValueError):
    """``resume(run_id, approvals=...)`` names a call id not awaiting approval in that run;
    nothing was recorded or ran, and ``pending`` lists the ids that do."""

    def __init__(self, run_id: str, unknown: tuple[str, ...], pending: tuple[str, ...]) -> None:
        names = ", ".join(repr(i) for i in unknown)
        if pending:
            waiting = ", ".join(repr(i) for i in pending)
            message = f"run {run_id!r} has no call {names} awaiting approval; waiting: {waiting}"
        else:
            message = f"run {run_id!r} has no call awaiting approval (approval given: {names})"
        super().__init__(message)
        self.run_id = run_id
        self.unknown = unknown
        self.pending = pending


class RunExistsError(UserError, ValueError):
    """A new run was given the ``run_id`` of a run the store holds already."""

    def __init__(self, run_id: str, store: str) -> None:
        super().__init__(
            f"a run {run_id!r} is in {store} already: resume it with agent.resume({run_id!r}), "
            "or give the new run another run_id"
        )
        self.run_id = run_id


class ModelBehaviorError(ReactEngineError):
    """The model answered, but the answer could not be used."""


class ReActParseError(ModelBehaviorError, ValueError):
    """A text ReAct reply from which no thought, action or answer can be recovered.

    ``pos`` is where parsing gave up (``line``/``column`` 1-based), ``expected`` what the
    parser looked for, ``code`` the notice a protocol tells the model."""

    def __init__(
        self,
        message: str,
        *,
        text: str,
        pos: int,
        expected: str,
        code: NoticeCode = NoticeCode.UNREADABLE,
    ) -> None:
        line = text.count("\n", 0, pos) + 1
        column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"{message} (line {line}, column {column}; expected {expected})")
        self.reason = message
        """What is wrong, without where (the message's first part)."""
        self.text = text
        self.pos = pos
        self.line = line
        self.column = column
        self.expected = expected
        self.code = code


class JSONRepairError(ModelBehaviorError, ValueError):
    """Text that is not JSON and that no repair turns into the value the model meant."""

    def __init__(self, message: str, *, text: str, pos: int) -> None:
        super().__init__(f"{message} (at offset {pos})")
        self.text = text
        self.pos = pos


class ModelAPIError(ReactEngineError):
    """The chat completion API failed. ``body`` is the server's error text (never the
    request, so never the API key); ``retry_after`` its ``Retry-After`` in seconds;
    ``attempts`` the requests made; ``result`` the run so far."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        body: str | None = None,
        attempts: int = 1,
        retry_after: float | None = None,
        result: RunResult | None = None,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status_code = status_code
        self.body = body
        self.attempts = attempts
        self.result = result


class ModelRequestError(ModelAPIError):
    """A client error (4xx other than 429): retrying the same request will not help."""


class ContextWindowExceeded(ModelRequestError):
    """The request did not fit the model's context window (raised by a direct model call;
    a run shortens observations, then stops with ``stop_reason="context_window"``)."""


class ModelUnavailableError(ModelAPIError):
    """Rate limits, 5xx, timeouts or connection errors that outlived the retry budget."""


class MCPServerError(ReactEngineError):
    """An MCP server that could not be started, reached or listed, or a connection used after
    it was closed. ``server`` names it (its command or URL)."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class MCPToolError(ReactEngineError):
    """An MCP tool's result flagged ``isError``; the message is the text it returned (in a
    run, the call's error observation)."""

    def __init__(self, message: str, *, tool_name: str, server: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.server = server


class StoreError(ReactEngineError):
    """A store could not be read or written (a corrupt or read-only file, a lost connection,
    an unknown run). ``location`` names the store; ``result`` is the run so far when a run's
    commit failed."""

    def __init__(
        self, message: str, *, location: str | None = None, result: RunResult | None = None
    ) -> None:
        super().__init__(message)
        self.location = location
        self.result = result


class RunAborted(ReactEngineError):
    """A run the engine gave up on; ``result`` holds the transcript so far. Raised as
    :class:`ErrorBudgetExhausted`, or as itself when a tool raised a ``BaseException`` (the
    original is the ``__cause__``)."""

    def __init__(self, message: str, *, result: RunResult) -> None:
        super().__init__(message)
        self.result = result


class ErrorBudgetExhausted(RunAborted):
    """Too many consecutive errors (format errors, failing tools, invalid arguments)."""

    def __init__(self, message: str, *, result: RunResult, attempts: int, last_reply: Any) -> None:
        super().__init__(message, result=result)
        self.attempts = attempts
        self.last_reply = last_reply


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C in a blocking run; ``result`` holds the steps done before it, with
    ``stop_reason="cancelled"``. A ``KeyboardInterrupt``, so ``except Exception`` does not
    catch it (an async run cancelled by its caller raises ``CancelledError``, same
    ``result``)."""

    def __init__(self, result: RunResult) -> None:
        super().__init__("the run was interrupted")
        self.result = result
