"""The local secret page, over real HTTP against a running SecretPageServer."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from app.pages.secret import SECURITY_HEADERS
from app.pages.server import SecretPageServer
from setup_agent.secrets.prompts import PendingPrompt, PromptBroker
from setup_agent.secrets.refs import SecretRefStore
from tests.helpers.timeouts import scaled

CANARY = "canary-Pg52-must-never-appear-e91c"
CSP = "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Page:
    server: SecretPageServer
    broker: PromptBroker
    refs: SecretRefStore
    clock: FakeClock
    http: httpx.Client

    @property
    def origin(self) -> str:
        return self.server.base_url

    def post_url(self, prompt: PendingPrompt) -> str:
        return f"{self.origin}/secrets/{prompt.prompt_id}"

    def key(self, prompt: PendingPrompt | str) -> str:
        """A new key for ``prompt``'s page, as :meth:`SecretPageServer.url_for` puts in its link."""
        prompt_id = prompt if isinstance(prompt, str) else prompt.prompt_id
        return self.server.capabilities.issue(prompt_id, "secret")

    def post(self, prompt: PendingPrompt, **fields: str) -> httpx.Response:
        data = {"t": self.key(prompt), "action": "submit", **fields}
        return self.http.post(self.post_url(prompt), data=data)


@pytest.fixture
def page() -> Iterator[Page]:
    clock = FakeClock()
    refs = SecretRefStore(ttl_seconds=600, timer=clock)
    broker = PromptBroker(refs, timer=clock)
    with SecretPageServer(broker) as server, httpx.Client(timeout=scaled(5)) as http:
        yield Page(server, broker, refs, clock, http)


def test_get_shows_a_password_form_with_the_escaped_prompt(page: Page) -> None:
    prompt = page.broker.open("GITHUB_TOKEN", 'Paste a token <script>alert("x")</script> & go', server="github")
    url = page.server.url_for(prompt)
    response = page.http.get(url)
    assert response.status_code == 200
    text = response.text
    assert "<script" not in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; go" in text
    assert "mcp-setup needs your <code>GITHUB_TOKEN</code> for <strong>github</strong>" in text
    assert "never shown to the AI assistant" in text
    assert '<input type="password" id="value" name="value" autocomplete="off"' in text
    assert '<label for="value">' in text
    assert f'<input type="hidden" name="t" value="{url.rsplit("?t=", 1)[1]}">' in text
    assert 'name="action" value="submit"' in text and 'name="action" value="cancel"' in text
    assert 'name="viewport"' in text
    assert "http://" not in text and "https://" not in text  # no external resources


