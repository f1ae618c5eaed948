"""Helpers shared by the agent tests (no tests here): a stub catalog, an in-process runtime, a scripted ChatIO."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from app.runtime import Runtime, build_runtime
from app.settings import Settings
from setup_agent.secrets.prompts import PendingPrompt
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, stub_server_json

__all__ = ["SETUP_AGENT_TOOLS", "STUB", "ScriptedIO", "agent_runtime", "make_catalog"]

STUB = "io.github.mcp-setup/stub"
#: The shipped setup archetype's tools, in order: the six setup tools and the chat primitives.
SETUP_AGENT_TOOLS = (
    "mcp_setup_search",
    "mcp_setup_get",
    "mcp_setup_request_secret",
    "mcp_setup_test_connection",
    "mcp_setup_install_and_connect",
    "mcp_setup_authorize",
    "say",
    "ask_user",
)


def make_catalog(
    root: Path, expected: str, names: tuple[str, ...] = (STUB,), extra_env: list[dict[str, Any]] | None = None
) -> Path:
    """A local catalog with one stub entry per name (all run the same bundle, which wants ``expected``)."""
    bundle, sha = build_stub_bundle(root / "dist", expected_value=expected)
    catalog = root / "catalog"
    catalog.mkdir(parents=True)
    for i, name in enumerate(names):
        doc = stub_server_json(bundle.resolve().as_uri(), sha, name=name)
        if extra_env:
            doc["packages"][0]["environmentVariables"] = extra_env + doc["packages"][0]["environmentVariables"]
        (catalog / f"stub{i}.json").write_text(json.dumps(doc))
    return catalog


@asynccontextmanager
async def agent_runtime(
    home: Path, catalog: Path, keyring_backend: Any, host_env: Mapping[str, str] | None = None
) -> AsyncIterator[Runtime]:
    settings = Settings(home=home, registries="local", catalog_dir=catalog, probe_timeout_seconds=scaled(20))
    runtime = build_runtime(settings, keyring_backend=keyring_backend, host_env=host_env)
    try:
        yield runtime
    finally:
        await runtime.aclose()


Answer = str | BaseException | Callable[[str, list[str] | None], str]


class ScriptedIO:
    """A ChatIO that replays answers; secrets are answered through the broker, like a real face."""

    def __init__(
        self, runtime: Runtime, *, answers: list[Answer] = (), secrets: list[str | BaseException] = ()
    ) -> None:
        self.broker = runtime.broker
        self.answers = list(answers)
        self.secrets = list(secrets)
        self.said: list[str] = []
        self.questions: list[tuple[str, list[str] | None]] = []
        self.prompts: list[PendingPrompt] = []
        self.events: list[dict] = []
        self.unexpected: list[str] = []

    async def say(self, text: str) -> None:
        self.said.append(text)

    async def ask_user(self, question: str, choices: list[str] | None = None) -> str:
        self.questions.append((question, choices))
        if not self.answers:
            self.unexpected.append(question)
            raise AssertionError(f"unexpected question: {question} {choices}")
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer(question, choices) if callable(answer) else answer

    async def present_secret(self, pending: PendingPrompt) -> dict:
        self.prompts.append(pending)
        if not self.secrets:
            self.unexpected.append(f"secret {pending.key_name}")
            raise AssertionError(f"unexpected secret prompt for {pending.key_name}")
        value = self.secrets.pop(0)
        if isinstance(value, BaseException):
            raise value
        self.broker.answer(pending.prompt_id, value)
        return {"status": "answered"}

    async def progress(self, event: dict) -> None:
        self.events.append(event)

    def text(self) -> str:
        return "\n".join([*self.said, *(q for q, _ in self.questions)])


def choose(predicate: Callable[[str], bool]) -> Callable[[str, list[str] | None], str]:
    """An answer picking the first choice matching ``predicate``."""

    def pick(question: str, choices: list[str] | None) -> str:
        assert choices, f"expected choices for {question!r}"
        return next(c for c in choices if predicate(c))

    return pick
