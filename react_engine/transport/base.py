"""The chat-model seam: one call, ``complete(request) -> response`` (``stream`` defaults
to the whole reply as one delta). :class:`~react_engine.transport.openai_model.OpenAIChatModel`
is the ``openai`` adapter, :class:`~react_engine.testing.ScriptedModel` the fake.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator

from ..types import ModelDelta, ModelRequest, ModelResponse

__all__ = ["ChatModel"]


class ChatModel(ABC):
    """Anything that answers a :class:`ModelRequest`. One method; one attempt per call."""

    base_url: str = ""
    """Where the model lives; with the model name it keys learned capabilities."""

    @abstractmethod
    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request, or raise :class:`ModelUnavailableError` (worth retrying) or
        :class:`ModelRequestError` (not)."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta]:
        """Answer one request as it is written, in :class:`ModelDelta` pieces (by default
        the whole reply of :meth:`complete` as one delta)."""
        yield ModelDelta.whole(await self.complete(request))