def test_every_response_carries_the_security_headers(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    responses = [
        page.http.get(page.server.url_for(prompt)),
        page.http.get(f"{page.origin}/secrets/{prompt.prompt_id}"),  # 403
        page.http.get(f"{page.origin}/secrets/static/page.css"),
        page.post(prompt, value="v"),
    ]
    for response in responses:
        assert response.headers["content-security-policy"] == CSP
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["cache-control"] == "no-store"
        for name, value in SECURITY_HEADERS.items():
            assert response.headers[name] == value


def test_the_stylesheet_is_served_from_self(page: Page) -> None:
    response = page.http.get(f"{page.origin}/secrets/static/page.css")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/css")


def test_get_without_the_token_is_refused(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    response = page.http.get(f"{page.origin}/secrets/{prompt.prompt_id}")
    assert response.status_code == 403
    assert "password" not in response.text


def test_get_with_a_wrong_token_is_refused(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    response = page.http.get(f"{page.origin}/secrets/{prompt.prompt_id}", params={"t": page.key(prompt) + "x"})
    assert response.status_code == 403


def test_post_with_a_wrong_token_is_refused_and_stores_nothing(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    response = page.post(prompt, value="v", t="wrong")
    assert response.status_code == 403
    assert page.broker.pending() == [prompt]
    assert not page.refs.is_ready(prompt.ref)


def test_a_foreign_host_header_is_refused(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    evil = {"Host": f"evil.example:{page.server.port}"}
    url = page.server.url_for(prompt)
    response = page.http.get(url, headers=evil)
    assert response.status_code == 421
    assert url.rsplit("?t=", 1)[1] not in response.text
    response = page.http.post(page.post_url(prompt), data={"t": page.key(prompt), "value": "v"}, headers=evil)
    assert response.status_code == 421
    assert page.broker.pending() == [prompt]


def test_localhost_with_the_port_is_an_allowed_host(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    response = page.http.get(page.server.url_for(prompt), headers={"Host": f"localhost:{page.server.port}"})
    assert response.status_code == 200
    response = page.http.get(page.server.url_for(prompt), headers={"Host": "localhost:1"})
    assert response.status_code == 421


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1:1"},
        {"Origin": "null"},
        {"Origin": "null", "Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Referer": "http://evil.example/page"},
    ],
)
def test_a_post_from_a_foreign_origin_is_refused(page: Page, headers: dict[str, str]) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    response = page.http.post(
        page.post_url(prompt), data={"t": page.key(prompt), "value": "v", "action": "submit"}, headers=headers
    )
    assert response.status_code == 403
    assert page.broker.pending() == [prompt]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Origin": "{origin}", "Sec-Fetch-Site": "same-origin"},
        {"Origin": "null", "Sec-Fetch-Site": "same-origin"},  # what a browser sends under no-referrer
        {"Origin": "http://localhost:{port}"},
        {"Referer": "{origin}/secrets/x"},
    ],
)
def test_a_same_origin_post_is_accepted(page: Page, headers: dict[str, str]) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    filled = {k: v.format(origin=page.origin, port=page.server.port) for k, v in headers.items()}
    response = page.http.post(
        page.post_url(prompt), data={"t": page.key(prompt), "value": "v", "action": "submit"}, headers=filled
    )
    assert response.status_code == 200
    assert page.refs.is_ready(prompt.ref)


def test_post_saves_once_and_a_second_post_gets_409(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    response = page.post(prompt, value="the-value")
    assert response.status_code == 200
    assert "saved" in response.text and "You can close this tab and return to your assistant." in response.text
    assert page.refs.resolve({"API_KEY": prompt.ref})["API_KEY"].reveal() == "the-value"
    again = page.post(prompt, value="other")
    assert again.status_code == 409
    assert "already" in again.text
    assert page.refs.resolve({"API_KEY": prompt.ref})["API_KEY"].reveal() == "the-value"
    assert page.http.get(page.server.url_for(prompt)).status_code == 409


def test_an_empty_value_reshows_the_form_with_an_error(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    response = page.post(prompt, value="")
    assert response.status_code == 400
    assert 'role="alert"' in response.text and 'type="password"' in response.text
    assert page.broker.pending() == [prompt]


def test_cancel_closes_the_prompt_and_discards_the_ref(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    response = page.post(prompt, action="cancel", value="")
    assert response.status_code == 200
    assert "Cancelled" in response.text
    assert page.broker.pending() == []
    assert len(page.refs) == 0
    assert page.post(prompt, value="late").status_code == 410


def test_an_unknown_prompt_gets_404_saying_to_ask_again(page: Page) -> None:
    response = page.http.get(f"{page.origin}/secrets/{'A' * 32}", params={"t": page.key("A" * 32)})
    assert response.status_code == 404
    assert "ask it to request the secret again" in response.text


def test_an_expired_prompt_gets_404_saying_to_ask_again(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    page.clock.now += 601
    assert page.http.get(page.server.url_for(prompt)).status_code == 404
    response = page.post(prompt, value="v")
    assert response.status_code == 404
    assert "again" in response.text


def test_a_non_form_body_is_refused(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    response = page.http.post(page.post_url(prompt), json={"t": page.key(prompt), "value": "v"})
    assert response.status_code == 400
    assert page.broker.pending() == [prompt]


def test_url_for_points_at_the_loopback_page_with_a_key_of_its_own(page: Page) -> None:
    prompt = page.broker.open("API_KEY", "Paste it")
    url = page.server.url_for(prompt)
    base, key = url.split("?t=")
    assert base == f"http://127.0.0.1:{page.server.port}/secrets/{prompt.prompt_id}"
    assert len(key) >= 40 and key != page.server.url_for(prompt).split("?t=")[1]  # a new key each time
    assert page.server.capabilities.allows(key, prompt.prompt_id, "secret")
    assert not page.server.capabilities.allows(key, prompt.prompt_id, "consent")


def test_the_submitted_value_appears_in_no_response_or_log_record(page: Page, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "app", "setup_agent"):
        caplog.set_level(logging.DEBUG, logger=name)
    access = logging.getLogger("uvicorn.access")  # uvicorn stops it propagating: listen directly
    access.addHandler(caplog.handler)
    try:
        prompt = page.broker.open("API_KEY", "Paste it")
        responses = [
            page.post(prompt, value=CANARY, t="wrong-token"),  # refused
            page.http.post(
                page.post_url(prompt),
                data={"t": page.key(prompt), "value": CANARY},
                headers={"Origin": "http://evil.example"},
            ),  # refused
            page.post(prompt, value=CANARY),  # saved
            page.post(prompt, value=CANARY),  # 409
            page.http.get(page.server.url_for(prompt)),
        ]
    finally:
        access.removeHandler(caplog.handler)
    assert [r.status_code for r in responses] == [403, 403, 200, 409, 409]
    for response in responses:
        assert CANARY not in response.text
        assert CANARY not in repr(response.headers.multi_items())
    assert caplog.records, "expected the page and uvicorn to log something"
    for record in caplog.records:
        rendered = " ".join([record.getMessage(), repr(record.args), record.exc_text or "", str(record.__dict__)])
        assert CANARY not in rendered
    assert page.refs.resolve({"API_KEY": prompt.ref})["API_KEY"].reveal() == CANARY


def test_the_server_writes_nothing_to_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    broker = PromptBroker(SecretRefStore())
    with SecretPageServer(broker) as server, httpx.Client(timeout=scaled(5)) as http:
        prompt = broker.open("API_KEY", "Paste it")
        assert http.get(server.url_for(prompt)).status_code == 200
        assert (
            http.post(
                f"{server.base_url}/secrets/{prompt.prompt_id}",
                data={"t": server.capabilities.issue(prompt.prompt_id, "secret"), "value": "v"},
            ).status_code
            == 200
        )
        assert http.get(f"{server.base_url}/secrets/x").status_code == 403
    out, _ = capfd.readouterr()
    assert out == ""


def test_stop_is_bounded_and_frees_the_port() -> None:
    broker = PromptBroker(SecretRefStore())
    server = SecretPageServer(broker).start()
    port = server.port
    with httpx.Client(timeout=scaled(5)) as http:  # a keep-alive connection must not hold shutdown up
        assert http.get(f"{server.base_url}/secrets/static/page.css").status_code == 200
        server.stop(timeout=scaled(5))
        assert not server.running
        with pytest.raises(httpx.ConnectError):
            http.get(f"http://127.0.0.1:{port}/secrets/static/page.css")


def test_the_server_refuses_a_non_loopback_bind_address() -> None:
    with pytest.raises(ValueError):
        SecretPageServer(PromptBroker(SecretRefStore()), host="0.0.0.0")
