"""``mcp-setup serve`` as a real subprocess: prints its URL, serves the page, boot-spawns the
installed servers, and stops cleanly on Ctrl-C (SIGINT) or SIGTERM leaving no child behind."""

from __future__ import annotations

import json
import signal
import socket
import stat
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from tests.browser.serve import Served, make_catalog, start_serve, stop_serve
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv, real_mcp_setup_argv
from tests.helpers.processes import processes_mentioning, wait_gone
from tests.helpers.timeouts import scaled
from tests.helpers.web_serve import install_stub


def test_serve_prints_its_url_serves_the_page_and_stops_on_ctrl_c_leaving_no_child(tmp_path: Path, canary: str) -> None:
    catalog = make_catalog(tmp_path, canary)
    served = start_serve(tmp_path, catalog)
    data_dir = served.env["MCP_SETUP_HOME"]
    try:
        assert served.url == f"http://127.0.0.1:{served.port}/?t={served.token}"
        assert served.port != 8765 and len(served.token) >= 40
        with served.client() as http:
            page = http.get(served.url)
        assert page.status_code == 200 and "Add MCP server" in page.text

        install_stub(served, canary)
        children = processes_mentioning(data_dir)
        assert children, "the installed stub should be running under the data dir"
    finally:
        code = stop_serve(served, signal.SIGINT)
    assert code == 0, served.stderr()
    assert wait_gone(children) == []
    assert processes_mentioning(data_dir) == []
    stderr = served.stderr()
    assert "Traceback" not in stderr and canary not in stderr and served.token not in stderr


def test_serve_boot_spawns_installed_servers_and_stops_on_sigterm_leaving_no_child(tmp_path: Path) -> None:
    value = "canary-" + uuid.uuid4().hex
    catalog = make_catalog(tmp_path, value)
    first = start_serve(tmp_path, catalog)
    try:
        server_id = install_stub(first, value)
    finally:
        assert stop_serve(first, signal.SIGINT) == 0
    data_dir = first.env["MCP_SETUP_HOME"]
    assert processes_mentioning(data_dir) == []

    second = start_serve(tmp_path, catalog)
    try:
        assert second.token != first.token  # a new key on every start
        listed = second.rpc("servers.list", {"wait_seconds": 30})["result"]["servers"]
        assert [(s["server_id"], s["status"]) for s in listed] == [(server_id, "connected")]
        assert {t["name"] for t in listed[0]["tools"]} >= {"echo", "whoami"}
        children = processes_mentioning(data_dir)
        assert children
        # The old token opens nothing.
        with second.client() as http:
            assert http.get("/", params={"t": first.token}).status_code == 403
    finally:
        code = stop_serve(second, signal.SIGTERM)
    assert code == 0, second.stderr()
    assert wait_gone(children) == []
    assert processes_mentioning(data_dir) == []
    assert "Traceback" not in second.stderr()


def test_ctrl_c_while_a_setup_waits_for_a_secret_stops_at_once_and_answers_the_waiting_call(
    tmp_path: Path, canary: str
) -> None:
    served = start_serve(tmp_path, make_catalog(tmp_path, canary))
    answers: list[object] = []
    tab = served.websocket()
    try:
        session_id = json.loads(tab.recv(timeout=scaled(10)))["session_id"]

        def spawn() -> None:
            with served.client(timeout=scaled(60)) as http:
                body = {
                    "jsonrpc": "2.0",
                    "id": 5,
                    "method": "spawn_subagent",
                    "params": {"goal": "set up the stub server"},
                }
                answers.append(
                    http.post("/rpc", json=body, headers=served.headers(**{"X-MCP-Setup-Session": session_id}))
                )

        caller = threading.Thread(target=spawn, daemon=True)
        caller.start()
        while json.loads(tab.recv(timeout=scaled(30)))["type"] != "secret_request":
            pass
        code = stop_serve(served, signal.SIGINT, timeout=scaled(15))
        caller.join(scaled(15))
    finally:
        tab.close()
        if served.proc.poll() is None:
            stop_serve(served)
    assert code == 0, served.stderr()
    [response] = answers
    body = response.json()  # type: ignore[attr-defined]
    assert body["id"] == 5 and body["error"]["data"]["code"] == "shutting_down"
    assert "Traceback" not in served.stderr()
    assert processes_mentioning(served.env["MCP_SETUP_HOME"]) == []


