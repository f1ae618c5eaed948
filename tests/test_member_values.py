"""The store's part of each member's own keys (#28 item 3), on SQLite and PostgreSQL: per-member
keys at install and later, each member's value encrypted and audited as theirs, removal, a
revoked token's values gone in its transaction, key rotation and an update keep them readable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import MetaData, select

from setup_agent.errors import InvalidInput
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[Store]:
    s = Store.for_data_dir(tmp_path / "data", Vault.in_memory(), database_url)
    yield s
    s.close()


def install(store: Store, **extra: object) -> str:
    return store.servers.install(
        qualified_name="io.test/gh",
        source="local",
        version="1",
        package_type="npm",
        launch_spec={"command": "x"},
        installed_by="user:web",
        tools_hash="h",
        env={"GH_TOKEN": ("shared-value-123", True)},
        **extra,
    ).server_id


def everything(store: Store) -> str:
    meta = MetaData()
    meta.reflect(store.database.engine)
    with store.database.engine.connect() as conn:
        return "\n".join(repr(tuple(r)) for t in meta.sorted_tables for r in conn.execute(select(t)))


def test_a_member_s_value_is_theirs_encrypted_audited_under_their_name_and_replaced_by_a_rotation(
    store: Store, canary: str
) -> None:
    server_id = install(store, member_keys=["GH_TOKEN"])
    assert store.servers.get(server_id).member_keys == ("GH_TOKEN",)
    counter = store.database.change_counter()
    store.values.set_member_value(server_id, "alice", "GH_TOKEN", canary + "-a")
    store.values.set_member_value(server_id, "bob", "GH_TOKEN", canary + "-b")
    assert store.database.change_counter() == counter + 2  # every process sees it
    assert store.values.member_values(server_id, "alice")["GH_TOKEN"].reveal() == canary + "-a"
    assert store.values.member_values(server_id, "carol") == {}
    assert store.values.env_values(server_id)["GH_TOKEN"].reveal() == "shared-value-123"  # the shared one stays
    stamp = store.values.member_stamps()[(server_id, "alice")]
    store.values.set_member_value(server_id, "alice", "GH_TOKEN", canary + "-a2")
    assert store.values.member_values(server_id, "alice")["GH_TOKEN"].reveal() == canary + "-a2"
    assert store.values.member_stamps()[(server_id, "alice")] != stamp
    assert store.values.members_of(server_id) == {"alice": ["GH_TOKEN"], "bob": ["GH_TOKEN"]}
    events = [(e.event, e.actor, e.detail) for e in store.audit.entries()]
    assert ("member_value_set", "token:alice", "GH_TOKEN of token:alice") in events
    assert ("member_value_rotated", "token:alice", "GH_TOKEN of token:alice") in events
    dump = everything(store)
    assert canary not in dump and "shared-value-123" not in dump
    with pytest.raises(InvalidInput):
        store.values.set_member_value(server_id, "alice", "OTHER", "x" * 12)  # not a per-member key


def test_removing_a_member_s_value_and_revoking_their_token_leave_the_others_untouched(
    store: Store, canary: str
) -> None:
    server_id = install(store, member_keys=["GH_TOKEN"])
    tokens = store.tokens
    tokens.create("alice")
    tokens.create("bob")
    store.values.set_member_value(server_id, "alice", "GH_TOKEN", canary + "-a")
    store.values.set_member_value(server_id, "bob", "GH_TOKEN", canary + "-b")
    counter = store.database.change_counter()
    tokens.revoke("alice")  # her values go in the same transaction
    assert store.database.change_counter() > counter
    assert store.values.member_values(server_id, "alice") == {}
    assert store.values.member_values(server_id, "bob")["GH_TOKEN"].reveal() == canary + "-b"
    assert any(e.event == "member_value_removed" and "token:alice" in (e.detail or "") for e in store.audit.entries())
    assert store.values.forget_member_values("bob", server_id, "GH_TOKEN") == 1
    assert store.values.member_keys_set("bob") == {}
    assert store.audit.verify().ok


def test_per_member_keys_set_later_and_shared_again_delete_the_members_values_of_that_key(
    store: Store, canary: str
) -> None:
    server_id = install(store)
    assert store.values.set_member_keys(server_id, ["GH_TOKEN"], actor="user:terminal") == ["GH_TOKEN"]
    store.values.set_member_value(server_id, "alice", "GH_TOKEN", canary)
    store.values.set_member_keys(server_id, [], actor="user:terminal")
    assert store.servers.get(server_id).member_keys == () and store.values.member_values(server_id, "alice") == {}
    with pytest.raises(InvalidInput):
        store.values.set_member_keys(server_id, ["no spaces"], actor="user:terminal")


def test_key_rotation_and_an_update_keep_every_member_s_value_readable(store: Store, canary: str) -> None:
    server_id = install(store, member_keys=["GH_TOKEN"])
    store.values.set_member_value(server_id, "alice", "GH_TOKEN", canary)
    assert store.values.rotate_key(Vault.in_memory()) == 2  # the shared value and alice's
    assert store.values.member_values(server_id, "alice")["GH_TOKEN"].reveal() == canary
    newer = install(store, replaces=server_id)  # `mcp-setup update`: the same slug, a new row
    assert store.servers.get(newer).member_keys == ("GH_TOKEN",)
    assert store.values.member_values(newer, "alice")["GH_TOKEN"].reveal() == canary
    store.servers.remove(newer)
    assert store.values.member_stamps() == {}  # gone with the server


@pytest.mark.anyio
async def test_an_answer_to_a_member_s_prompt_is_stored_as_theirs_unless_their_token_was_revoked_meanwhile(
    store: Store, canary: str
) -> None:
    from setup_agent.gateway import MEMBER_SECRET_REQUIRED, MemberPrompts
    from setup_agent.secrets import Redactor

    server_id = install(store, member_keys=["GH_TOKEN"])
    tokens = store.tokens
    tokens.create("alice")
    tokens.create("bob")
    redactor = Redactor()
    prompts = MemberPrompts(store, redactor, is_active=lambda m: any(t.name == m and t.active for t in tokens.list()))
    prompts.serve_page(lambda prompt_id: f"https://team.example/secrets/{prompt_id}?t=key")
    server = store.servers.get(server_id)
    links = {}
    for member in ("alice", "bob"):
        asked = await prompts.ask(server, member, "GH_TOKEN", None)
        error = asked["structuredContent"]["error"]
        assert asked["isError"] and error["code"] == MEMBER_SECRET_REQUIRED and error["key_name"] == "GH_TOKEN"
        links[member] = error["url"].split("/secrets/", 1)[1].split("?", 1)[0]
        assert (await prompts.ask(server, member, "GH_TOKEN", None))["structuredContent"]["error"]["url"].find(
            links[member]
        ) > 0  # one prompt
    assert prompts.holds(links["alice"]) and not prompts.holds("another-prompt-id")
    tokens.revoke("alice")
    for member in ("alice", "bob"):
        prompts.broker.answer(links[member], f"{canary}-{member}")
        await prompts._settle(links[member])  # as the answer's event does
    assert store.values.member_values(server_id, "alice") == {}  # revoked meanwhile: nothing stored
    assert store.values.member_values(server_id, "bob")["GH_TOKEN"].reveal() == f"{canary}-bob"
    assert list(prompts.refs.live_values()) == []  # the refs went with the answers
    prompts.close()
