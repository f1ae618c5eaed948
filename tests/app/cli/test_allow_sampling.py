"""``mcp-setup allow NAME --sampling no|text|tools`` on a real data dir: the choice is stored,
audited as the person at the terminal, shown by ``show`` (text and ``--json``) with the command
that changes it; a wrong use says what to give."""

from __future__ import annotations

import json

import pytest

from tests.helpers.data_dir import STUB, DataDir, cli, data  # noqa: F401 - the fixture the tests take


def test_show_says_a_new_server_may_ask_for_text_without_tools_and_how_to_change_it(
    data: DataDir, capsys: pytest.CaptureFixture[str]
) -> None:
    data.install(STUB, "value-1234567")
    code, out, _ = cli(capsys, "show", "stub-search")
    assert code == 0
    assert (
        "May ask your AI to write text: yes, without tools "
        "(change it: mcp-setup allow stub-search --sampling no|text|tools)" in out
    )
    code, out, _ = cli(capsys, "show", "stub-search", "--json")
    assert json.loads(out)["sampling"] == "text"


def test_allow_sampling_stores_the_choice_audits_who_changed_it_and_show_says_it(
    data: DataDir, capsys: pytest.CaptureFixture[str]
) -> None:
    sid = data.install(STUB, "value-1234567")
    code, out, _ = cli(capsys, "allow", "stub-search", "--sampling", "tools")
    assert code == 0 and out.strip() == "Stub Search: May ask your AI to write text: yes, with tools."
    code, out, _ = cli(capsys, "show", "stub-search")
    assert "May ask your AI to write text: yes, with tools" in out
    code, out, _ = cli(capsys, "allow", "stub-search", "--sampling", "no")
    assert code == 0
    with data.store() as store:
        assert store.servers.get(sid).sampling == "no"  # type: ignore[union-attr]
        rows = [(r.event, r.actor, r.detail) for r in store.audit.entries(server_id=sid) if r.event == "sampling"]
    assert rows == [("sampling", "user:terminal", "text -> tools"), ("sampling", "user:terminal", "tools -> no")]


def test_allow_with_neither_or_both_a_destination_and_sampling_says_what_to_give(
    data: DataDir, capsys: pytest.CaptureFixture[str]
) -> None:
    data.install(STUB, "value-1234567")
    for argv in (["allow", "stub-search"], ["allow", "stub-search", "127.0.0.1:5432", "--sampling", "no"]):
        code, _, err = cli(capsys, *argv)
        assert (
            code == 2 and "give one of HOST:PORT, --only-tested, --public-internet or --sampling no|text|tools" in err
        )


def test_allow_sampling_for_an_unknown_server_names_none_and_changes_nothing(
    data: DataDir, capsys: pytest.CaptureFixture[str]
) -> None:
    data.install(STUB, "value-1234567")
    code, _, err = cli(capsys, "allow", "nope", "--sampling", "no")
    assert code == 3 and "No installed server is named 'nope'" in err  # as every other command
