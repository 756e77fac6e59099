"""The history as JSON, and back: what a store writes and reads.

Every record carries ``"v"`` (the format's version) and ``"type"``. What is stored is the
protocol-neutral history (:class:`~react_engine.types.UserTurn` and
:class:`~react_engine.types.Step`), never a protocol's messages: a session begun under
function calling renders under text later (or the reverse), and a step's call ids are made
fit for the protocol that renders it, as for any history.

A record of a newer version than this code reads is refused with :class:`StoreError`
rather than read wrong.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from ..errors import StoreError
from ..run.events import RunNotice
from ..types import (
    ActionRecord,
    HistoryItem,
    ModelResponse,
    Step,
    ToolCall,
    Usage,
    UserTurn,
    to_jsonable,
)
from ..wording import Notice

__all__ = [
    "VERSION",
    "RunBusy",
    "StoreError",
    "dump_item",
    "dump_record",
    "dump_reply",
    "dumps",
    "load_item",
    "load_record",
    "load_reply",
    "storable",
]

VERSION = 1
"""The version written in every record; readers accept this one and older."""


class RunBusy(StoreError):
    """The run is being run by another worker (or another task of this process): two
    workers never run one run at once (:meth:`RunStore.hold
    <react_engine.store.RunStore.hold>`)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} is being run by another worker")
        self.run_id = run_id


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(value: dict[str, Any]) -> str:
    """``value`` as compact JSON. The records are built field by field (below), faster than
    walking the dataclasses; a value JSON cannot take as it is (a tool's arguments nested a
    thousand levels deep, a cycle, a key that is not a string) goes through
    :func:`~react_engine.types.to_jsonable` first, which cuts it, as a trace does."""
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError):
        text = _ENCODER.encode(to_jsonable(value))
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: written as its JSON escape, lossless
            text = _ASCII.encode(json.loads(text))
    return text


_ASCII = json.JSONEncoder(separators=(",", ":"))


def storable(text: str) -> str:
    """``text`` as any store's text column takes it: a lone surrogate (no UTF-8 encoding
    has one) written as its escape ``\\udXXX``, a NUL (PostgreSQL's ``text`` refuses it)
    as ``\\x00``. For the columns shown in listings only: what a run needs again (its
    question) is kept exactly in its JSON header too."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _checked(data: Any, kind: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise StoreError(f"a stored {kind} is not a JSON object: {str(data)[:80]!r}")
    version = data.get("v")
    if not isinstance(version, int) or version > VERSION:
        raise StoreError(
            f"a stored {kind} has format version {version!r}; this react-engine reads "
            f"versions up to {VERSION} (upgrade react-engine to read it)"
        )
    return data


def dump_item(item: HistoryItem) -> dict[str, Any]:
    """One history item as a JSON-ready record (the fields of ``to_jsonable(item)``)."""
    if isinstance(item, UserTurn):
        return {"v": VERSION, "type": "user", "content": item.content}
    if isinstance(item, Step):
        return {
            **{name: getattr(item, name) for name in _STEP},
            "actions": [_record(a) for a in item.actions],
            "repairs": list(item.repairs),
            "usage": _usage_record(item.usage),
            "events": [notice.message for notice in item.notices],
            "v": VERSION,
            "type": "step",
        }
    raise StoreError(f"not a history item: {type(item).__name__}")


_STEP = [f.name for f in fields(Step) if f.name not in ("actions", "repairs", "usage", "notices")]


def load_item(data: Any) -> HistoryItem:
    record = _checked(data, "history item")
    kind = record.get("type")
    if kind == "user":
        return UserTurn(str(record.get("content", "")))
    if kind == "step":
        return Step(
            index=int(record["index"]),
            kind=record["kind"],
            protocol=str(record.get("protocol", "")),
            text=record.get("text"),
            thought=record.get("thought"),
            reasoning=record.get("reasoning"),
            actions=[load_record(a) for a in record.get("actions") or ()],
            final_answer=record.get("final_answer"),
            repairs=list(record.get("repairs") or ()),
            feedback=record.get("feedback"),
            usage=_usage(record.get("usage") or {}),
            started_at=float(record.get("started_at", 0.0)),
            duration_s=float(record.get("duration_s", 0.0)),
            model_time_s=float(record.get("model_time_s", 0.0)),
            notices=[
                RunNotice(int(record["index"]), str(message))
                for message in record.get("events") or ()
            ],
        )
    raise StoreError(f"a stored history item has an unknown type {kind!r}")


def _record(record: ActionRecord) -> dict[str, Any]:
    return {
        **{name: getattr(record, name) for name in _RECORD},
        "error": None if record.error is None else to_jsonable(record.error),
        "repairs": list(record.repairs),
        "lossy": list(record.lossy),
    }


_RECORD = [f.name for f in fields(ActionRecord) if f.name not in ("error", "repairs", "lossy")]
_USAGE = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "requests")


def _usage_record(usage: Usage) -> dict[str, Any]:
    return {name: getattr(usage, name) for name in _USAGE}


def dump_record(record: ActionRecord) -> dict[str, Any]:
    """A call's record (the fields of ``to_jsonable(record)``)."""
    return {**_record(record), "v": VERSION}


def load_record(data: Any) -> ActionRecord:
    record = data if isinstance(data, dict) and "v" not in data else _checked(data, "call")
    return ActionRecord(
        id=str(record["id"]),
        tool=str(record["tool"]),
        arguments=record["arguments"],
        raw_arguments=str(record.get("raw_arguments", "")),
        observation=str(record.get("observation", "")),
        status=record.get("status", "ok"),
        error=Notice.load(record.get("error")),
        duration_s=float(record.get("duration_s", 0.0)),
        salvaged=bool(record.get("salvaged", False)),
        exact=record.get("exact") is True,  # absent in older records: encoded again
    )


def dump_reply(reply: ModelResponse) -> dict[str, Any]:
    """A model reply (the fields of ``to_jsonable(reply)``)."""
    return {
        "content": reply.content,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls
        ],
        "reasoning": reply.reasoning,
        "finish_reason": reply.finish_reason,
        "usage": _usage_record(reply.usage),
        "model": reply.model,
        "events": [to_jsonable(e) for e in reply.events],
        "v": VERSION,
    }


def load_reply(data: Any) -> ModelResponse:
    record = _checked(data, "model reply")
    return ModelResponse(
        content=record.get("content"),
        tool_calls=[
            ToolCall(c.get("id"), str(c["name"]), str(c["arguments"]))
            for c in record.get("tool_calls") or ()
        ],
        reasoning=record.get("reasoning"),
        finish_reason=record.get("finish_reason"),
        usage=_usage(record.get("usage") or {}),
        model=record.get("model"),
        events=[e for e in map(Notice.load, record.get("events") or ()) if e is not None],
    )


def _usage(data: dict[str, Any]) -> Usage:
    return Usage(**{name: int(data.get(name, 0)) for name in _USAGE})
