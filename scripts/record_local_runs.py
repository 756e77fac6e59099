"""Record whole agent runs of the embedded SmolLM2 model, one trace per protocol.

    .venv/bin/python scripts/record_local_runs.py

writes fixtures/recorded/run_<protocol>.jsonl: the trace of the demo question under each
protocol (temperature 0, seed 42), exactly as ``RunResult.to_jsonl()`` writes it.
"""

from __future__ import annotations

from pathlib import Path

from react_engine import Agent, CapabilityCache, ModelSettings, RunAborted
from react_engine.cli.agents import DEMO_TOOLS
from react_engine.local import local_server

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "recorded"
QUESTION = "What's the weather like in Beijing and Guangzhou today?"


def main() -> None:
    with local_server() as ep:
        for protocol in ("function_calling", "text"):
            agent = Agent(
                ep.model,
                DEMO_TOOLS,
                base_url=ep.base_url,
                api_key=ep.api_key,
                protocol=protocol,
                capability_cache=CapabilityCache(),
                settings=ModelSettings(temperature=0.0, seed=42, max_tokens=128),
                max_steps=4,
            )
            try:
                result = agent.run(QUESTION)
            except RunAborted as exc:
                result = exc.result
            path = OUT / f"run_{protocol}.jsonl"
            path.write_text(result.to_jsonl(), encoding="utf-8")
            print(f"{protocol}: {result.stop_reason}, {len(result.steps)} steps -> {path}")


if __name__ == "__main__":
    main()
