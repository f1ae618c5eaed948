"""``mcp-setup allow NAME HOST:PORT`` on a real data dir: the destination is granted in the server's
stored network policy and audited, and a server whose consent turned its network off, or a name
that is not installed, is refused in one line with nothing changed. (``--sampling``: the
sampling tests beside this file.)"""

from __future__ import annotations

import pytest

from tests.helpers.data_dir import STUB, DataDir, cli, data, stub_spec  # noqa: F401 - the fixture the tests take


def test_allow_grants_the_destination_in_the_servers_policy_audits_it_and_says_so(
    data: DataDir, capsys: pytest.CaptureFixture[str]
) -> None:
    sid = data.install(STUB, "value-1234567")
    code, out, err = cli(capsys, "allow", "stub-search", "127.0.0.1:5432")
    assert code == 0, err
    assert out == f"{STUB} may now connect to 127.0.0.1:5432; running mcp-setup sessions restart it.\n"
    with data.store() as store:
        server = store.servers.get(sid)
        audited = [(r.event, r.actor) for r in store.audit.entries(server_id=sid)]
    assert server is not None and server.launch_spec["sandbox_net"]["granted"] == ["127.0.0.1:5432"]
    assert audited[-1] == ("network", "user:terminal")  # the person at the terminal, as --sampling is


def test_allow_on_a_server_whose_consent_turned_its_network_off_is_refused_and_changes_nothing(
    data: DataDir, capsys: pytest.CaptureFixture[str]
) -> None:
    with data.store() as store:
        before = store.servers.install(
            qualified_name=STUB,
            source="local",
            version="1.0.0",
            package_type="stdio",
            launch_spec={**stub_spec("value-1234567"), "sandbox_network": False},
            installed_by="agent",
            tools_hash="x",
            env={"STUB_API_KEY": ("value-1234567", True)},
        )
    code, out, err = cli(capsys, "allow", "stub-search", "127.0.0.1:5432")
    assert (code, out) == (1, "")
    assert err == f"mcp-setup: {STUB} has no network (chosen in its consent).\n"
    with data.store() as store:
        assert store.servers.get(before.server_id) == before  # its policy, and all else, as it was


def test_allow_for_a_name_that_is_not_installed_names_none_and_exits_as_every_other_command(
    data: DataDir, capsys: pytest.CaptureFixture[str]
) -> None:
    data.install(STUB, "value-1234567")
    code, out, err = cli(capsys, "allow", "nope", "127.0.0.1:5432")
    assert (code, out) == (3, "") and "No installed server is named 'nope'" in err
    assert cli(capsys, "show", "nope")[0] == cli(capsys, "disable", "nope")[0] == code
