"""One consent per action on a team's gateway (#28): a test or install retried on another replica
while the user has not answered waits on the consent already pending there, and one answer, given
on any replica, lets every replica's call go on. Two "replicas" here are two stores, brokers and
owners over one throwaway PostgreSQL (as in test_team_shared_state.py); the whole path through two
``serve`` processes behind nginx is in test_team_replicas.py."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from setup_agent.errors import ConsentDenied, ConsentRequired
from setup_agent.secrets.vault import Vault
from setup_agent.setup import ConsentBroker, TeamConsents, answer_shared, consent_requester
from setup_agent.setup.consent import obtain_consent
from setup_agent.setup.consent_request import ConsentRequest, DestinationSetting, SecretDestination, fingerprint
from setup_agent.store import PendingApprovals, SharedApprovals
from setup_agent.store.database import Store
from tests.test_team_shared_state import every_cell
from tests.timeouts import scaled

ALICE, BOB = "token:alice", "token:bob"


class Replica:
    """One replica's consent parts, sharing as ``app/runtime.py`` does on PostgreSQL."""

    def __init__(self, url: str, vault: Vault, owner: str) -> None:
        self.store = Store(url, vault)
        self.approvals = PendingApprovals(self.store, owner=owner)
        self.consents = ConsentBroker(
            ttl_seconds=600, sharing=TeamConsents(self.approvals, SharedApprovals(self.store), ttl_seconds=600)
        )

    def ask(self, request: ConsentRequest, who: str = ALICE) -> str:
        """The agent's call reaches this replica: consent required; the id of the consent it waits on."""
        with consent_requester(who), pytest.raises(ConsentRequired):
            asyncio.run(obtain_consent(self.consents, request, None))
        (waiting,) = [p for p in self.consents.pending() if p.request.fingerprint == request.fingerprint]
        return waiting.consent_id


@pytest.fixture
def team(postgres_url: str) -> Iterator[tuple[Replica, Replica]]:
    vault = Vault.in_memory()
    a, b = Replica(postgres_url, vault, "a:1"), Replica(postgres_url, vault, "b:1")
    yield a, b
    a.store.close()
    b.store.close()


def request_for(command: str = "npx", base_url: str = "https://api.example.com") -> ConsentRequest:
    """A test of one server: what runs (``command``) and where its key goes (``BASE_URL``)."""
    return ConsentRequest(
        server="io.github.x/y",
        version="1.0.0",
        action="test",
        package_type="npm",
        package="y",
        runner=command,
        sha256=None,
        transport="stdio",
        command_line=[command, "y"],
        url=None,
        env={"API_KEY": "${API_KEY}"},
        headers={},
        secrets=[SecretDestination("API_KEY", ["environment variable API_KEY"], "this computer")],
        destinations=[DestinationSetting("BASE_URL", base_url)],
        fingerprint=fingerprint({"command": command, "base_url": base_url}),
    )


def listed(replica: Replica) -> list[str]:
    """What the user sees waiting on any replica's page or in ``mcp-setup approve``."""
    return [item.item_id for item in replica.approvals.pending() if item.kind == "consent"]


async def wait_both(a: Replica, b: Replica, consent_id: str) -> tuple[str, str]:
    timeout = scaled(15)
    first, second = await asyncio.gather(a.consents.wait(consent_id, timeout), b.consents.wait(consent_id, timeout))
    return first, second


def test_a_retry_on_another_replica_waits_on_the_pending_consent_and_one_answer_there_lets_both_calls_go_on(
    team: tuple[Replica, Replica],
) -> None:
    a, b = team
    request = request_for()
    first = a.ask(request)
    assert b.ask(request) == first  # the retry on b reports the same consent, and opens none
    assert b.ask(request) == first
    assert listed(a) == listed(b) == [first]

    async def answer_on_b_while_both_wait() -> tuple[str, str]:
        waiting = asyncio.ensure_future(wait_both(a, b, first))
        b.consents.approve(first, {"BASE_URL": "https://eu.example.com"}, by="user:web")  # b's own page
        return await waiting

    assert asyncio.run(answer_on_b_while_both_wait()) == ("approved", "approved")
    for replica in (a, b):
        with consent_requester(ALICE):
            decision = asyncio.run(obtain_consent(replica.consents, request, None))
        assert decision is not None and decision.settings == {"BASE_URL": "https://eu.example.com"}
    assert listed(a) == []  # nothing left listed until a deadline
    assert ALICE not in every_cell(a.store)  # the asker kept as a hash only


def test_an_answer_given_in_a_terminal_reaches_every_replica_waiting_on_the_consent(
    team: tuple[Replica, Replica],
) -> None:
    a, b = team
    request = request_for()
    consent_id = a.ask(request)
    assert b.ask(request) == consent_id

    async def deny_elsewhere_while_both_wait() -> tuple[str, str]:
        waiting = asyncio.ensure_future(wait_both(a, b, consent_id))
        terminal = PendingApprovals(a.store, owner="terminal:1")  # `mcp-setup approve`: through the store
        assert answer_shared(terminal, consent_id, approve=False, by="user:terminal")
        return await waiting

    assert asyncio.run(deny_elsewhere_while_both_wait()) == ("denied", "denied")
    assert listed(a) == []
    with pytest.raises(ConsentDenied):
        b.consents.approve(consent_id, by="user:web")  # a late answer on b finds it closed


def test_a_different_command_destination_or_asker_gets_a_consent_of_its_own(team: tuple[Replica, Replica]) -> None:
    a, b = team
    first = a.ask(request_for())
    others = {
        b.ask(request_for(command="uvx")),  # another command runs
        b.ask(request_for(base_url="https://elsewhere.example")),  # the key goes elsewhere
        b.ask(request_for(), who=BOB),  # another member asks for the same
    }
    assert first not in others and len(others) == 3
    assert sorted(listed(a)) == sorted({first, *others})


def test_a_consent_whose_replica_is_gone_is_taken_over_by_the_retry_and_answered_there(
    team: tuple[Replica, Replica], postgres_url: str
) -> None:
    a, b = team
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = Replica(postgres_url, Vault.in_memory(), f"{socket.gethostname()[:40]}:{gone.pid}")
    try:
        request = request_for()
        consent_id = dead.ask(request)  # its process then dies with the consent pending
        assert b.ask(request) == consent_id  # the retry takes it over: the id stays
        item = b.approvals.get(consent_id)
        assert item is not None and item.owner == b.approvals.owner and item.status == "pending"
        assert a.ask(request) == consent_id  # a third replica waits on it where b now owns it
        terminal = PendingApprovals(a.store, owner="terminal:1")
        assert answer_shared(terminal, consent_id, approve=True, by="user:terminal")
        assert asyncio.run(wait_both(a, b, consent_id)) == ("approved", "approved")
    finally:
        dead.store.close()
