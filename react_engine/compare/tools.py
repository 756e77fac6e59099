"""Tools for the comparison's tasks, over fixed data so runs repeat exactly: seed 004's
workflow (users, to-dos, a leave request whose approver must be asked for), a tool that
always fails, and one whose result is far longer than an observation may be.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ..testing.tools import calculator, get_weather
from ..tools import Tool, ToolAnnotations, tool

__all__ = [
    "BUILD_LOG_LINES",
    "TASK_TOOLS",
    "USERS",
    "fetch_build_log",
    "find_user",
    "get_exchange_rate",
    "list_todo_tasks",
    "submit_leave_request",
]

USERS: dict[str, dict[str, str]] = {
    "user_1": {"id": "user_1", "name": "Zhang San", "chinese_name": "张三"},
    "user_2": {"id": "user_2", "name": "Li Si", "chinese_name": "李四"},
    "user_3": {"id": "user_3", "name": "Wang Wu", "chinese_name": "王五"},
    "user_4": {"id": "user_4", "name": "Zhao Liu", "chinese_name": "赵六"},
}

_TODOS: dict[str, list[dict[str, Any]]] = {
    "user_2": [
        {"task_id": "T-1042", "kind": "leave", "from": "Zhang San", "days": 10},
        {"task_id": "T-1077", "kind": "expense", "from": "Wang Wu", "amount_cny": 320},
    ],
    "user_4": [{"task_id": "T-1101", "kind": "leave", "from": "Li Si", "days": 1}],
}


def _normalise_name(name: str) -> str:
    return " ".join(name.replace("_", " ").split()).casefold()


@tool(annotations=ToolAnnotations(read_only=True))
def find_user(name: str) -> dict[str, str]:
    """Look up a user of the workflow system by name (English or Chinese).

    Args:
        name: The person's name, e.g. "Li Si" or "李四".
    """
    wanted = _normalise_name(name)
    for user in USERS.values():
        if wanted in (_normalise_name(user["name"]), user["chinese_name"], user["id"]):
            return dict(user)
    known = ", ".join(u["name"] for u in USERS.values())
    raise LookupError(f"no user named {name!r}; users: {known}")


@tool(annotations=ToolAnnotations(read_only=True))
def list_todo_tasks(user_id: str) -> list[dict[str, Any]]:
    """List the approval tasks waiting for a user.

    Args:
        user_id: The user's id as returned by find_user, e.g. "user_2".
    """
    if user_id not in USERS:
        raise LookupError(f"unknown user id {user_id!r}; use find_user to get an id")
    return [dict(t) for t in _TODOS.get(user_id, [])]


@tool
def submit_leave_request(
    user_id: str, days: Annotated[int, Field(ge=1, le=30)], reason: str, approver_id: str
) -> str:
    """Submit a leave request for approval. Ask the user for the approver: never choose one.

    Args:
        user_id: Id of the person taking leave (from find_user).
        days: Number of days of leave.
        reason: Why the leave is needed.
        approver_id: Id of the approver the user named (from find_user).
    """
    for uid in (user_id, approver_id):
        if uid not in USERS:
            raise LookupError(f"unknown user id {uid!r}")
    return f"submitted: leave request T-2001 for {user_id}, {days} days, approver {approver_id}"


@tool(annotations=ToolAnnotations(read_only=True))
def get_exchange_rate(base: str, quote: str) -> float:
    """Get the current exchange rate between two currencies.

    Args:
        base: Currency to convert from, e.g. "USD".
        quote: Currency to convert to, e.g. "EUR".
    """
    raise ConnectionError(f"the rate service is unavailable (HTTP 503) for {base}/{quote}")


BUILD_LOG_LINES = 400
"""Lines in the build log: about 21,700 characters, far over an observation's limit."""


@tool(annotations=ToolAnnotations(read_only=True))
def fetch_build_log(build_id: str) -> str:
    """Fetch the full console log of a CI build; its last line is the build's result.

    Args:
        build_id: The build's id, e.g. "build-2291".
    """
    lines = [
        f"[{build_id}] step {i:03d}: compiling module_{i:03d}.py ... ok"
        for i in range(1, 1 + BUILD_LOG_LINES)
    ]
    lines.append(
        f"[{build_id}] RESULT: FAILED - 3 tests failed (test_login, test_logout, test_refresh)"
    )
    return "\n".join(lines)


TASK_TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        get_weather,
        calculator,
        find_user,
        list_todo_tasks,
        submit_leave_request,
        get_exchange_rate,
        fetch_build_log,
    )
}
"""Every tool a task file may name."""
