"""A scripted OpenAI-compatible chat-completions server on loopback, recording every request.

``POST /v1/chat/completions`` answers the next step of a script. A step is an assistant
message dict, or a callable ``step(body) -> message`` that can read earlier tool results in
the request (e.g. to take a ref). After the last step it answers ``final("Done.")``, or
repeats the last step forever with ``repeat_last=True`` (a model that never stops)::

    with FakeOpenAI([tool_call("mcp_setup_search", {"query": "stub"}), final("ok")]) as fake:
        fake.base_url   # http://127.0.0.1:PORT/v1
        fake.bodies     # every request body (parsed JSON), in order
        fake.auth       # the Authorization header of each request
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import FakeHTTPServer

__all__ = ["FakeOpenAI", "final", "last_tool_result", "tool_call", "tool_calls"]

Step = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]
_ids = itertools.count(1)


def tool_calls(*calls: tuple[str, dict[str, Any] | str]) -> dict[str, Any]:
    """An assistant message calling each ``(name, arguments)`` (a str is sent as is)."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for name, args in calls
        ],
    }


def tool_call(name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    return tool_calls((name, arguments))


def final(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def last_tool_result(body: dict[str, Any]) -> dict[str, Any]:
    """The parsed content of the last ``role: tool`` message in a request body."""
    for message in reversed(body["messages"]):
        if message.get("role") == "tool":
            return json.loads(message["content"])
    raise AssertionError("no tool result in the request")


class FakeOpenAI(FakeHTTPServer):
    def __init__(self, script: list[Step], *, repeat_last: bool = False, port: int = 0) -> None:
        super().__init__(port=port)
        self.script = list(script)
        self.repeat_last = repeat_last
        self.bodies: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self.auth: list[str | None] = []
        self.step_errors: list[str] = []

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def _next(self, body: dict[str, Any]) -> dict[str, Any]:
        index = len(self.bodies) - 1
        if index < len(self.script):
            step = self.script[index]
        elif self.repeat_last and self.script:
            step = self.script[-1]
        else:
            return final("Done.")
        return step(body) if callable(step) else step

    def build_app(self) -> Starlette:
        async def completions(request: Request) -> Response:
            self.record(request)
            raw = (await request.body()).decode()
            body = json.loads(raw)
            with self._lock:
                self.raw.append(raw)
                self.bodies.append(body)
                self.auth.append(request.headers.get("authorization"))
            try:
                message = self._next(body)
            except Exception as exc:  # a broken script step: make it visible to the test
                self.step_errors.append(repr(exc))
                return JSONResponse({"error": {"message": f"script step failed: {exc!r}"}}, status_code=500)
            return JSONResponse(
                {
                    "id": f"chatcmpl-{len(self.bodies)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "fake"),
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                }
            )

        return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
