"""A team's setup state in its PostgreSQL database (#28): two "replicas" (two stores, two engines,
two sets of in-memory parts over one database) share refs, prompts, link keys and approvals.
On SQLite nothing of it is used: refs stay in one process's memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.runtime import build_runtime
from app.settings import Settings
from setup_agent.errors import SecretInUse, SecretMissing, SecretPending
from setup_agent.secrets import Capabilities, PromptBroker, SharedRefStore
from setup_agent.secrets.refs import SecretRefStore
from setup_agent.secrets.vault import Vault
from setup_agent.setup import ConsentBroker, PublishedPrompts, ReplicaPrompts, SharedDecisions, StoreConsents
from setup_agent.setup.consent_request import ConsentRequest, fingerprint
from setup_agent.store import PendingApprovals, SharedApprovals, SharedCapabilities, SharedRefs
from setup_agent.store.database import Store
from tests.helpers.team_cells import every_cell
from tests.helpers.timeouts import scaled


class Replica:
    """The shared parts of one replica: its own engine over the team's database."""

    def __init__(self, url: str, vault: Vault, name: str) -> None:
        self.store = Store(url, vault)
        self.refs = SharedRefStore(SharedRefs(self.store, vault), ttl_seconds=600)
        self.approvals = PendingApprovals(self.store, owner=f"{name}:1")
        elsewhere = ReplicaPrompts(self.approvals, vault, SharedRefs(self.store, vault), ttl_seconds=600)
        self.broker = PromptBroker(self.refs, elsewhere=elsewhere)
        PublishedPrompts(self.broker, self.refs, self.approvals, vault, ttl_seconds=600)
        self.capabilities = Capabilities(ttl_seconds=600, shared=SharedCapabilities(self.store))
        self.consents = ConsentBroker(
            ttl_seconds=600, sharing=SharedDecisions(SharedApprovals(self.store), ttl_seconds=600)
        )


@pytest.fixture
def replicas(postgres_url: str) -> Iterator[tuple[Replica, Replica]]:
    vault = Vault.in_memory()
    a, b = Replica(postgres_url, vault, "a"), Replica(postgres_url, vault, "b")
    yield a, b
    a.store.close()
    b.store.close()


def test_a_ref_minted_on_one_replica_resolves_on_another_is_claimed_once_and_gone_everywhere_once_used(
    replicas: tuple[Replica, Replica], canary: str
) -> None:
    a, b = replicas
    ref = a.refs.mint("API_KEY", canary)
    assert b.refs.resolve({"API_KEY": ref})["API_KEY"].reveal() == canary
    claim = a.refs.claim({"API_KEY": ref})
    with pytest.raises(SecretInUse):
        b.refs.claim({"API_KEY": ref})  # the other replica's install waits, whatever its memory says
    a.refs.release(claim)
    claim_b = b.refs.claim({"API_KEY": ref})
    b.refs.consume({"API_KEY": ref})
    del claim_b
    with pytest.raises(SecretMissing):
        a.refs.resolve({"API_KEY": ref})  # single use: consumed on b, unknown on a too
    assert canary not in every_cell(a.store)  # the value only ever encrypted, the ref only hashed
    assert ref.removeprefix("secret://") not in every_cell(a.store)


def test_a_prompt_opened_on_one_replica_is_answered_on_another_and_its_ref_is_usable_on_both(
    replicas: tuple[Replica, Replica], canary: str
) -> None:
    a, b = replicas
    prompt = a.broker.open("API_KEY", "Your key", server="io.github.x/y")
    with pytest.raises(SecretPending):
        b.refs.resolve({"API_KEY": prompt.ref})
    shown = b.broker.get(prompt.prompt_id)  # the page of replica b shows it (no value, no ref)
    assert (shown.key_name, shown.prompt, shown.server, shown.ref) == ("API_KEY", "Your key", "io.github.x/y", "")
    b.broker.answer(prompt.prompt_id, canary)
    assert b.refs.resolve({"API_KEY": prompt.ref})["API_KEY"].reveal() == canary
    assert a.refs.resolve({"API_KEY": prompt.ref})["API_KEY"].reveal() == canary
    assert a.broker.pending() == []  # a picked the answer up: its prompt is closed
    assert canary not in every_cell(a.store)


