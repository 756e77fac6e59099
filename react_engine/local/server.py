"""The local server process: llama-cpp-python's OpenAI-compatible server, with fixes.

:class:`~react_engine.local.LocalServer` runs this file as a program. Run as ``__main__``
it watches its parent, applies its fixes to llama-cpp-python 0.3.x (:func:`install`,
docs/local-model.md) and runs the stock server main. Importing it applies nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import sys
import threading
import time
import uuid
from typing import Any

import llama_cpp
import llama_cpp.llama_chat_format
import pydantic

from react_engine.local.launcher import CHAT_FORMAT, PARENT_ENV_VAR
from react_engine.transport.grammar import GrammarError, schema_rules

# The fixes reach into llama-cpp-python's internals (0.3.x), which its type hints do not
# describe (message dicts, the patched class attributes): they go through untyped handles.
_llama: Any = llama_cpp
chat_format: Any = llama_cpp.llama_chat_format


# 0. Never outlive the engine (a parent killed with SIGKILL cannot stop us, and a Ctrl-C
#    does not reach our session): exit as soon as we are re-parented.
def watch_parent() -> None:
    """Exit this process as soon as its parent is gone (checked twice a second)."""
    parent = int(os.environ.get(PARENT_ENV_VAR) or os.getppid())

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


# 1. Prompt prefix reuse that keeps replies repeatable: only a prefix evaluated as prompt,
#    cut down to a multiple of n_batch, is kept, so the rest is evaluated in exactly the
#    batches a fresh evaluation would use (docs/local-model.md).
_generate = _llama.Llama.generate


def _generate_reusing_prefix(self: Any, tokens: Any, *args: Any, **kwargs: Any) -> Any:
    tokens = list(tokens)
    if not args and kwargs.get("reset", True):
        evaluated = getattr(self, "_react_engine_prompt_len", 0)
        limit = min(self.n_tokens, evaluated, len(tokens) - 1)
        common = 0
        ids = self.input_ids
        while common < limit and ids[common] == tokens[common]:
            common += 1
        keep = (common // self.n_batch) * self.n_batch
        if keep > 0 and self._ctx.kv_cache_seq_rm(-1, keep, -1):
            self.n_tokens = keep
        else:
            self.reset()
        self._react_engine_prompt_len = len(tokens)
    return _generate(self, tokens, *args, **kwargs)


# 2. One model entry for both protocols, and tool calling the model can follow: requests
#    without tools go to the stock "chatml" handler (verbatim, no HTML escaping, `stop`
#    and `seed` honoured); requests with tools are answered in one generation under a
#    grammar (the stock chatml-function-calling drops tool messages and escapes HTML).
def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _plain_chat(llama: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    # chatml renders assistant tool calls only through their text, and skips empty turns.
    messages = [{"role": m["role"], "content": _calls_as_tags(m)} for m in messages]
    handler = chat_format.get_chat_completion_handler("chatml")
    return handler(llama=llama, messages=messages, **kwargs)


_CALL_OPEN = "<tool_call>"
_CALL_CLOSE = "</tool_call>"


def _tools_grammar(tools: list[dict[str, Any]], tool_choice: Any) -> str:
    """GBNF for one reply: a <tool_call> whose arguments fit the named tool's schema, or
    (under "auto") a plain answer, which may not start with "<"."""
    rules = {}
    calls = []
    for i, tool in enumerate(tools):
        fn = tool["function"]
        name = fn["name"]
        if isinstance(tool_choice, dict) and tool_choice["function"]["name"] != name:
            continue
        root, tool_rules = schema_rules(fn.get("parameters") or {}, f"args{i}")
        rules.update(tool_rules)
        head = json.dumps('{"name": ' + json.dumps(name) + ', "arguments": ')
        rules[f"call{i}"] = f'{head} {root} "}}"'
        calls.append(f"call{i}")
    opening, closing = json.dumps(_CALL_OPEN + "\n"), json.dumps("\n" + _CALL_CLOSE)
    call = f"{opening} ( {' | '.join(calls)} ) {closing}"
    if tool_choice == "auto":
        rules["root"] = "tool-call | answer"
        rules["answer"] = "[^<\\x00] [^\\x00]*"
    else:
        rules["root"] = "tool-call"
    rules["tool-call"] = call
    return "\n".join(f"{k} ::= {v}" for k, v in rules.items()) + "\n"


def _grammar_for(tools: list[dict[str, Any]], tool_choice: Any) -> Any:
    """The reply's grammar, or None for tools past the grammar writer's limits (the model
    then writes unconstrained)."""
    try:
        text = _tools_grammar(tools, tool_choice)
    except GrammarError as exc:
        print(f"react-engine local server: no grammar for these tools: {exc}", file=sys.stderr)
        return None
    return _llama.LlamaGrammar.from_string(text, verbose=False)


def _tools_system(system: str, tools: list[dict[str, Any]]) -> str:
    listing = "\n".join(
        json.dumps(
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "parameters": t["function"].get("parameters", {}),
            },
            ensure_ascii=False,
        )
        for t in tools
    )
    return (
        f"{system}\n\nYou can call these tools:\n{listing}\n\n"
        f"To call a tool, reply with\n{_CALL_OPEN}\n"
        '{"name": <tool name>, "arguments": <the arguments as a JSON object>}\n'
        f"{_CALL_CLOSE}\nWhen you have what you need, reply with the answer in plain text."
    ).strip()


def _chatml_tools(
    *,
    llama: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    stop: Any = None,
    **kwargs: Any,
) -> Any:
    """Plain chat, or tool calling in ONE generation: the tools listed in the system
    message, a grammar admitting a <tool_call> or (under "auto") a plain answer."""
    names = {}
    rewritten = []
    for message in messages:
        if message["role"] == "assistant":
            for call in message.get("tool_calls") or []:
                names[call["id"]] = call["function"]["name"]
        if message["role"] == "tool":
            name = names.get(message.get("tool_call_id"), "tool")
            content = _text(message.get("content"))
            message = {"role": "user", "content": f"functions.{name} returned:\n{content}"}
        rewritten.append(message)
    if not tools or tool_choice == "none":
        return _plain_chat(llama, rewritten, stop=stop, **kwargs)
    if tool_choice is None:
        tool_choice = "auto"
    if isinstance(tool_choice, str) and tool_choice not in ("auto", "required"):
        raise ValueError(f"unknown tool_choice {tool_choice!r}")
    if isinstance(tool_choice, dict):
        wanted = tool_choice.get("function", {}).get("name")
        if wanted not in {t["function"]["name"] for t in tools}:
            raise ValueError(f"tool_choice names no tool: {wanted!r}")
    grammar = _grammar_for(tools, tool_choice)
    if grammar is not None:
        kwargs["grammar"] = grammar
    if rewritten and rewritten[0]["role"] == "system":
        system = _text(rewritten[0].get("content"))
        rewritten = rewritten[1:]
    else:
        system = "You are a helpful assistant."
    rewritten.insert(0, {"role": "system", "content": _tools_system(system, tools)})
    kwargs.pop("response_format", None)
    response = _plain_chat(llama, rewritten, stop=None, **kwargs)
    if kwargs.get("stream"):
        return _streamed_tool_reply(response)
    choice = response["choices"][0]
    call = _read_call(choice["message"].get("content") or "")
    if call is None:
        return response
    choice["message"] = {"role": "assistant", "content": None, "tool_calls": [call]}
    if choice.get("finish_reason") != "length":
        choice["finish_reason"] = "tool_calls"
    return response


def _read_call(text: str) -> dict[str, Any] | None:
    """The tool call a reply wrote as a <tool_call> block (OpenAI's shape), or None when
    it wrote an answer."""
    text = text.strip()
    if not text.startswith(_CALL_OPEN):
        return None
    body = text[len(_CALL_OPEN) :].split(_CALL_CLOSE, 1)[0].strip()
    try:
        data = json.loads(body)
        arguments = json.dumps(data["arguments"], ensure_ascii=False)
        name = data["name"]
    except (ValueError, KeyError, TypeError):
        # Cut by max_tokens inside the call: return the call with the arguments as far as
        # they got, as OpenAI does; finish_reason "length" tells the client not to run it.
        head = re.match(r'\{"name": ("(?:[^"\\]|\\.)*"), "arguments": ', body)
        if head is None:
            return None
        name = json.loads(head.group(1))
        arguments = body[head.end() :]
    return {
        "id": "call_" + uuid.uuid4().hex[:24],
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


# 3. Streams: a tool reply streams as OpenAI's do (the role, then the answer's text as it
#    is written, or the call in one ``tool_calls`` delta once complete, then the finish
#    reason), and ``stream_options.include_usage`` adds the usage chunk at the end.
def _streamed_tool_reply(chunks: Any) -> Any:
    """The chatml handler's chunks of a tool reply, as an answer or as one call."""
    held: list[dict[str, Any]] = []
    text = ""
    is_call: bool | None = None  # None while the text could still open a <tool_call>
    for chunk in chunks:
        choice = chunk["choices"][0]
        delta = choice.get("delta") or {}
        if "content" not in delta and choice.get("finish_reason") is None:
            yield chunk  # the role
            continue
        if is_call is False:
            yield chunk
            continue
        if choice.get("finish_reason") is None:
            text += delta.get("content") or ""
            held.append(chunk)
            start = text.lstrip()
            if not start or (len(start) < len(_CALL_OPEN) and _CALL_OPEN.startswith(start)):
                continue
            is_call = start.startswith(_CALL_OPEN)
            if not is_call:
                yield from held
                held.clear()
            continue
        # The last chunk: the finish reason. A text still undecided is read whole.
        call = _read_call(text)
        if call is None:
            yield from held
            yield chunk
        else:
            finish = "length" if choice.get("finish_reason") == "length" else "tool_calls"
            yield _chunk(chunk, {"tool_calls": [{"index": 0, **call}]}, None)
            yield _chunk(chunk, {}, finish)
        return
    yield from held  # no finish reason came (one always does): the text as it was


def _chunk(like: dict[str, Any], delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": like["id"],
        "object": "chat.completion.chunk",
        "created": like["created"],
        "model": like["model"],
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _generate_counting(self: Any, tokens: Any, *args: Any, **kwargs: Any) -> Any:
    """Generation that keeps its usage on the model (one request at a time), counted as
    ``create_completion`` counts it."""
    tokens = list(tokens)
    usage = {"prompt_tokens": len(tokens), "completion_tokens": 0, "total_tokens": len(tokens)}
    self._react_engine_usage = usage
    vocab = self._model.vocab
    for token in _generate_reusing_prefix(self, tokens, *args, **kwargs):
        if not _llama.llama_vocab_is_eog(vocab, token):
            usage["completion_tokens"] += 1
            usage["total_tokens"] += 1
        yield token


_create_chat_completion = _llama.Llama.create_chat_completion


def _create_chat_completion_with_usage(
    self: Any, *args: Any, stream_options: Any = None, **kwargs: Any
) -> Any:
    reply = _create_chat_completion(self, *args, **kwargs)
    wanted = isinstance(stream_options, dict) and stream_options.get("include_usage") is True
    if not (kwargs.get("stream") and wanted):
        return reply
    return _with_usage(self, reply)


def _with_usage(llama: Any, chunks: Any) -> Any:
    last: dict[str, Any] | None = None
    for chunk in chunks:
        last = chunk
        yield chunk
    usage = getattr(llama, "_react_engine_usage", None)
    if last is not None and usage is not None:
        yield {**_chunk(last, {}, None), "choices": [], "usage": dict(usage)}


def _accept_stream_options() -> None:
    """Let the server's request model keep ``stream_options`` (before
    ``llama_cpp.server.app`` is imported: the route's signature names the model)."""
    types: Any = importlib.import_module("llama_cpp.server.types")
    base: type[pydantic.BaseModel] = types.CreateChatCompletionRequest
    types.CreateChatCompletionRequest = pydantic.create_model(
        base.__name__, __base__=base, stream_options=(dict[str, Any] | None, None)
    )


def _calls_as_tags(message: dict[str, Any]) -> str:
    """An assistant turn's tool calls in the notation the model is asked to write."""
    if message["role"] != "assistant":
        return _text(message.get("content"))
    calls = ""
    for call in message.get("tool_calls") or []:
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        with contextlib.suppress(TypeError, ValueError):
            arguments = json.loads(arguments)
        shown = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        calls += f"{_CALL_OPEN}\n{shown}\n{_CALL_CLOSE}\n"
    content = _text(message.get("content"))
    return f"{content}\n{calls}".strip() if calls else content


def install() -> None:
    """Apply the fixes to the imported llama-cpp-python (once, by :func:`main`, before the
    server's app is imported)."""
    _llama.Llama.generate = _generate_counting
    chat_format.register_chat_completion_handler(CHAT_FORMAT)(_chatml_tools)
    _llama.Llama.create_chat_completion = _create_chat_completion_with_usage
    _accept_stream_options()


def main() -> None:
    """Watch the parent, apply the fixes, and run llama_cpp.server with our ``argv``."""
    watch_parent()
    install()
    serve: Any = importlib.import_module("llama_cpp.server.__main__").main
    sys.argv[0] = "llama_cpp.server"
    serve()


if __name__ == "__main__":
    main()