def test_serve_says_so_when_its_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = subprocess.run(
            mcp_setup_argv("serve", "--no-browser", "--port", str(port)),
            env=face_env(tmp_path, MCP_SETUP_REGISTRIES="local"),
            cwd=str(REPO),
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "--port" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize("port", ["-1", "70000"])
def test_serve_refuses_a_port_out_of_range(tmp_path: Path, port: str) -> None:
    proc = subprocess.run(
        mcp_setup_argv("serve", "--no-browser", "--port", port),
        env=face_env(tmp_path, MCP_SETUP_REGISTRIES="local"),
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr


def run_cli(served: Served, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        mcp_setup_argv(*argv),
        env=served.env,
        cwd=str(REPO),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )


def test_open_prints_the_running_serves_link_kept_private_and_gone_once_it_stops(tmp_path: Path) -> None:
    served = start_serve(tmp_path, make_catalog(tmp_path, "value-1234-abcd"))
    link_file = Path(served.env["MCP_SETUP_HOME"]) / "serve.json"
    try:
        opened = run_cli(served, "open")
        assert opened.returncode == 0, opened.stderr
        assert opened.stdout == served.url + "\n" and opened.stderr == ""  # no display here: printed only
        assert stat.S_IMODE(link_file.stat().st_mode) == 0o600  # the link's token is the person's key
    finally:
        assert stop_serve(served, signal.SIGTERM) == 0, served.stderr()
    assert not link_file.exists()
    gone = run_cli(served, "open")
    assert gone.returncode == 1 and "no `mcp-setup serve` runs on this data folder" in gone.stderr
    assert served.token not in gone.stdout + gone.stderr


def test_a_second_serve_on_the_same_data_folder_says_which_one_runs_and_exits_1(tmp_path: Path) -> None:
    # Started as a shell starts it, so the pid the test holds is the one the second serve names.
    served = start_serve(tmp_path, make_catalog(tmp_path, "value-1234-abcd"), argv=real_mcp_setup_argv())
    try:
        second = run_cli(served, "serve", "--no-browser", "--port", "0")
        assert second.returncode == 1 and second.stdout == ""
        [line] = second.stderr.strip().splitlines()
        assert f"already running on this data folder (pid {served.proc.pid}," in line
        assert "`mcp-setup open` shows its link" in line and served.token not in line
        assert served.proc.poll() is None  # the first one serves on
        with served.client() as http:
            assert http.get(served.url).status_code == 200
    finally:
        assert stop_serve(served) == 0, served.stderr()


def test_the_lock_of_a_killed_serve_is_taken_over_by_the_next_one(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path, "value-1234-abcd")
    crashed = start_serve(tmp_path, catalog)
    stop_serve(crashed, signal.SIGKILL)  # no clean exit: its lock file stays behind
    link_file = Path(crashed.env["MCP_SETUP_HOME"]) / "serve.json"
    assert crashed.token in link_file.read_text()
    assert run_cli(crashed, "open").returncode == 1  # its owner is dead: nothing to open
    wait_gone(processes_mentioning(crashed.env["MCP_SETUP_HOME"]))
    next_one = start_serve(tmp_path, catalog)
    try:
        assert run_cli(next_one, "open").stdout.strip() == next_one.url
    finally:
        assert stop_serve(next_one) == 0, next_one.stderr()


def page_load_search_and_install(served: Served) -> None:
    with served.client() as http:
        assert http.get(served.url).status_code == 200
    assert served.rpc("mcp_setup_search", {"query": "stub"})["result"]["servers"]
    install_stub(served, "value-1234-abcd")


def test_serve_prints_only_its_link_for_a_page_load_a_search_and_an_install(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path, "value-1234-abcd")
    quiet = start_serve(tmp_path / "quiet", catalog)
    try:
        page_load_search_and_install(quiet)
    finally:
        assert stop_serve(quiet) == 0, quiet.stderr()
    assert [line for line in quiet.stderr().splitlines() if " INFO " in line] == []
    assert "running at" in quiet.stdout_lines[0]

    verbose = start_serve(tmp_path / "verbose", catalog, serve_args=("--verbose",))
    try:
        page_load_search_and_install(verbose)
    finally:
        assert stop_serve(verbose) == 0, verbose.stderr()
    assert " INFO app.web.rpc: JSON-RPC mcp_setup_search" in verbose.stderr()  # the request log, when asked
