"""``mcp-setup approve`` (#22): a stdio client with no URL elicitation, on a machine with no browser,
gets ``consent_required`` naming where the user approves; the user answers it from another
terminal (a real pty, pexpect), and the client's next call runs: one approval covers a test and
its install, and the consent comes before the key it asks for. Without a terminal the command
refuses and reads nothing."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import anyio
import pexpect
import pytest

from tests.browser.serve import STUB, make_catalog
from tests.helpers.mcp_face import REPO, Browser, Recorder, call, face_env, mcp_setup_argv, mcp_setup_client
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio


def _approve_in_a_terminal(env: dict[str, str], *answers: str) -> str:
    argv = mcp_setup_argv("approve")
    child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(60))
    child.logfile_read = transcript = io.StringIO()
    try:
        for expected, answer in answers_pairs(answers):
            child.expect(expected)
            child.sendline(answer)
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript.getvalue()
    return transcript.getvalue()


def answers_pairs(flat: tuple[str, ...]) -> list[tuple[str, str]]:
    return list(zip(flat[::2], flat[1::2], strict=True))


async def test_an_agent_driven_install_over_stdio_takes_one_approve_which_shows_what_runs_before_the_key(
    tmp_path: Path, canary: str
) -> None:
    """One approval per install where the test ran first: the client asks for the key, tests (the
    consent opens before the key is typed) and installs; the person runs `mcp-setup approve` once,
    sees what will run, approves, then types the key; the test and the install go through, and
    nothing more waits."""
    catalog = make_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog), MCP_SETUP_CONSENT="ask")
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    recorder = Recorder()
    with anyio.fail_after(scaled(180)):
        async with mcp_setup_client(tmp_path, tmp_path / "stderr.log", recorder, env=env) as client:
            secret = await call(
                client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Key", "server": STUB}
            )
            assert secret["status"] == "pending"  # not typed yet
            args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": secret["ref"]}}
            first = await call(client, "mcp_setup_test_connection", args)
            assert first["error"]["code"] == "consent_required", first  # asked before the key
            assert "mcp-setup approve" in first["error"]["message"] and first["error"]["details"] == {
                "status": "pending"
            }

            granted = tmp_path / "notes"
            granted.mkdir()
            shown = await anyio.to_thread.run_sync(
                lambda: _approve_in_a_terminal(
                    env,
                    r"Allow mcp-setup to test .*\? \[y/N\] ",
                    "y",
                    r"Pick 1-3 \[2\]: ",
                    "3",  # may ask your AI to write text: yes, with tools
                    r"Another folder it may read and write",
                    str(granted),
                    r"no network\? \[y/N\] ",
                    "n",
                    r"Your STUB_API_KEY \(hidden",
                    canary,
                )
            )
            # What runs, then the key it gets: in that order, in one sitting.
            assert shown.index("Claude Desktop asked to install " + STUB) < shown.index("Your STUB_API_KEY (hidden")
            assert shown.index("Technical details:") < shown.index("Your STUB_API_KEY (hidden")
            assert "no second question" in shown and "Sandbox: Sandbox:" not in shown
            assert "<your STUB_API_KEY>" in shown and "${" not in shown and canary not in shown
            assert "Approved" in shown and "Saved" in shown

            tested = await call(client, "mcp_setup_test_connection", args)
            assert tested.get("ok") is True, tested
            assert {t["name"] for t in tested["tools"]} >= {"echo", "whoami"}
            installed = await call(client, "mcp_setup_install_and_connect", args)  # no second approval
            assert installed.get("status") == "connected", installed
            assert "left_out_by_user" not in installed  # every tool the test listed
            listed = await call(client, "mcp_setup_list_servers", {})
            assert [s["installed_by"] for s in listed["servers"]] == ["mcp:claude-desktop"]
            again = await anyio.to_thread.run_sync(lambda: _approve_in_a_terminal(env))
            assert "Nothing is waiting for your approval" in again  # exactly one approval was asked
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    with Store.for_data_dir(tmp_path / "data", Vault.in_memory()) as store:
        (server,) = store.servers.list()
        assert str(granted.resolve()) in server.launch_spec["sandbox_grants"]  # the person's widening, stored
        assert server.sampling == "tools"  # chosen in the one approval, for the install it covers
    assert canary not in recorder.text() and "/consents/" not in recorder.text()
    nothing = subprocess.run(
        mcp_setup_argv("approve"),
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        stdin=subprocess.DEVNULL,
    )
    assert nothing.returncode == 2  # not a terminal: refused before anything is listed


def test_approve_refuses_without_a_terminal_and_reads_nothing_from_stdin(tmp_path: Path) -> None:
    env = face_env(tmp_path)
    done = subprocess.run(
        mcp_setup_argv("approve"),
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        input="y\ny\ny\n",
    )
    assert done.returncode == 2
    assert "terminal" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_approve_with_nothing_waiting_says_so(tmp_path: Path) -> None:
    env = face_env(tmp_path)
    argv = mcp_setup_argv("approve")
    child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(60))
    child.expect("Nothing is waiting for your approval")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


async def test_the_serve_page_shows_a_stdio_clients_secret_prompt_and_consent_and_its_answers_reach_that_client(
    tmp_path: Path, canary: str
) -> None:
    from tests.browser.serve import start_serve, stop_serve

    catalog = make_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog), MCP_SETUP_CONSENT="ask")
    env.pop("DISPLAY", None)
    served = start_serve(tmp_path, catalog, MCP_SETUP_CONSENT="ask")  # the same data dir
    try:
        with anyio.fail_after(scaled(180)), served.websocket() as page:
            async with mcp_setup_client(tmp_path, tmp_path / "stderr.log", Recorder(), env=env) as client:

                def shown(kind: str) -> dict:
                    while True:
                        event = json.loads(page.recv(timeout=scaled(60)))
                        if event.get("type") == kind:
                            return event

                secret = await call(
                    client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Key", "server": STUB}
                )
                asked = await anyio.to_thread.run_sync(
                    shown, "secret_request"
                )  # the stdio client's prompt, in the page
                assert asked["prompt_id"] == secret["prompt_id"] and asked["key_name"] == "STUB_API_KEY"
                with served.client() as http:
                    typed = http.post(
                        f"/api/secrets/{asked['prompt_id']}", json={"value": canary}, headers=served.headers()
                    )
                assert typed.status_code == 200, typed.text
                args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": secret["ref"]}}
                first = await call(client, "mcp_setup_test_connection", args)
                assert first["error"]["code"] == "consent_required", first

                event = await anyio.to_thread.run_sync(shown, "consent_request")
                assert event["consent"]["server"] == STUB and canary not in json.dumps(event)
                with served.client() as http:
                    answered = http.post(
                        f"/api/consents/{event['consent_id']}",
                        json={"approve": True, "accept_warnings": True},
                        headers=served.headers(),
                    )
                assert answered.status_code == 200, answered.text
                tested = await call(client, "mcp_setup_test_connection", args)
                assert tested.get("ok") is True, tested
    finally:
        stop_serve(served)


async def test_a_secret_a_stdio_client_asks_for_is_typed_at_a_hidden_prompt_of_mcp_setup_approve(
    tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))  # consent off
    env.pop("DISPLAY", None)
    recorder = Recorder()
    with anyio.fail_after(scaled(180)):
        async with mcp_setup_client(tmp_path, tmp_path / "stderr.log", recorder, env=env) as client:
            secret = await call(
                client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Key\x1b[2J", "server": STUB}
            )
            assert secret["status"] == "pending"
            shown = await anyio.to_thread.run_sync(
                lambda: _approve_in_a_terminal(env, r"Your STUB_API_KEY \(hidden", canary)
            )
            assert "Saved" in shown and "\x1b[2J" not in shown
            assert canary not in shown  # hidden: not echoed
            tested = await call(
                client,
                "mcp_setup_test_connection",
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": secret["ref"]}},
            )
            assert tested.get("ok") is True, tested
    assert canary not in recorder.text()
    for path in (tmp_path / "data").glob("mcp-setup.db*"):
        assert canary.encode() not in path.read_bytes()  # encrypted on its way, and gone once used


async def test_approve_tells_of_a_guess_and_only_the_user_unblocks_the_client_it_locked(
    tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))  # consent off
    env.pop("DISPLAY", None)
    with anyio.fail_after(scaled(180)):
        async with mcp_setup_client(tmp_path, tmp_path / "stderr.log", Recorder(), env=env) as client:
            secret = await call(
                client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Key", "server": STUB}
            )
            await Browser().submit(secret["url"], canary)
            installed = await call(
                client,
                "mcp_setup_install_and_connect",
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": secret["ref"]}},
            )
            assert installed["status"] == "connected", installed

            async def echo(text: str) -> str:
                result = await client.call_tool("stub__echo", {"text": text})
                return result.content[0].text  # type: ignore[union-attr]

            answers = [await echo(canary) for _ in range(3)]  # guesses of the stored value
            assert "refused" in answers[0] and "blocked" in answers[-1], answers
            assert "blocked" in await echo("hello")  # locked: even a harmless call

            shown = await anyio.to_thread.run_sync(
                lambda: _approve_in_a_terminal(env, r"Unblock client:stdio.*\? \[y/N\] ", "y")
            )
            assert "sent a value that mcp-setup protects" in shown and canary not in shown
            assert await echo("hello") == "hello"  # unblocked by the user


async def test_a_clients_lock_outlives_its_session_until_the_user_unblocks_it_and_other_clients_are_not_held(
    tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))  # consent off
    env.pop("DISPLAY", None)

    async def echo(client: object, text: str) -> str:
        result = await client.call_tool("stub__echo", {"text": text})  # type: ignore[attr-defined]
        return result.content[0].text  # type: ignore[union-attr]

    def session(name: str):  # noqa: ANN202 - the SDK client's context manager
        return mcp_setup_client(tmp_path, tmp_path / "stderr.log", Recorder(), env=env, client_name=name)

    with anyio.fail_after(scaled(240)):
        async with session("Eval Client") as client:
            secret = await call(
                client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Key", "server": STUB}
            )
            await Browser().submit(secret["url"], canary)
            installed = await call(
                client,
                "mcp_setup_install_and_connect",
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": secret["ref"]}},
            )
            assert installed["status"] == "connected", installed
            answers = [await echo(client, canary) for _ in range(2)]  # guesses of the stored value
            assert "blocked" in answers[-1], answers
        # The client restarts: a new session, a new process. Its allowance does not come back.
        async with session("Eval Client") as again:
            assert "blocked" in await echo(again, "hello")
            async with session("Other Client") as other:  # another client is not held by it
                assert await echo(other, "hello") == "hello"
            shown = await anyio.to_thread.run_sync(
                lambda: _approve_in_a_terminal(env, r"Unblock client:stdio via eval-client\? \[y/N\] ", "y")
            )
            assert canary not in shown
            assert await echo(again, "hello") == "hello"  # unblocked by the user
