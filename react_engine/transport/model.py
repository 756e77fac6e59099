"""The chat model's public names, from the modules they live in since the split.

:mod:`~react_engine.transport.base` (the :class:`ChatModel` seam),
:mod:`~react_engine.transport.wire` (the wire format and the SDK's replies and errors read),
:mod:`~react_engine.transport.openai_model` (:class:`OpenAIChatModel`),
:mod:`~react_engine.transport.clients` (its clients per event loop) and
:mod:`~react_engine.transport.retries`. This module keeps ``react_engine.model`` (the old
path) and ``react_engine.transport.model`` importable; the package imports from the
modules themselves.
"""

from .base import ChatModel
from .openai_model import DEFAULT_ATTEMPT_TIMEOUT, OpenAIChatModel
from .retries import RetryPolicy, backoff, complete_with_retries, with_retries
from .wire import (
    TRANSIENT_STATUS,
    context_overflow,
    delta_from_chunk,
    mask_key,
    mask_secret,
    message_dict,
    request_payload,
    response_from_sdk,
    translate_error,
)

__all__ = [
    "DEFAULT_ATTEMPT_TIMEOUT",
    "TRANSIENT_STATUS",
    "ChatModel",
    "OpenAIChatModel",
    "RetryPolicy",
    "backoff",
    "complete_with_retries",
    "context_overflow",
    "delta_from_chunk",
    "mask_key",
    "mask_secret",
    "message_dict",
    "request_payload",
    "response_from_sdk",
    "translate_error",
    "with_retries",
]
