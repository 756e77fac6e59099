"""Prompt tokens per step and prefix stability, with the local model's tokenizer.

The requests are the exact JSON bodies the ``openai`` SDK sent to a mock server (one run
of the benchmark task per subject). Each is rendered to the prompt text a server would
feed the model, then tokenized by SmolLM2's own tokenizer
(``llama_cpp.Llama(model_path=find_model_path(), vocab_only=True)``, special tokens
parsed):

* **text**: ChatML, rendered by ``llama_cpp.llama_chat_format.format_chatml``, the chat
  format the local server uses for its text alias;
* **fc (llama.cpp)**: the prompt of llama.cpp's ``chatml-function-calling`` handler,
  captured by calling the handler itself with a stub model (exact, as served). That
  template drops ``tool`` messages (their content never reaches the model) and
  HTML-escapes the call arguments, so it undercounts function calling;
* **fc (tools + all messages)**: a Hermes/Qwen2.5-style rendering: the tools' JSON
  inside ``<tools>`` in the system turn, calls as ``<tool_call>`` JSON, results as
  ``<tool_response>`` user turns. This is the fair count of what function calling costs.

Prefix stability of request *n* against request *n-1*: the length *L* of their common
token prefix, as a share of request *n* (the part a provider's prompt cache can serve)
and as a share of request *n-1* (100% means the transcript only grows at the end).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from .subjects import capture_requests

__all__ = ["measure_tokens"]


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """llama.cpp logs to fd 2 even with verbose=False."""
    saved = os.dup(2)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _tokenizer() -> Callable[[str], list[int]]:
    import llama_cpp

    from react_engine.local import find_model_path

    with _quiet_stderr():
        llm = llama_cpp.Llama(model_path=str(find_model_path()), vocab_only=True, verbose=False)

    def tokenize(text: str) -> list[int]:
        return list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    return tokenize


# --- renderings --------------------------------------------------------------------------


def render_text(body: dict[str, Any]) -> str:
    from llama_cpp import llama_chat_format

    return str(llama_chat_format.format_chatml(body["messages"]).prompt)


class _Captured(Exception):
    pass


class _StubLlama:
    """Stands in for ``llama_cpp.Llama``: the handler's first completion call is the prompt."""

    verbose = False

    def create_completion(self, prompt: str, **_: Any) -> Any:
        raise _Captured(prompt)


def render_fc_llama_cpp(body: dict[str, Any]) -> str:
    from llama_cpp import llama_chat_format

    try:
        llama_chat_format.chatml_function_calling(
            _StubLlama(),  # type: ignore[arg-type]
            messages=body["messages"],
            tools=body.get("tools"),
            tool_choice=body.get("tool_choice", "auto"),
        )
    except _Captured as captured:
        return str(captured.args[0])
    raise RuntimeError("chatml_function_calling did not build a prompt")


def render_fc_full(body: dict[str, Any]) -> str:
    out = []
    tools = "\n".join(json.dumps(t["function"], ensure_ascii=False) for t in body["tools"])
    for m in body["messages"]:
        role, content = m["role"], m.get("content") or ""
        if role == "system":
            content += f"\n\n# Tools\n\n<tools>\n{tools}\n</tools>"
        elif role == "assistant":
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                payload = {"name": fn["name"], "arguments": json.loads(fn["arguments"])}
                content += f"\n<tool_call>\n{json.dumps(payload, ensure_ascii=False)}\n</tool_call>"
        elif role == "tool":
            role, content = "user", f"<tool_response>\n{content}\n</tool_response>"
        out.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
    return "".join(out) + "<|im_start|>assistant\n"


# --- measuring ---------------------------------------------------------------------------


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _kept_messages(prev: list[Any], cur: list[Any]) -> int:
    n = 0
    for x, y in zip(prev, cur, strict=False):
        if x != y:
            break
        n += 1
    return n


def _series(
    bodies: list[dict[str, Any]], render: Callable[[dict[str, Any]], str], tokenize: Any
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    prev: list[int] | None = None
    prev_messages: list[Any] = []
    for i, body in enumerate(bodies, 1):
        toks = tokenize(render(body))
        row: dict[str, Any] = {"step": i, "tokens": len(toks), "messages": len(body["messages"])}
        if prev is not None:
            common = _common_prefix(prev, toks)
            row["cache_share"] = common / len(toks)
            row["prev_reused"] = common / len(prev)
            row["messages_kept"] = _kept_messages(prev_messages, body["messages"])
            row["prev_messages"] = len(prev_messages)
        rows.append(row)
        prev, prev_messages = toks, body["messages"]
    return rows


def measure_tokens() -> dict[str, Any]:
    try:
        tokenize = _tokenizer()
    except Exception as exc:  # no llama_cpp, or no model file
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    captured = capture_requests()
    series: dict[str, list[dict[str, Any]]] = {}
    for key, bodies in captured.items():
        who, protocol = key.split("/")
        if who in ("bare-dict", "bare-chat"):  # the same requests as "bare"; a control
            continue
        if protocol == "text":
            series[f"{who}: text (ChatML)"] = _series(bodies, render_text, tokenize)
        else:
            series[f"{who}: fc (llama.cpp chatml-function-calling)"] = _series(
                bodies, render_fc_llama_cpp, tokenize
            )
            series[f"{who}: fc (tools + all messages)"] = _series(bodies, render_fc_full, tokenize)
    tools_tokens = len(tokenize(json.dumps(captured["engine/function_calling"][0]["tools"])))
    return {"series": series, "tools_json_tokens": tools_tokens}