def test_a_link_key_issued_by_one_replica_opens_its_item_on_another_once(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    key = a.capabilities.issue("item-1", "secret")
    assert b.capabilities.allows(key, "item-1", "secret")
    assert not b.capabilities.allows(key, "item-2", "secret") and not b.capabilities.allows(key, "item-1", "consent")
    assert b.capabilities.consume(key, "item-1", "secret")
    assert not a.capabilities.allows(key, "item-1", "secret")  # spent for every replica
    assert a.capabilities.spent(key, "item-1", "secret")
    assert key not in every_cell(a.store)


def test_an_approval_given_on_one_replica_is_used_by_another_and_forgotten_with_the_server(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    request = ConsentRequest(
        server="io.github.x/y",
        version="1.0.0",
        action="test",
        package_type="npm",
        package="y",
        runner="npx",
        sha256=None,
        transport="stdio",
        command_line=["npx", "y"],
        url=None,
        env={},
        headers={},
        secrets=[],
        destinations=[],
        fingerprint=fingerprint({"server": "io.github.x/y", "v": 1}),
    )
    pending = a.consents.open(request)
    assert b.consents.decision(request) is None
    a.consents.approve(pending.consent_id, by="user:web")
    assert b.consents.decision(request) is not None
    b.consents.forget("io.github.x/y")
    assert ConsentBroker(ttl_seconds=600).decision(request) is None
    fresh = ConsentBroker(ttl_seconds=600, sharing=SharedDecisions(SharedApprovals(a.store), ttl_seconds=600))
    assert fresh.decision(request) is None


def test_on_sqlite_refs_stay_in_one_process_and_no_shared_part_is_built(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", registries="local")
    runtime = build_runtime(settings, keyring_backend=None)
    try:
        assert type(runtime.refs) is SecretRefStore
        assert runtime.shared_refs is None and runtime.shared_capabilities is None and runtime.shared_approvals is None
        # One process: no other replica's consent to wait on (its consents are only published to the data dir).
        assert type(runtime.consents.sharing) is StoreConsents
    finally:
        runtime.store.close()


def test_a_change_committed_on_one_replica_is_heard_on_another_through_listen_notify(postgres_url: str) -> None:
    import threading

    from setup_agent.store import CHANGES_CHANNEL, PENDING_CHANNEL, ChangeFeed

    vault = Vault.in_memory()
    with Store(postgres_url, vault) as a, Store(postgres_url, vault) as b:
        feed = ChangeFeed(b.database.engine)
        changed, pending = threading.Event(), threading.Event()
        feed.add_listener(CHANGES_CHANNEL, changed.set)
        feed.add_listener(PENDING_CHANNEL, pending.set)
        feed.start()
        try:
            assert feed.listening.wait(scaled(10))
            changed.clear()  # the feed looks once when it starts listening
            server = a.servers.install(
                qualified_name="io.test/x",
                source="local",
                version="1",
                package_type="npm",
                launch_spec={"transport": "stdio", "command": "true", "args": [], "env": {}},
                installed_by="test",
                tools_hash="0" * 64,
                env={},
            )
            assert changed.wait(scaled(10))  # at commit, not at the next poll
            PendingApprovals(a, owner="a:1").publish("item-0123456789abcdef", "consent", {}, ttl_seconds=60)
            assert pending.wait(scaled(10))
            assert server.server_id
        finally:
            feed.stop()


def test_refused_guesses_spread_over_two_replicas_add_up_and_lock_the_principal_on_both(
    replicas: tuple[Replica, Replica], canary: str
) -> None:
    from setup_agent.errors import ArgumentsRefused, SessionLocked
    from setup_agent.secrets import GuessGuard, Redactor
    from setup_agent.store import SharedGuardCounts

    guards = []
    for replica in replicas:
        redactor = Redactor()
        redactor.register(canary, "[secret:API_KEY]")
        guards.append(GuessGuard(redactor, counts=SharedGuardCounts(replica.store)))
    a, b = guards
    with pytest.raises(ArgumentsRefused):
        a.check("token:alice", {"q": canary})
    with pytest.raises(ArgumentsRefused):
        b.check("token:alice", {"q": canary})  # the second refusal, on the other replica: locks
    with pytest.raises(SessionLocked):
        a.check("token:alice", {"q": "harmless"})
    with pytest.raises(SessionLocked):
        b.check("token:alice", {"q": "harmless"})
    a.check("token:bob", {"q": "harmless"})  # another principal is not touched
    assert b.unlock("token:alice")
    a.check("token:alice", {"q": "harmless"})  # unblocked on one replica: on both
    assert canary not in every_cell(replicas[0].store)
