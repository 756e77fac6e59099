"""The capability probe against the real embedded llama.cpp server: it takes tools in one
grammar-constrained generation, so a named call comes back native and within the schema."""

from __future__ import annotations

import asyncio
from pathlib import Path

from react_engine import CapabilityCache
from react_engine.local import LocalEndpoint
from react_engine.transport.openai_model import OpenAIChatModel
from react_engine.transport.probe import aprobe


def test_probe_of_the_local_server(local_endpoint: LocalEndpoint, tmp_path: Path) -> None:
    chat = OpenAIChatModel.connect(
        local_endpoint.base_url, local_endpoint.api_key, asynchronous=True
    )
    result = asyncio.run(aprobe(chat, local_endpoint.model))
    assert result.tools == "native", result.summary()
    assert result.stop is True
    assert result.constrained is True
    cache = CapabilityCache(tmp_path / "cache.json")
    result.remember(cache)
    assert cache.get(local_endpoint.base_url, local_endpoint.model)["function_calling"] is True
