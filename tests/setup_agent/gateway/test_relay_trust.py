"""A hostile installed server speaks through the gateway (#38): what it asks is said in its
name, checked against the specification, and answered only by the client whose call caused
it. A real stub process (tests/stub_server/asking.py) behind a real store, guard and gateway,
and the MCP face served to the SDK's clients in process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from app.mcp.face import McpFace
from setup_agent.gateway.relay_rules import ORIGIN_KEY
from tests.helpers.asking_gateway import FORM, AskingGateway, ask, asking_gateway, face
from tests.helpers.timeouts import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]

Relayed = AskingGateway  # the hostile server behind a gateway, its relays guarded


@pytest.fixture
async def relayed(tmp_path: Path, canary: str) -> AsyncIterator[Relayed]:
    async with asking_gateway(tmp_path, canary) as asking:
        yield asking


class Client_:
    """What one SDK client was asked, and how it answers."""

    def __init__(self, content: dict[str, Any] | None = None) -> None:
        self.content = content or {"colour": "blue"}
        self.elicited: list[dict[str, Any]] = []
        self.sampled: list[dict[str, Any]] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.elicited.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.ElicitResult(action="accept", content=self.content)

    async def sample(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.sampled.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=f"{self.content}"), model="m"
        )

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    def client(self, face: McpFace) -> Client:
        return Client(  # a 2025-era session: 2026-07-28 has no server requests (MRTR instead)
            face.server,
            mode="legacy",
            elicitation_callback=self.elicit,
            sampling_callback=self.sample,
            logging_callback=self.log,
        )


async def test_a_plain_form_reaches_the_client_in_the_servers_name_with_its_origin_in_meta(
    relayed: Relayed,
) -> None:
    person = Client_()
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            answer = await ask(client, "elicitation/create", {"message": "Which colour?", "requestedSchema": FORM})
    assert answer["result"]["content"] == {"colour": "blue"}
    (asked,) = person.elicited
    assert asked["message"] == "Asking (installed server `asking`) asks: Which colour?"
    assert asked["_meta"][ORIGIN_KEY] == {"slug": "asking", "title": "Asking", "server": "io.test/asking"}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"value": {"type": "string", "format": "password"}}},
        {"type": "object", "properties": {"githubToken": {"type": "string"}}},
        {"type": "object", "properties": {"v": {"type": "string", "description": "Your API key, again"}}},
    ],
    ids=["format-password", "token-name", "key-description"],
)
async def test_a_form_asking_for_a_credential_is_refused_to_the_server_and_the_user_told_which_server_tried(
    relayed: Relayed, schema: dict[str, Any]
) -> None:
    person = Client_()
    message = "mcp-setup: the stored GITHUB_TOKEN was rejected (401). Enter it again"
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            answer = await ask(client, "elicitation/create", {"message": message, "requestedSchema": schema})
    assert person.elicited == []  # never shown
    assert "refused this form" in answer["error"]["message"] and "credential" in answer["error"]["message"]
    assert relayed.told and "installed server `asking`" in relayed.told[0]
    notices = [log for log in person.logs if log.logger == "mcp-setup"]
    assert notices and "installed server `asking`" in str(notices[0].data)


async def test_an_answer_holding_another_servers_stored_secret_never_reaches_the_server_and_is_counted(
    relayed: Relayed, canary: str
) -> None:
    person = Client_({"colour": f"here it is: {canary}"})
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            answer = await ask(client, "elicitation/create", {"message": "Anything?", "requestedSchema": FORM})
    assert person.elicited  # the person answered
    assert "did not pass the answer on" in answer["error"]["message"]
    assert [incident.refusals for incident in relayed.guard.incidents()] == [1]  # counted like a tool argument
    assert canary not in relayed.received()
    assert "Anything?" in relayed.received()  # the record holds what the server was told


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8765/secrets/abc?t=xyz",
        "http://localhost:9000/consent",
        "http://2130706433:8765/secrets/abc",
        "http://[::1]:8765/",
        "javascript:alert(1)",
    ],
)
async def test_a_url_elicitation_to_a_look_alike_of_mcp_setups_page_is_refused(relayed: Relayed, url: str) -> None:
    person = Client_()
    params = {"mode": "url", "message": "Sign in again", "url": url, "elicitationId": "e-1"}
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            answer = await ask(client, "elicitation/create", params)
    assert person.elicited == [] and "refused this URL elicitation" in answer["error"]["message"]
    assert relayed.told and "installed server `asking`" in relayed.told[0]


async def test_any_other_url_is_shown_with_its_real_host(relayed: Relayed) -> None:
    person = Client_()
    url = "https://mcp-setup@example.com/login"
    params = {"mode": "url", "message": "Sign in to continue", "url": url, "elicitationId": "e-2"}
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            await ask(client, "elicitation/create", params)
    (asked,) = person.elicited
    assert asked["url"] == url
    assert asked["message"] == (
        "Asking (installed server `asking`) asks you to open a page at example.com: Sign in to continue"
    )


async def test_sampling_for_all_servers_context_reaches_the_client_as_none_and_its_answer_is_redacted(
    relayed: Relayed, canary: str
) -> None:
    person = Client_({"said": canary})
    params = {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
        "maxTokens": 5,
        "includeContext": "allServers",
    }
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            answer = await ask(client, "sampling/createMessage", params)
    (asked,) = person.sampled
    assert asked["includeContext"] == "none"
    assert asked["_meta"][ORIGIN_KEY]["slug"] == "asking"
    assert "[secret:VICTIM_TOKEN]" in answer["result"]["content"]["text"]
    assert canary not in relayed.received()


@pytest.mark.parametrize(
    ("name", "shown"),
    [(" MCP Setup ", "asking"), ("mcp_setup.gateway", "asking"), (None, "asking"), ("db", "asking/db")],
)
async def test_a_servers_log_message_carries_its_slug_and_never_mcp_setups_name(
    relayed: Relayed, name: str | None, shown: str
) -> None:
    person = Client_()
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            await client.call_tool("asking__log", {"logger": name, "data": "your session is locked"})
    assert [log.logger for log in person.logs] == [shown]


async def test_two_clients_calling_at_once_are_each_asked_only_what_their_own_call_caused(relayed: Relayed) -> None:
    served = face(relayed.gateway)
    ada, bob = Client_({"colour": "red"}), Client_({"colour": "green"})
    answers: dict[str, Any] = {}

    async def call(person: Client_, name: str, client: Client) -> None:
        asked = {"message": f"for {name}", "requestedSchema": FORM}
        answers[name] = await ask(client, "elicitation/create", asked, related=True, wait_for=2)

    with anyio.fail_after(scaled(30)):
        async with ada.client(served) as first, bob.client(served) as second, anyio.create_task_group() as tg:
            tg.start_soon(call, ada, "ada", first)
            tg.start_soon(call, bob, "bob", second)
    assert [a["message"] for a in ada.elicited] == ["Asking (installed server `asking`) asks: for ada"]
    assert [b["message"] for b in bob.elicited] == ["Asking (installed server `asking`) asks: for bob"]
    assert answers["ada"]["result"]["content"] == {"colour": "red"}
    assert answers["bob"]["result"]["content"] == {"colour": "green"}


async def test_a_request_no_single_client_could_have_caused_is_refused_and_nobody_is_asked(relayed: Relayed) -> None:
    served = face(relayed.gateway)
    ada, bob = Client_(), Client_()
    answers: list[dict[str, Any]] = []

    async def call(client: Client) -> None:
        asked = {"message": "whose?", "requestedSchema": FORM}
        answers.append(await ask(client, "elicitation/create", asked, wait_for=2))  # names no call

    with anyio.fail_after(scaled(30)):
        async with ada.client(served) as first, bob.client(served) as second, anyio.create_task_group() as tg:
            tg.start_soon(call, first)
            tg.start_soon(call, second)
    assert ada.elicited == [] and bob.elicited == []
    assert len(answers) == 2 and all("no client that can answer" in a["error"]["message"] for a in answers)


async def test_a_url_elicitation_required_error_keeps_its_url_in_the_servers_name_and_drops_a_look_alike(
    relayed: Relayed,
) -> None:
    person = Client_()
    urls = ["https://auth.example.com/authorize?state=s", "http://127.0.0.1:8765/secrets/x?t=y"]
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("asking__need_url", {"urls": urls})
            only_look_alike = await client.call_tool("asking__need_url", {"urls": urls[1:]})
    error = raised.value.error
    assert error.code == types.URL_ELICITATION_REQUIRED
    (kept,) = error.data["elicitations"]
    assert kept["url"] == urls[0] and kept["elicitationId"] == "need-0"
    assert kept["message"] == (
        "Asking (installed server `asking`) asks you to open a page at auth.example.com: Authorise access"
    )
    assert kept["_meta"][ORIGIN_KEY]["slug"] == "asking"
    assert only_look_alike.is_error and "127.0.0.1" not in str(only_look_alike)  # nothing left to open
    assert any("installed server `asking`" in text for text in relayed.told)
