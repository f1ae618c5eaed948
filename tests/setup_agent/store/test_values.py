"""A server's stored settings: a person's replaced key is written, audited by name only and
announced to every process (the change counter, and a settings stamp the gateway restarts a
running server by); an internal value renewed in place (a sign-in's grant) or a data key rotation
moves no stamp."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import MetaData, select

from setup_agent.errors import NotFound
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[Store]:
    s = Store.for_data_dir(tmp_path / "data", Vault.in_memory(), database_url)
    yield s
    s.close()


def install(store: Store, name: str, value: str) -> str:
    return store.servers.install(
        qualified_name=name,
        source="local",
        version="1",
        package_type="npm",
        launch_spec={"command": "x"},
        installed_by="cli",
        tools_hash="h",
        env={"GH_TOKEN": (value, True), "REGION": ("eu", False)},
    ).server_id


def test_a_replaced_key_moves_its_server_s_stamp_and_the_change_counter_and_is_audited_by_name_only(
    store: Store, canary: str
) -> None:
    mine, other = install(store, "io.test/gh", "old-value-123"), install(store, "io.test/other", "other-value-456")
    stamps, counter = store.values.env_stamps(), store.database.change_counter()
    assert set(stamps) == {mine, other} and store.values.env_stamps(mine) == {mine: stamps[mine]}
    store.values.replace_env_value(mine, "GH_TOKEN", canary, True, actor="cli")
    assert store.values.env_values(mine)["GH_TOKEN"].reveal() == canary
    assert store.database.change_counter() == counter + 1  # every process hears of it
    now = store.values.env_stamps()
    assert now[mine] != stamps[mine] and now[other] == stamps[other]
    assert ("secret_replaced", "cli", "GH_TOKEN") in [(e.event, e.actor, e.detail) for e in store.audit.entries()]
    store.values.set_env_value(mine, "__oauth_grant", "renewed-grant-789", True)  # a sign-in renewed in place
    assert store.values.env_stamps()[mine] == now[mine]
    store.values.rotate_key(Vault.in_memory())  # every value re-encrypted, none changed
    assert store.values.env_stamps() == now
    meta = MetaData()
    meta.reflect(store.database.engine)
    with store.database.engine.connect() as conn:
        dump = "\n".join(repr(tuple(r)) for t in meta.sorted_tables for r in conn.execute(select(t)))
    assert canary not in dump


def test_a_value_written_for_a_server_that_is_not_installed_is_refused_and_changes_nothing(store: Store) -> None:
    mine = install(store, "io.test/gh", "old-value-123")
    stamps, counter, audited = store.values.env_stamps(), store.database.change_counter(), store.audit.counts()
    with pytest.raises(NotFound, match="no-such-server"):
        store.values.replace_env_value("no-such-server", "GH_TOKEN", "new-value-456", True, actor="cli")
    with pytest.raises(NotFound, match="no-such-server"):
        store.values.set_env_value("no-such-server", "GH_TOKEN", "new-value-456", True)
    assert store.values.env_stamps() == stamps and store.values.env_values(mine)["GH_TOKEN"].reveal() == "old-value-123"
    assert store.database.change_counter() == counter and store.audit.counts() == audited


def test_a_stamp_that_leaves_out_a_server_s_per_member_keys_moves_only_when_another_setting_of_it_changes(
    store: Store, canary: str
) -> None:
    mine, other = install(store, "io.test/gh", "old-value-123"), install(store, "io.test/other", "other-value-456")
    shared = {mine: ["GH_TOKEN"]}  # what members' sessions of it share: all but their own key
    before = store.values.env_stamps(leaving_out=shared)
    assert before[mine] != store.values.env_stamps()[mine] and before[other] == store.values.env_stamps()[other]
    store.values.replace_env_value(mine, "GH_TOKEN", canary, True, actor="cli")  # the shared value of a member key
    assert store.values.env_stamps(leaving_out=shared) == before
    store.values.replace_env_value(mine, "REGION", "us", False, actor="cli")  # a shared setting
    after = store.values.env_stamps(mine, leaving_out=shared)
    assert after[mine] != before[mine] and set(after) == {mine}
