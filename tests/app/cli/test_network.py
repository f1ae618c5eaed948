"""``mcp-setup allow NAME HOST:PORT`` on a real data dir: the destination is granted in the server's
stored network policy and audited, and a server whose consent turned its network off, or a name
that is not installed, is refused in one line with nothing changed. ``--only-tested`` holds a
server to the destinations its test connected to (stored at install) and ``--public-internet``
lets it reach the public internet again, audited as the person at the terminal; ``show`` names
the step. (``--sampling``: the sampling tests beside this file.)"""

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


def test_only_tested_holds_the_server_to_what_its_test_reached_audited_as_the_person_and_show_names_the_way_back(
    data: DataDir, capsys: pytest.CaptureFixture[str]
) -> None:
    sid = data.install_tested(STUB, ["api.notion.com:443"], granted=("127.0.0.1:5432",))
    code, out, err = cli(capsys, "show", "stub-search")
    assert code == 0, err
    assert "network: Only these (what its test connected to): mcp-setup allow stub-search --only-tested\n" in out

    code, out, err = cli(capsys, "allow", "stub-search", "--only-tested")
    assert code == 0, err
    assert out == (
        "Stub Search may now connect only to api.notion.com:443 (what it connected to during its test), and to "
        "what you allowed: 127.0.0.1:5432; anything else is refused. Running mcp-setup sessions restart it.\n"
    )
    with data.store() as store:
        server = store.servers.get(sid)
        audited = [(r.event, r.actor) for r in store.audit.entries(server_id=sid)]
    assert server is not None
    net = server.launch_spec["sandbox_net"]
    assert (net["mode"], net["only"], net["granted"]) == ("strict", ["api.notion.com:443"], ["127.0.0.1:5432"])
    assert audited[-1] == ("network", "user:terminal")

    code, out, err = cli(capsys, "show", "stub-search")
    assert "network: Network policy: only these: " in out
    assert "network: The public internet again: mcp-setup allow stub-search --public-internet\n" in out

    code, out, err = cli(capsys, "allow", "stub-search", "--only-tested")  # again: nothing changes
    assert code == 0, err
    with data.store() as store:
        assert len(store.audit.entries(server_id=sid)) == len(audited)

    code, out, err = cli(capsys, "allow", "stub-search", "--public-internet")
    assert code == 0, err
    assert out.startswith("Stub Search may now connect to the public internet again (nothing on this computer")
    with data.store() as store:
        server = store.servers.get(sid)
    assert server is not None
    net = server.launch_spec["sandbox_net"]
    assert (net["mode"], net["granted"], net["seen"]) == ("default", ["127.0.0.1:5432"], ["api.notion.com:443"])


def test_only_tested_for_a_server_whose_test_connected_nowhere_is_refused_in_one_line(
    data: DataDir, capsys: pytest.CaptureFixture[str]
) -> None:
    sid = data.install_tested(STUB, [])
    with data.store() as store:
        before = store.servers.get(sid)
    code, out, err = cli(capsys, "allow", "stub-search", "--only-tested")
    assert (code, out) == (1, "")
    assert err == (
        "mcp-setup: During its test Stub Search connected to nothing on the network, so there is no list to hold "
        "it to.\n"
    )
    with data.store() as store:
        assert store.servers.get(sid) == before
    code, out, err = cli(capsys, "show", "stub-search")
    assert "--only-tested" not in out  # nothing to offer


@pytest.mark.parametrize(
    "argv",
    [
        ("--only-tested", "--public-internet"),
        ("127.0.0.1:5432", "--only-tested"),
        ("--sampling", "no", "--only-tested"),
    ],
)
def test_allow_takes_one_change_at_a_time(
    data: DataDir, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    data.install_tested(STUB, ["api.notion.com:443"])
    code, out, err = cli(capsys, "allow", "stub-search", *argv)
    assert (code, out) == (2, "")
    assert "give one of HOST:PORT, --only-tested, --public-internet or --sampling" in err


def test_after_an_install_the_terminal_says_where_its_test_connected_and_the_step_to_only_these(
    data: DataDir,
) -> None:
    from app.cli.network import only_these_hint

    tested = data.install_tested(STUB, ["api.notion.com:443", "files.notion.com:443"])
    with data.store() as store:
        server = store.servers.get(tested)
        assert server is not None
        assert only_these_hint(server) == (
            "During its test it connected to api.notion.com:443, files.notion.com:443. To let it connect only to "
            "these: mcp-setup allow stub-search --only-tested"
        )
        store.servers.remove(tested)
    nowhere = data.install_tested(STUB, [])
    with data.store() as store:
        server = store.servers.get(nowhere)
    assert server is not None and only_these_hint(server) is None  # nothing to hold it to: no hint
