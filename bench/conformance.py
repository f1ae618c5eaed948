"""The MCP conformance suite against server-everything, directly and through the gateway (#29).

    python -m bench.conformance [--version 0.1.16] [--requirements REV ...] [--tools DIR] [--json OUT]

Needs the network once (npm): ``@modelcontextprotocol/conformance`` and Node 22 (npm's
``node@22``; the system Node may be older) are installed into ``--tools`` (default
``~/.cache/mcp-setup-conformance/<version>``). Not part of the test run.

1. **direct**: ``@modelcontextprotocol/server-everything`` (``EVERYTHING``, from npm through npx)
   over streamable HTTP on a loopback port; ``conformance server --url`` against it.
2. **gateway**: the same package installed in a fresh data dir (stdio, as ``mcp-setup`` runs it),
   the MCP face served over streamable HTTP on a loopback port (the SDK's session manager, as
   ``mcp-setup serve``'s ``/mcp`` but without its token check: the suite's CLI sends no
   Authorization header); the suite against that.
3. **empty**: the face with nothing installed (it must fail no scenario of what it declares).

Prints a table scenario × (direct, gateway, empty) and writes it as JSON with ``--json``. The
conformance package ships no reference server; server-everything stands in for it, so a
scenario that needs the reference's own tool names fails directly too (compare the columns).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"
_LINE = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tools_dir(root: Path, version: str) -> Path:
    """Node 22 and the suite, installed once with npm into ``root``."""
    if not (root / "node_modules" / ".bin" / "conformance").exists():
        root.mkdir(parents=True, exist_ok=True)
        (root / "package.json").write_text('{"name": "mcp-setup-conformance", "private": true}\n')
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "node@22", f"@modelcontextprotocol/conformance@{version}"],
            cwd=root,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return root


def run_suite(tools: Path, url: str, out: Path, requirements: str | None = None) -> dict[str, tuple[int, int]]:
    """``conformance server --url`` (0.2: ``--requirements REV``, a revision's frozen set):
    {scenario: (passed, failed)} from its summary."""
    env = {**os.environ, "PATH": f"{tools / 'node_modules' / 'node' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [
            str(tools / "node_modules" / ".bin" / "conformance"),
            "server",
            "--url",
            url,
            "-o",
            str(out),
            *(["--requirements", requirements] if requirements else []),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    results = {}
    for line in proc.stdout.splitlines():
        m = _LINE.match(line.strip())
        if m:
            results[m.group(2)] = (int(m.group(3)), int(m.group(4)))
    if not results:
        raise RuntimeError(f"no summary from the suite:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return results


async def wait_port(port: int, timeout: float = 120.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            try:
                _r, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                return
            except OSError:
                await asyncio.sleep(0.2)


async def serve_face(data: Path, port: int, install: bool) -> Any:
    """The MCP face of a runtime on ``data`` at ``http://127.0.0.1:port/mcp``; returns a stopper."""
    import keyring.backends.fail
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route

    from app.mcp import McpFace
    from app.runtime import build_runtime
    from app.settings import Settings
    from setup_agent.launch.spec import LaunchSpec
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    backend = keyring.backends.fail.Keyring()
    if install:
        spec = LaunchSpec(
            command="npx",
            args=["-y", EVERYTHING],
            package_type="npm",
            runner="npx",
            identifier=EVERYTHING.rsplit("@", 1)[0],
            version=EVERYTHING.rsplit("@", 1)[1],
        )
        with Store.for_data_dir(data, Vault.open(data, keyring_backend=backend)) as store:
            store.servers.install(
                qualified_name="io.github.modelcontextprotocol/server-everything",
                source="local",
                version=spec.version,
                package_type="npm",
                launch_spec=spec.model_dump(mode="json"),
                installed_by="bench",
                tools_hash="0" * 64,
                env={},
                title="Everything",
                tools=None,
            )
    runtime = build_runtime(
        Settings(home=data, registries="local", sandbox="off"), keyring_backend=backend, host_env=dict(os.environ)
    )
    await runtime.start(eager=True)
    await runtime.connections.wait_all_settled(120)
    face = McpFace(runtime)
    manager = StreamableHTTPSessionManager(app=face.server)
    stack = manager.run()
    await stack.__aenter__()
    asgi = StreamableHTTPASGIApp(manager)
    app = Starlette(routes=[Route("/mcp", endpoint=asgi, methods=["GET", "POST", "DELETE"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    await wait_port(port)

    async def stop() -> None:
        server.should_exit = True
        await task
        await stack.__aexit__(None, None, None)
        face.close()
        await runtime.aclose()

    return stop


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    tools = tools_dir(
        Path(args.tools).expanduser()
        if args.tools
        else Path.home() / ".cache" / "mcp-setup-conformance" / args.version,
        args.version,
    )
    work = Path(tempfile.mkdtemp(prefix="mcp-setup-conformance-"))
    columns: dict[str, dict[str, tuple[int, int]]] = {}
    port = free_port()
    direct = subprocess.Popen(
        ["npx", "-y", EVERYTHING, "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    sets = args.requirements or [None]

    def name(target: str, req: str | None) -> str:
        return f"{target} {req}" if req else target

    try:
        await wait_port(port)
        for req in sets:
            columns[name("direct", req)] = await asyncio.to_thread(
                run_suite, tools, f"http://127.0.0.1:{port}/mcp", work / f"direct-{req}", req
            )
    finally:
        os.killpg(direct.pid, 15)
        direct.wait(10)
    for target, install in (("gateway", True), ("empty", False)):
        port = free_port()
        stop = await serve_face(work / target, port, install)
        try:
            for req in sets:
                columns[name(target, req)] = await asyncio.to_thread(
                    run_suite, tools, f"http://127.0.0.1:{port}/mcp", work / f"{target}-{req}", req
                )
        finally:
            await stop()
    return {"version": args.version, "requirements": args.requirements, "everything": EVERYTHING, "results": columns}


def table(report: dict[str, Any]) -> str:
    cols = list(report["results"])
    scenarios = sorted({s for c in report["results"].values() for s in c})
    mark = lambda r: "–" if r is None else ("pass" if r[1] == 0 else f"FAIL {r[1]}/{r[0] + r[1]}")  # noqa: E731
    lines = ["| scenario | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for s in scenarios:
        lines.append(f"| {s} | " + " | ".join(mark(report["results"][c].get(s)) for c in cols) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.1.16", help="the conformance package's version (0.2.0-alpha.x: newest)")
    parser.add_argument(
        "--requirements", nargs="*", help="0.2 only: revisions whose frozen sets to run (2025-11-25 2026-07-28)"
    )
    parser.add_argument("--tools", help="where Node 22 and the suite are installed")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    report = asyncio.run(main_async(args))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    print(table(report))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
