"""The relay's rules on their own (#38): which forms ask for credentials, which URLs a server
may send a person to, whose name a log message carries, what sampling may ask for."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from setup_agent.gateway.relay_rules import (
    ORIGIN_KEY,
    Origin,
    RelayRules,
    credential_fields,
    real_host,
    scoped_sampling,
)
from setup_agent.secrets.guard import GuessGuard
from setup_agent.secrets.redact import Redactor

LOCAL = Origin("files", "Files", "io.test/files")
REMOTE = Origin("wiki", "Wiki", "io.test/wiki", url="http://127.0.0.1:9100/mcp")


def _form(**properties: dict) -> dict:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(
    "field",
    [
        {"value": {"type": "string", "format": "password"}},
        {"api_key": {"type": "string"}},
        {"githubToken": {"type": "string"}},
        {"OPENAI_API_KEY": {"type": "string"}},
        {"x": {"type": "string", "title": "Client secret"}},
        {"x": {"type": "string", "description": "Your password for the wiki"}},
        {"x": {"type": "string", "description": "The credentials you signed up with"}},
        {"code": {"type": "string", "title": "One-time PIN"}},
    ],
)
def test_a_field_named_or_described_as_a_credential_is_found(field: dict) -> None:
    assert credential_fields(_form(**field)) == list(field)


@pytest.mark.parametrize(
    "field",
    [
        {"colour": {"type": "string"}},
        {"monkey": {"type": "string", "title": "Monkey name"}},
        {"tokenizer_model": {"type": "string", "description": "Which tokenizer to use"}},
        {"count": {"type": "integer", "description": "How many keyboards"}},
        {"integer": {"type": "integer", "description": "Your favourite (not your phone number or PIN)"}},
    ],
)
def test_a_field_that_asks_for_no_credential_passes(field: dict) -> None:
    assert credential_fields(_form(**field)) == []


def test_a_default_the_redactor_would_hide_makes_a_field_a_credential(canary: str) -> None:
    redactor = Redactor()
    redactor.register(canary, "[secret:KEY]")
    guard = GuessGuard(redactor)
    form = _form(note={"type": "string", "default": canary})
    assert credential_fields(form, guard.holds_secret) == ["note"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8765/secrets/x?t=y",
        "http://localhost:8765/",
        "http://app.localhost/",
        "http://127.1:8765/",
        "http://0x7f000001/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0:8765/",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "http://127.0.0.1:9101/",  # the remote's host, another port: not its own
    ],
)
def test_a_url_at_a_local_address_not_the_servers_own_or_not_http_is_refused(url: str) -> None:
    rules = RelayRules(Redactor())
    assert rules.url_refusal(url, LOCAL) is not None
    assert rules.url_refusal(url, REMOTE) is not None


def test_a_remote_servers_own_loopback_address_and_any_public_one_are_allowed() -> None:
    rules = RelayRules(Redactor())
    assert rules.url_refusal("http://127.0.0.1:9100/oauth/callback", REMOTE) is None
    assert rules.url_refusal("https://github.com/login/device", LOCAL) is None


def test_mcp_setups_own_public_origin_is_refused_on_any_path() -> None:
    rules = RelayRules(Redactor(), own_origins=["https://gateway.example.com"])
    assert rules.url_refusal("https://gateway.example.com/secrets/x?t=y", LOCAL) is not None
    assert rules.url_refusal("https://GATEWAY.example.com.:443/", LOCAL) is not None
    assert rules.url_refusal("https://gateway.example.org/", LOCAL) is None


def test_the_real_host_is_shown_after_a_user_part_and_in_its_ascii_form() -> None:
    assert real_host("https://mcp-setup@evil.example/x") == "evil.example"
    assert real_host("https://gіthub.com/login") == "xn--gthub-n2e.com"  # a Cyrillic і: not github.com


@pytest.mark.parametrize(
    ("name", "shown"),
    [(None, "files"), ("", "files"), ("mcp-setup", "files"), ("MCP Setup", "files"), ("m.c.p_setup", "files")]
    + [("mcp-setup/gateway", "files"), ("files", "files"), ("db", "files/db")],
)
def test_a_log_messages_logger_is_the_servers_slug_and_never_mcp_setup(name: str | None, shown: str) -> None:
    assert LOCAL.logger(name) == shown


def test_an_origin_says_who_asks_in_words_and_in_meta() -> None:
    server = SimpleNamespace(
        slug="github", title="GitHub", qualified_name="io.github/github", launch_spec={"url": "https://x/mcp"}
    )
    origin = Origin.of(server)
    assert origin.says("Pick a repo") == "GitHub (installed server `github`) asks: Pick a repo"
    assert origin.meta() == {ORIGIN_KEY: {"slug": "github", "title": "GitHub", "server": "io.github/github"}}
    assert origin.url == "https://x/mcp"


def test_sampling_asks_for_no_context_beyond_its_own() -> None:
    for asked in ("allServers", "thisServer"):
        assert scoped_sampling({"includeContext": asked, "maxTokens": 5}) == {"includeContext": "none", "maxTokens": 5}
    assert scoped_sampling({"maxTokens": 5}) == {"maxTokens": 5}


def test_an_answer_holding_a_protected_value_is_refused_and_counted_and_any_other_is_redacted(canary: str) -> None:
    redactor = Redactor()
    redactor.register(canary, "[secret:KEY]")
    guard = GuessGuard(redactor)
    rules = RelayRules(redactor, check=guard.check)
    with pytest.raises(Exception) as refused:
        rules.answer("client:stdio", {"content": {"v": canary}}, guarded=True)
    assert getattr(refused.value, "code", None) == "arguments_refused"
    assert [i.principal for i in guard.incidents()] == ["client:stdio"]
    assert rules.answer("client:stdio", {"text": f"said {canary}"}, guarded=False) == {"text": "said [secret:KEY]"}
