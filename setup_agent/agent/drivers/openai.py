"""The ``openai`` driver: any OpenAI-compatible chat-completions endpoint with tool calling.

Works with OpenAI, Ollama, vLLM, LM Studio… (``POST {base_url}/chat/completions``). Options
(from the face; the core reads no environment): ``base_url``, ``model`` (else the archetype's),
``api_key`` (optional; registered with the redactor, never logged), ``timeout``, ``http`` (an
``httpx.AsyncClient`` to use instead of a new one). The model sees only what the session
returns: redacted tool results, refs, and withheld markers in place of pasted secrets.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from ..harness import AgentSession, DriverError

__all__ = ["DEFAULT_BASE_URL", "OpenAIDriver", "openai_tools"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_API_KEY_PLACEHOLDER = "[secret:openai-api-key]"


def openai_tools(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP-style ``{name, description, inputSchema}`` specs in the OpenAI function format."""
    return [
        {
            "type": "function",
            "function": {"name": s["name"], "description": s["description"], "parameters": s["inputSchema"]},
        }
        for s in specs
    ]


class OpenAIDriver:
    """Loop: ask the model, run its tool calls through the session, until it answers in text."""

    def __init__(self, *, archetype: Any, options: dict | None = None, redactor: Any = None) -> None:
        options = dict(options or {})
        self.base_url = str(options.get("base_url") or DEFAULT_BASE_URL).rstrip("/")
        self.model = str(options.get("model") or getattr(archetype, "model", "") or "")
        if not self.model:
            raise DriverError(
                "The openai driver needs a model name: set MCP_SETUP_OPENAI_MODEL (and MCP_SETUP_OPENAI_BASE_URL "
                "for a server other than OpenAI)."
            )
        self._api_key = options.get("api_key") or None
        if self._api_key and redactor is not None:
            redactor.register(self._api_key, _API_KEY_PLACEHOLDER)
        self.timeout = float(options.get("timeout", 120.0))
        self.temperature = options.get("temperature")
        self._http: httpx.AsyncClient | None = options.get("http")

    def __repr__(self) -> str:
        return f"OpenAIDriver(base_url={self.base_url!r}, model={self.model!r}, api_key={'set' if self._api_key else 'unset'})"

    async def run(self, session: AgentSession) -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": session.archetype.prompt},
            {"role": "user", "content": session.goal},
        ]
        tools = openai_tools(session.tool_specs())
        own = self._http is None
        http = self._http or httpx.AsyncClient(timeout=self.timeout)
        try:
            while True:
                message = await self._complete(http, session, messages, tools)
                calls = message.get("tool_calls") or []
                content = message.get("content") if isinstance(message.get("content"), str) else ""
                content = session.redactor.redact(content or "")
                assistant: dict[str, Any] = {"role": "assistant", "content": content or None}
                if calls:
                    assistant["tool_calls"] = [self._clean_call(c, i) for i, c in enumerate(calls)]
                messages.append(assistant)
                if content:
                    session.record({"role": "assistant", "content": content})
                    await session.io.say(content)
                if not calls:
                    return content
                for call in assistant["tool_calls"]:
                    result = await self._run_call(session, call)
                    messages.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result, ensure_ascii=False)}
                    )
        finally:
            if own:
                await http.aclose()

    @staticmethod
    def _clean_call(call: dict[str, Any], index: int) -> dict[str, Any]:
        fn = call.get("function") or {}
        args = fn.get("arguments")
        if not isinstance(args, str):
            args = json.dumps(args if args is not None else {})
        return {
            "id": str(call.get("id") or f"call_{index}"),
            "type": "function",
            "function": {"name": str(fn.get("name") or ""), "arguments": args},
        }

    @staticmethod
    async def _run_call(session: AgentSession, call: dict[str, Any]) -> dict[str, Any]:
        fn = call["function"]
        try:
            args = json.loads(fn["arguments"] or "{}")
        except json.JSONDecodeError:
            args = None
        return await session.call(fn["name"], args)  # a non-object is refused there (and counts as a turn)

    async def _complete(
        self,
        http: httpx.AsyncClient,
        session: AgentSession,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "tools": tools, "tool_choice": "auto"}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body = session.redactor.redact_obj(body)  # last gate: refs and markers only
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        url = f"{self.base_url}/chat/completions"
        try:
            response = await http.post(url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise DriverError(f"Could not reach the model at {url}: {type(exc).__name__}.") from None
        if response.status_code >= 400:
            detail = session.redactor.redact(response.text[:300])
            raise DriverError(f"The model endpoint answered HTTP {response.status_code}: {detail}")
        try:
            data = response.json()
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise DriverError(f"The model endpoint at {url} did not answer in the chat-completions format.") from None
        if not isinstance(message, dict):
            raise DriverError(f"The model endpoint at {url} did not answer in the chat-completions format.")
        return message
