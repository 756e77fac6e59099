"""The chat-model seam: one call, ``complete(request) -> response``.

A model may also stream (``stream(request)``, an async iterator of
:class:`~react_engine.types.ModelDelta`); the default answers with ``complete`` and yields
the whole reply as one delta, so implementing ``complete`` is enough. Assembling deltas
and live stop detection are in :mod:`react_engine.transport.streaming`, retries in
:mod:`react_engine.transport.retries`.

:class:`~react_engine.transport.openai_model.OpenAIChatModel` is the adapter to the
``openai`` SDK; :class:`~react_engine.testing.ScriptedModel` is the fake that ships with the
seam: queued replies or a function of the request, used by the tests, dry runs and the
comparison script.
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
        """Answer one request, or raise :class:`ModelAPIError`.

        Raise :class:`ModelUnavailableError` for failures worth retrying and
        :class:`ModelRequestError` for those that are not.
        """

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta]:
        """Answer one request as it is written, in :class:`ModelDelta` pieces.

        The default answers with :meth:`complete` and yields the whole reply as one delta,
        so a model that cannot stream (a scripted one, a third party's) still serves
        ``Agent.iter``. Errors are those of :meth:`complete`.
        """
        yield ModelDelta.whole(await self.complete(request))
