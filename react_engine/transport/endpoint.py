"""Where a model is: the engine's one rule from a base URL and an API key to a chat model.

:func:`connect` (used by the agent, the CLI, the comparison and the evaluation): the URL is
``base_url`` else ``$OPENAI_BASE_URL``, an ``http(s)://`` URL; the key is ``api_key`` else
``$OPENAI_API_KEY`` else :data:`NO_KEY`; with neither, a :class:`ConfigurationError`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import ConfigurationError
from .wire import mask_url

if TYPE_CHECKING:
    from .openai_model import OpenAIChatModel

__all__ = ["API_KEY_ENV", "BASE_URL_ENV", "NO_KEY", "api_key_from", "base_url_from", "connect"]

BASE_URL_ENV = "OPENAI_BASE_URL"
API_KEY_ENV = "OPENAI_API_KEY"
NO_KEY = "sk-no-key-required"
"""The key sent to a server that asked for none (the SDK requires one)."""


def base_url_from(base_url: str | None) -> str | None:
    """``base_url``, else ``$OPENAI_BASE_URL``; ``None`` when neither is set."""
    return base_url or os.environ.get(BASE_URL_ENV) or None


def api_key_from(api_key: str | None) -> str | None:
    """``api_key``, else ``$OPENAI_API_KEY``; ``None`` when neither is set."""
    return api_key or os.environ.get(API_KEY_ENV) or None


def connect(
    base_url: str | None = None, api_key: str | None = None, *, asynchronous: bool
) -> OpenAIChatModel:
    """A chat model for the endpoint at ``base_url`` with ``api_key``, by the rule above
    (blocking calls, or ``asynchronous``)."""
    url, key = base_url_from(base_url), api_key_from(api_key)
    if url and not url.lower().startswith(("http://", "https://")):
        raise ConfigurationError(
            f"base_url must be an http:// or https:// URL, not {mask_url(url)!r} "
            "(for example http://localhost:8080/v1)"
        )
    if not url and not key:
        raise ConfigurationError(
            f"no endpoint: pass client=, base_url= or api_key=, set {BASE_URL_ENV} / "
            f"{API_KEY_ENV}, or start the embedded model with react_engine.local_server()"
        )
    import openai  # the SDK loads with the first client

    from .openai_model import OpenAIChatModel

    client = (openai.AsyncOpenAI if asynchronous else openai.OpenAI)(
        base_url=url, api_key=key or NO_KEY
    )
    return OpenAIChatModel(client, owned=True)
