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

Limits do not raise: ``max_steps``, ``loop_limit``, ``deadline``, ``max_tool_calls``,
``max_total_tokens`` and the model's context window (a request that does not fit even with
earlier observations shortened) end the run with a :class:`~react_engine.types.RunResult`
whose ``stop_reason`` names the limit. Of the run errors only the error budget raises
(:class:`ErrorBudgetExhausted`), a tool raising a ``BaseException`` (:class:`RunAborted`),
API failures (:class:`ModelAPIError`) and an MCP server that cannot be connected when the
run starts (:class:`MCPServerError`). A tool that fails, an MCP tool's ``isError`` result
included, is an observation the model sees, not an exception.

Where a class was a built-in error before it joined the tree (``ValueError``,
``RuntimeError``, ``TimeoutError``) it still is one, so an ``except ValueError`` written
for it goes on catching it.

Constructors only store what they are given: no logging, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .wording import NoticeCode

if TYPE_CHECKING:
    from .types import RunResult


class ReactEngineError(Exception):
    """Root of every error raised by react-engine."""


# --- the caller's mistakes -------------------------------------------------------------


class UserError(ReactEngineError):
    """A mistake in how react-engine is called or configured."""


class ToolDefinitionError(UserError):
    """A tool that cannot be built: bad name, schema and signature disagree, ..."""

    def __init__(self, message: str, *, tool_name: str | None = None) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class TemplateError(UserError, ValueError):
    """A prompt template with a missing, unknown or malformed placeholder, or of another
    protocol's kind (a ``ValueError`` too, as a wrong template was one before)."""

    def __init__(self, message: str, *, template: str | None = None) -> None:
        super().__init__(message)
        self.template = template


class ConfigurationError(UserError):
    """Bad settings: no endpoint, unknown protocol, negative limits, ..."""


class UnknownOptionError(ConfigurationError, TypeError):
    """A keyword that neither ``Agent(...)`` nor a run takes (``Agent(max_stesp=3)``).

    A ``TypeError``, as Python's own for an unexpected keyword argument; the message names
    the option that was probably meant."""


class UnknownApprovalError(UserError, ValueError):
    """``resume(run_id, approvals=...)`` names a call id that is not awaiting approval in
    that run (a typo, a call answered already, a run that no longer waits). Nothing was
    recorded and nothing ran; ``pending`` lists the ids that do await approval."""

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
    """A new run was given the ``run_id`` of a run the store holds already: a run id names
    one run. Finish the stored one with ``agent.resume(run_id)``, or start the new one
    under another id (or none: the agent makes one up)."""

    def __init__(self, run_id: str, store: str) -> None:
        super().__init__(
            f"a run {run_id!r} is in {store} already: resume it with agent.resume({run_id!r}), "
            "or give the new run another run_id"
        )
        self.run_id = run_id


# --- the model's misbehaviour -----------------------------------------------------------


class ModelBehaviorError(ReactEngineError):
    """The model answered, but the answer could not be used."""


class ReActParseError(ModelBehaviorError, ValueError):
    """A text ReAct reply from which no thought, action or answer can be recovered.

    ``pos`` is the character offset where parsing gave up, ``line``/``column`` are
    1-based, ``expected`` says what the parser was looking for, ``code`` what is wrong
    (the code of the :class:`~react_engine.wording.Notice` a protocol tells the model).
    """

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


# --- the API ---------------------------------------------------------------------------


class ModelAPIError(ReactEngineError):
    """The chat completion API failed.

    ``status_code`` is the HTTP status when there was one; ``body`` the server's error text
    (never the request, so never the API key); ``attempts`` how many requests were made;
    ``retry_after`` the server's ``Retry-After`` in seconds; ``result`` the run so far.
    """

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
    """The request (prompt plus ``max_tokens``) did not fit the model's context window.

    Within a run it is not raised: the loop shortens the observations the model has
    already read and asks again, and a request that still does not fit ends the run with
    ``stop_reason="context_window"``. A direct :meth:`ChatModel.complete` raises it."""


class ModelUnavailableError(ModelAPIError):
    """Rate limits, 5xx, timeouts or connection errors that outlived the retry budget."""


# --- tool servers ----------------------------------------------------------------------


class MCPServerError(ReactEngineError):
    """An MCP server that could not be started, reached or listed, or a connection used after
    it was closed. ``server`` names it (its command or URL)."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class MCPToolError(ReactEngineError):
    """An MCP tool's result flagged ``isError``; the message is the text it returned.

    Raised by the tool's function, so in a run it is the call's error observation, which the
    model sees; only a direct call of the tool raises it to the caller.
    """

    def __init__(self, message: str, *, tool_name: str, server: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.server = server


# --- stores ----------------------------------------------------------------------------


class StoreError(ReactEngineError):
    """A store could not be read or written: a corrupt, truncated or read-only SQLite
    file, a lost PostgreSQL connection, a record it cannot read, an unknown run.

    ``location`` names the store (a SQLite file's path); ``result`` is the run so far when
    a run's commit failed (None otherwise, and for a run that had not begun)."""

    def __init__(
        self, message: str, *, location: str | None = None, result: RunResult | None = None
    ) -> None:
        super().__init__(message)
        self.location = location
        self.result = result


# --- runs that stop early -----------------------------------------------------------------


class RunAborted(ReactEngineError):
    """A run the engine gave up on. ``result`` holds the whole transcript so far.

    Raised as :class:`ErrorBudgetExhausted`, or as itself when a tool raised a
    ``BaseException`` (``SystemExit``, a ``CancelledError`` of its own; the original is the
    ``__cause__``). A run that reaches a limit (``max_steps``, a deadline, a budget) returns
    its :class:`~react_engine.types.RunResult` instead.
    """

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
    """Ctrl-C in a blocking run (``agent.run()``, ``agent.resume()``, a conversation's
    ``ask``). ``result`` holds the run so far: the steps done before the interrupt, with
    ``stop_reason="cancelled"``; a call the interrupt cut short is not among them.

    A ``KeyboardInterrupt``, not a :class:`ReactEngineError`: ``except Exception`` does not
    catch it, and a program that does not catch it ends as on any Ctrl-C. (An async run
    cancelled by its caller raises ``CancelledError`` with the same ``result`` on it.)"""

    def __init__(self, result: RunResult) -> None:
        super().__init__("the run was interrupted")
        self.result = result
