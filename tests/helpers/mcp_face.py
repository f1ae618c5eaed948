"""Drive ``mcp-setup mcp`` as a real subprocess with the SDK's client, recording every message."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.message import SessionMessage

from tests.helpers.paths import REPO  # noqa: F401 - re-exported: the tests import it from here
from tests.helpers.prefork import mcp_setup_argv, real_mcp_setup_argv  # noqa: F401 - re-exported too
from tests.helpers.timeouts import scaled


def face_env(home: Path, **extra: str) -> dict[str, str]:
    """Environment for a face subprocess: isolated home, XDG dirs, no working keyring."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home / "user-home"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "MCP_SETUP_HOME": str(home / "data"),
        "XDG_DATA_HOME": str(home / "xdg-data"),
        "XDG_CONFIG_HOME": str(home / "xdg-config"),
        "XDG_CACHE_HOME": str(home / "xdg-cache"),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
        "PYTHONPATH": str(REPO),
        "MCP_SETUP_CONSENT": "never-ask",  # consent tests pass MCP_SETUP_CONSENT="ask"
    }
    (home / "user-home").mkdir(parents=True, exist_ok=True)
    env.update(extra)
    return env


@dataclass
class Recorder:
    """Every JSON-RPC message in both directions, as the JSON text on the wire."""

    messages: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(self.messages)


@asynccontextmanager
async def recorded(transport: Any, recorder: Recorder) -> AsyncIterator[Any]:
    async with transport as (read, write):
        up_send, up_recv = anyio.create_memory_object_stream[SessionMessage](0)
        down_send, down_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump_down() -> None:
            async with down_send:
                async for msg in read:
                    if isinstance(msg, SessionMessage):
                        recorder.messages.append(msg.message.model_dump_json(by_alias=True, exclude_unset=True))
                    try:
                        await down_send.send(msg)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return  # the client is gone: a last notification (list_changed) arrived too late

        async def pump_up() -> None:
            async with up_recv:
                async for msg in up_recv:
                    recorder.messages.append(msg.message.model_dump_json(by_alias=True, exclude_unset=True))
                    await write.send(msg)
            await write.aclose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_down)
            tg.start_soon(pump_up)
            yield down_recv, up_send
            tg.cancel_scope.cancel()


def elicitation_ids(recorder: Recorder) -> tuple[list[str], list[str]]:
    """The ids of the URL-mode elicitations sent, and of the ``notifications/elicitation/complete``
    that followed (2025-11-25; 2026-07-28 has neither)."""
    asked, done = [], []
    for message in map(json.loads, recorder.messages):
        params = message.get("params") or {}
        if message.get("method") == "elicitation/create" and params.get("mode") == "url":
            asked.append(params.get("elicitationId"))
        elif message.get("method") == "notifications/elicitation/complete":
            done.append(params.get("elicitationId"))
    return asked, done


class Browser:
    """Acts as the user at the secret page: opens the URL and submits a value."""

    def __init__(self) -> None:
        self.pages: list[str] = []

    async def submit(self, url: str, value: str, action: str = "submit") -> httpx.Response:
        token = parse_qs(urlsplit(url).query)["t"][0]
        async with httpx.AsyncClient(timeout=scaled(10)) as http:
            page = await http.get(url)
            page.raise_for_status()
            self.pages.append(page.text)
            post_url = url.split("?", 1)[0]
            origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
            return await http.post(
                post_url, data={"t": token, "value": value, "action": action}, headers={"Origin": origin}
            )


def elicitation_answering(browser: Browser, answers: list[str]) -> Callable[..., Awaitable[types.ElicitResult]]:
    """An elicitation callback that opens each URL and types the next answer."""

    async def callback(context: Any, params: Any) -> types.ElicitResult:
        url = getattr(params, "url", None)
        assert url, f"expected a URL-mode elicitation, got {params!r}"
        response = await browser.submit(url, answers.pop(0))
        assert response.status_code == 200, response.text
        return types.ElicitResult(action="accept")

    return callback


@asynccontextmanager
async def mcp_setup_client(
    home: Path,
    stderr_path: Path,
    recorder: Recorder,
    *,
    client_name: str = "Claude Desktop",
    elicitation_callback: Any = None,
    env: dict[str, str] | None = None,
    mode: str = "legacy",
    message_handler: Any = None,
    real: bool = False,
    **callbacks: Any,
) -> AsyncIterator[Client]:
    """``mcp-setup mcp`` with the SDK's client (``callbacks``: more ``Client`` arguments, e.g.
    ``sampling_callback``); ``real``: a new interpreter, as a client starts it (a test of what the
    process has imported), not forked from the tests' fork server (tests/helpers/prefork.py)."""
    argv = (real_mcp_setup_argv if real else mcp_setup_argv)("mcp")
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env or face_env(home), cwd=str(REPO))
    with open(stderr_path, "a") as errlog:
        transport = recorded(stdio_client(params, errlog=errlog), recorder)
        kwargs: dict[str, Any] = {"client_info": types.Implementation(name=client_name, version="1.0"), "mode": mode}
        if elicitation_callback is not None:
            kwargs["elicitation_callback"] = elicitation_callback
        if message_handler is not None:
            kwargs["message_handler"] = message_handler
        kwargs.update(callbacks)
        async with Client(transport, **kwargs) as client:
            yield client


async def call(client: Client, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await client.call_tool(name, args or {})
    text = result.content[0].text  # type: ignore[union-attr]
    data = json.loads(text)
    assert result.structured_content == data
    return data
