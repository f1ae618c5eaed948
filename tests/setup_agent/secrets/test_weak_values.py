"""Issue #10, item 2: the user is warned at the prompt when a value is short or guessable
(secret page, terminal; the web modal runs the same rule in ui/js/secret_modal.js)."""

from __future__ import annotations

import io
import re

import httpx
import pytest

from app.cli.terminal import TerminalIO
from app.pages.server import SecretPageServer
from setup_agent.secrets.prompts import WEAK_VALUE_WARNING, PromptBroker, is_weak_value
from setup_agent.secrets.refs import SecretRefStore
from tests.helpers.paths import REPO
from tests.helpers.timeouts import scaled

WEAK = ["1234", "4821", "hunter2", "Summer2024!", "Password1", "password123", "20240101", "aaaaaaaaaa", "qwertyuiop"]
STRONG = [
    "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5",
    "x7#Kp2!qZ9",
    "sk-proj-4f8a9c2e1b7d",
    "AbCdEfGhIjKlMnOpQrStUvWxYz",
]


@pytest.mark.parametrize("value", WEAK)
def test_short_words_dates_and_patterns_are_weak(value: str) -> None:
    assert is_weak_value(value)


@pytest.mark.parametrize("value", STRONG)
def test_random_tokens_are_not_weak(value: str) -> None:
    assert not is_weak_value(value)


def test_the_web_modal_uses_the_same_rule_and_words() -> None:
    js = (REPO / "ui" / "js" / "secret_modal.js").read_text()
    words = " ".join(WEAK_VALUE_WARNING.split())
    js_text = " ".join(
        "".join(re.findall(r'"([^"]*)"', js.split("export var WEAK_VALUE_WARNING =", 1)[1].split(";", 1)[0])).split()
    )
    assert js_text == words
    assert "cannot be protected against a determined agent" in words


@pytest.fixture
def page():
    broker = PromptBroker(SecretRefStore())
    with SecretPageServer(broker) as server, httpx.Client(timeout=scaled(5)) as http:
        yield server, broker, http


def test_the_secret_page_says_before_typing_that_short_values_cannot_be_protected(page) -> None:
    server, broker, http = page
    prompt = broker.open("PIN", "Your card PIN")
    text = http.get(server.url_for(prompt)).text
    assert "cannot be protected against a determined agent" in text


@pytest.mark.parametrize(("value", "warned"), [("4821", True), ("Rosebud1984!", True), (STRONG[0], False)])
def test_the_secret_page_warns_after_a_weak_value_is_saved(page, value: str, warned: bool) -> None:
    server, broker, http = page
    prompt = broker.open("PIN", "Your card PIN")
    response = http.post(
        f"{server.base_url}/secrets/{prompt.prompt_id}",
        data={"t": server.capabilities.issue(prompt.prompt_id, "secret"), "action": "submit", "value": value},
        headers={"Origin": server.base_url},
    )
    assert response.status_code == 200
    assert ('id="weak-warning"' in response.text) is warned
    assert value not in response.text


@pytest.mark.anyio
@pytest.mark.parametrize(("value", "warned"), [("hunter2", True), (STRONG[0], False)])
async def test_the_terminal_warns_after_a_weak_value(monkeypatch: pytest.MonkeyPatch, value: str, warned: bool) -> None:
    broker = PromptBroker(SecretRefStore())
    out = io.StringIO()
    monkeypatch.setattr("getpass.getpass", lambda prompt="": value)
    pending = broker.open("PASSWORD", "Your password")
    result = await TerminalIO(broker, out=out).present_secret(pending)
    assert result == {"status": "answered"}
    assert ("cannot be protected against a determined agent" in out.getvalue()) is warned
    assert value not in out.getvalue()
