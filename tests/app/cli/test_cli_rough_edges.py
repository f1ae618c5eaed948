"""Rough edges a new user hit (#12): tool titles and annotations (11), bad argument types
(9), no empty probe dirs left after remote tests (10)."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest

from setup_agent.errors import SetupError
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.redact import Redactor
from setup_agent.setup.probe import Prober
from tests.helpers.mcp_face import Recorder, call, mcp_setup_client
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio


async def test_the_setup_tools_declare_titles_and_annotations_and_refuse_a_page_size_of_the_wrong_type(
    tmp_path: Path,
) -> None:
    from tests.helpers.mcp_face import face_env

    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(tmp_path / "catalog"))
    with anyio.fail_after(scaled(60)):
        async with mcp_setup_client(tmp_path, tmp_path / "stderr.log", Recorder(), env=env) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("mcp_setup_search", "mcp_setup_get", "mcp_setup_list_servers"):
                assert tools[name].annotations.read_only_hint is True, name
                assert tools[name].title
            assert tools["mcp_setup_remove"].annotations.destructive_hint is True
            assert tools["mcp_setup_search"].annotations.open_world_hint is True
            assert tools["mcp_setup_install_and_connect"].annotations.open_world_hint is True
            assert tools["mcp_setup_list_servers"].annotations.open_world_hint is False
            assert tools["mcp_setup_install_and_connect"].title == "Install a server"
            for bad in ("abc", 2.5, True):
                answer = await call(client, "mcp_setup_search", {"query": "x", "page_size": bad})
                assert answer["ok"] is False and answer["error"]["code"] == "invalid_input"
                assert "page_size" in answer["error"]["message"]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_failed_remote_tests_leave_no_probe_dir_in_scratch(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    prober = Prober(Redactor(), scratch_root=scratch, timeout=scaled(10))
    spec = LaunchSpec(transport="streamable-http", url=f"http://127.0.0.1:{closed_port()}/mcp")
    for _ in range(5):
        with anyio.fail_after(scaled(30)), pytest.raises(SetupError):
            await prober.probe(spec, {})
    await prober.drain()
    assert list(scratch.iterdir()) == []


def test_serve_opens_a_browser_only_where_a_display_is_available() -> None:
    from app.web.serve import display_available

    assert display_available({}, "linux") is False  # headless: the URL is printed, nothing crashes
    assert display_available({"DISPLAY": ":0"}, "linux") is True
    assert display_available({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is True
    assert display_available({}, "darwin") is True and display_available({}, "win32") is True


def test_every_command_help_opens_with_a_sentence_saying_what_it_does() -> None:
    from app.cli.main import _parser

    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = dict(sub.choices)  # type: ignore[arg-type]
    assert {"list", "show", "remove", "logs", "search", "doctor", "add", "serve", "mcp"} <= set(commands)
    for name, command in commands.items():
        text = " ".join(command.format_help().split())  # the formatter wraps lines
        description = " ".join((command.description or "").split())
        assert len(description) > 10 and description in text, name
    assert "<server>__<tool>" in commands["mcp"].description  # the installed servers' tools too


def test_help_lists_every_command_once_under_a_group_a_person_understands(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.main import GROUPS, _parser, main

    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(sub.choices) and len(grouped) == len(set(grouped))  # type: ignore[arg-type]
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    titles = [title for title, _ in GROUPS]
    assert [line.rstrip(":") for line in text.splitlines() if line.rstrip(":") in titles] == titles
    for title, names in GROUPS:
        section = text.split(f"\n{title}:\n", 1)[1].split("\n\n", 1)[0]
        listed = [line.split()[0] for line in section.splitlines() if line.startswith("  ") and line[2] != " "]
        assert listed == list(names), title
    assert text.index("add and use servers:") < text.index("options:") < text.index("examples:")


def test_an_unknown_command_is_answered_with_the_close_one(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.main import main

    assert main(["lst"]) == 2
    assert capsys.readouterr().err == "mcp-setup: unknown command 'lst'. Did you mean 'list'?\n"
    assert main(["frobnicate", "--help"]) == 2
    assert (
        capsys.readouterr().err == "mcp-setup: unknown command 'frobnicate'. `mcp-setup --help` lists the commands.\n"
    )
