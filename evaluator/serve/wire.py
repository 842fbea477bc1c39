"""OpenAI's chat-completions wire format, as `tinyrouter serve` reads and writes it.

A request is checked as strictly as OpenAI checks it (a wrong model is a 404, a malformed
message a 400) and reduced to the one query the loop plays. Sampling options (temperature,
max_tokens, …) are accepted and ignored: the rules fix how the pool is called. Responses are
OpenAI's objects plus a `tinyrouter` field (which models and roles answered, turns, cost);
OpenAI's clients keep fields they do not know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from evaluator.errors import TinyRouterError

# OpenAI's error types, by what the client should do
INVALID, AUTH, NOT_FOUND, RATE_LIMIT = ("invalid_request_error", "authentication_error",
                                        "not_found_error", "rate_limit_error")
POOL, TIMEOUT, SERVER, OVERLOADED = "pool_error", "timeout_error", "server_error", "overloaded"
# a conversation's roles, and how each is labelled when several messages make one query
SPEAKERS = {"system": "System", "developer": "System", "user": "User", "assistant": "Assistant"}
UNSUPPORTED = ("tools", "functions", "tool_choice", "function_call")
STREAM_CHUNK_CHARS = 256  # an answer streams in pieces of this many characters
OPTIONS_KEY = "tinyrouter"  # the request's own options: {"tinyrouter": {"transcript": true}}


class ApiError(TinyRouterError):
    """A request the server answers with an OpenAI-shaped error instead of a completion."""

    def __init__(self, status: int, kind: str, message: str, code: str | None = None,
                 param: str | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.kind, self.code, self.param = status, kind, code, param
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param,
                          "code": self.code}}

    def headers(self) -> dict[str, str]:
        return {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}


@dataclass(frozen=True)
class ChatRequest:
    """What the loop needs of a chat request: its query, and how to answer."""

    query: str
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage
    transcript: bool = False  # return every turn's full output
    messages: int = field(default=1, compare=False)


def _invalid(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, INVALID, message, "invalid_value" if param else None, param)


def _text(content: Any, where: str) -> str:
    """A message's text: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        if any(part.get("type") != "text" or not isinstance(part.get("text"), str)
               for part in content):
            raise _invalid("only text content parts are supported", where)
        return "\n".join(part["text"] for part in content)
    raise _invalid("content must be a string or a list of text parts", where)


def render_query(messages: list[tuple[str, str]]) -> str:
    """The conversation as the loop's query: a lone user message as written; otherwise each
    message as a `Role:` block, in order."""
    if len(messages) == 1:
        return messages[0][1]
    return "\n\n".join(f"{SPEAKERS[role]}:\n{text}" for role, text in messages)


def parse_chat(raw: bytes, model_id: str) -> ChatRequest:
    """The request in a chat-completions body, or the ApiError OpenAI would answer with."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise _invalid("the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise _invalid("the body must be a JSON object")
    if body.get("model") != model_id:
        raise ApiError(404, NOT_FOUND, f"the model {str(body.get('model'))[:100]!r} does not "
                       f"exist; this server routes through {model_id!r}", "model_not_found",
                       "model")
    for name in UNSUPPORTED:
        if body.get(name):
            raise _invalid("tool calls are not supported: the pool answers in text", name)
    if body.get("n", 1) != 1:
        raise _invalid("n must be 1: the loop plays one session per request", "n")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("messages must be a non-empty list", "messages")
    conversation = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or message.get("role") not in SPEAKERS:
            raise _invalid(f"each message needs a role among {', '.join(SPEAKERS)}", where)
        conversation.append((message["role"], _text(message.get("content"), f"{where}.content")))
    if not any(role == "user" and text.strip() for role, text in conversation):
        raise _invalid("the conversation needs a user message with some text", "messages")
    stream, options = body.get("stream", False), body.get("stream_options") or {}
    mine = body.get(OPTIONS_KEY) or {}
    if not isinstance(stream, bool) or not isinstance(options, dict) or not isinstance(mine, dict):
        raise _invalid("stream must be a boolean, stream_options and tinyrouter objects")
    return ChatRequest(query=render_query(conversation), stream=stream,
                       include_usage=options.get("include_usage") is True,
                       transcript=mine.get("transcript") is True, messages=len(conversation))


# ---------------------------------------------------------------- responses


def completion(request_id: str, created: int, model: str, answer: str, finish_reason: str,
               usage: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """A `chat.completion` object."""
    return {"id": request_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                         "finish_reason": finish_reason, "logprobs": None}],
            "usage": usage, OPTIONS_KEY: summary}


def chunk(request_id: str, created: int, model: str, delta: dict[str, Any],
          finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    """A `chat.completion.chunk` object with one choice."""
    return {"id": request_id, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [{"index": 0, "delta": delta,
                                         "finish_reason": finish_reason, "logprobs": None}],
            **extra}


def usage_chunk(request_id: str, created: int, model: str,
                usage: dict[str, Any]) -> dict[str, Any]:
    """The last chunk of a stream asked for `include_usage`: no choices, the usage."""
    return {"id": request_id, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [], "usage": usage}


def pieces(text: str, size: int = STREAM_CHUNK_CHARS) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def event(data: dict[str, Any] | str) -> bytes:
    """One server-sent event: `data: {json}` and a blank line."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {payload}\n\n".encode()


DONE = event("[DONE]")


def model_card(model_id: str, created: int, owner: str, weights_sha256: str) -> dict[str, Any]:
    """One entry of `GET /v1/models`."""
    return {"id": model_id, "object": "model", "created": created, "owned_by": owner,
            "weights_sha256": weights_sha256}
