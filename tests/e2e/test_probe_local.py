"""The capability probe against the real embedded llama.cpp server: it takes tools in one
grammar-constrained generation, so a named call comes back native and within the schema.
``react-engine probe --local`` starts that server for the probe and says so."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from react_engine import CapabilityCache
from react_engine.cli.commands import main
from react_engine.local import MODEL_ALIAS, LocalEndpoint
from react_engine.transport.endpoint import connect
from react_engine.transport.probe import aprobe


def test_probe_of_the_local_server(local_endpoint: LocalEndpoint, tmp_path: Path) -> None:
    chat = connect(local_endpoint.base_url, local_endpoint.api_key, asynchronous=True)
    result = asyncio.run(aprobe(chat, local_endpoint.model))
    assert result.tools == "native", result.summary()
    assert result.stop is True
    assert result.constrained is True
    cache = CapabilityCache(tmp_path / "cache.json")
    cache.remember(result.base_url, result.model, **result.overrides())
    assert cache.get(local_endpoint.base_url, local_endpoint.model)["function_calling"] is True


def test_the_probe_command_with_local(
    local_model_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The embedded model, probed from the command line: native calls, nothing recorded
    (its next server listens on another port)."""
    assert main(["probe", "--local", "--json"]) == 0
    out = capsys.readouterr()
    shown = json.loads(out.out)
    assert (shown["model"], shown["tools"], shown["stop"]) == (MODEL_ALIAS, "native", True)
    assert shown["base_url"].startswith("http://127.0.0.1:")
    assert shown["recorded"] is None and shown["cache"] is None
    assert ">> local server ready at" in out.err
    assert main(["probe", "--local"]) == 0
    text = capsys.readouterr().out
    assert "tool calls:   native" in text
    assert "recorded:     nothing (the embedded server takes a new port" in text
    assert not Path(os.environ["XDG_STATE_HOME"]).exists()  # no cache file written
