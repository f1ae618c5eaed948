"""The MCP conformance suite against server-everything, directly and through the gateway (#29).

    python -m bench.conformance [--version 0.1.16] [--requirements REV ...] [--tools DIR] [--json OUT]
                                [--reference DIR]

Needs the network once (npm): ``@modelcontextprotocol/conformance`` and Node 22 (npm's
``node@22``; the system Node may be older) are installed into ``--tools`` (default
``~/.cache/mcp-setup-conformance/<version>``). Not part of the test run.

1. **direct**: ``@modelcontextprotocol/server-everything`` (``EVERYTHING``, from npm through npx)
   over streamable HTTP on a loopback port; ``conformance server --url`` against it. With
   ``--reference DIR``: the suite's reference server instead, the Python SDK's
   ``examples/servers/everything-server`` (a checkout of it in ``DIR``, run on this ``.venv``'s
   SDK; it implements every scenario's tools, prompts and resources, in both eras).
2. **gateway**: the same server installed in a fresh data dir (stdio, as ``mcp-setup`` runs it),
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


def reference_commands(reference: Path | None, port: int) -> tuple[list[str], dict[str, str], list[str]]:
    """How to run the server under test: (its HTTP command, that command's environment, its stdio
    argv as the gateway starts it)."""
    if reference is None:
        return ["npx", "-y", EVERYTHING, "streamableHttp"], {"PORT": str(port)}, ["npx", "-y", EVERYTHING]
    path = f"import sys; sys.path.insert(0, {str(reference)!r}); from mcp_everything_server.server import "
    http = [sys.executable, "-c", path + "main; main()", "--port", str(port), "--log-level", "WARNING"]
    stdio = [sys.executable, "-c", path + "mcp; mcp.run(transport='stdio')"]
    return http, {}, stdio


async def serve_face(data: Path, port: int, install: list[str] | None) -> Any:
    """The MCP face of a runtime on ``data`` at ``http://127.0.0.1:port/mcp``; returns a stopper."""
    import keyring.backends.fail
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    from app.mcp import McpFace
    from app.runtime import build_runtime
    from app.settings import Settings
    from setup_agent.launch.spec import LaunchSpec
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    backend = keyring.backends.fail.Keyring()
    slug = None
    if install:
        spec = LaunchSpec(
            command=install[0],
            args=install[1:],
            package_type="npm" if install[0] == "npx" else "stdio",
            runner=Path(install[0]).name,
            identifier=EVERYTHING.rsplit("@", 1)[0],
            version=EVERYTHING.rsplit("@", 1)[1],
        )
        with Store.for_data_dir(data, Vault.open(data, keyring_backend=backend)) as store:
            slug = store.servers.install(
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
            ).slug
    runtime = build_runtime(
        Settings(home=data, registries="local", sandbox="off"), keyring_backend=backend, host_env=dict(os.environ)
    )
    await runtime.start(eager=True)
    await runtime.connections.wait_all_settled(120)
    face = McpFace(runtime)
    # The Host and Origin checks of ``serve`` (app/web/security.py), here the SDK's own.
    guard = TransportSecuritySettings(
        allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}"],
        allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}"],
    )
    manager = StreamableHTTPSessionManager(app=face.server, security_settings=guard)
    stack = manager.run()
    await stack.__aenter__()
    asgi: Any = StreamableHTTPASGIApp(manager)
    if slug is not None:
        asgi = BareNames(asgi, slug)
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


class BareNames:
    """The suite calls the reference's tools and prompts by their own names (``test_simple_text``)
    and looks for them by those names in the lists; the gateway names them ``<slug>__<name>``
    (``gateway_name``: shortened with a digest past 48 characters), its one renaming. This ASGI
    wrapper stands for a client that knows the gateway's names: a ``tools/call``, ``prompts/get``
    or prompt completion of a bare name (and its ``Mcp-Name`` header) gets the gateway's name, and
    a ``tools/list`` or ``prompts/list`` answer shows the installed server's own names again. It
    changes nothing else."""

    def __init__(self, app: Any, slug: str) -> None:
        from setup_agent.store.catalog import gateway_name

        self.app, self.slug, self.gateway_name = app, slug, gateway_name
        self.bare: dict[str, str] = {}  # gateway name -> the server's own

    def to_gateway(self, name: str) -> str:
        if name.startswith("mcp_setup_") or name in self.bare:
            return name
        gateway = self.gateway_name(self.slug, name)
        self.bare[gateway] = name
        return gateway

    def request(self, body: bytes) -> tuple[bytes, tuple[str, str] | None]:
        try:
            message = json.loads(body)
        except ValueError:
            return body, None
        renamed = None
        for one in message if isinstance(message, list) else [message]:
            params = one.get("params") if isinstance(one, dict) else None
            if not isinstance(params, dict):
                continue
            if one.get("method") in ("tools/call", "prompts/get") and isinstance(params.get("name"), str):
                renamed = (params["name"], self.to_gateway(params["name"]))
                params["name"] = renamed[1]
            ref = params.get("ref")
            if one.get("method") == "completion/complete" and isinstance(ref, dict) and ref.get("type") == "ref/prompt":
                ref["name"] = self.to_gateway(str(ref.get("name")))
        return json.dumps(message).encode(), renamed

    def answer(self, body: bytes) -> bytes:
        """Each JSON message of an answer (plain, or an SSE ``data:`` line) with the lists' names
        back to the server's own."""

        def one(text: bytes) -> bytes:
            try:
                message = json.loads(text)
            except ValueError:
                return text
            result = message.get("result") if isinstance(message, dict) else None
            for key in ("tools", "prompts"):
                for item in result.get(key, []) if isinstance(result, dict) else []:
                    name = item.get("name") if isinstance(item, dict) else None
                    prefix = f"{self.slug}__"
                    if isinstance(name, str) and name.startswith(prefix):
                        item["name"] = self.bare.get(name, name[len(prefix) :])
                        self.bare[name] = item["name"]
            return json.dumps(message).encode()

        if body.lstrip().startswith((b"{", b"[")):
            return one(body)
        return b"\n".join(
            b"data: " + one(line[6:]) if line.startswith(b"data: ") else line for line in body.split(b"\n")
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = list(scope["headers"])
        replay: Any = receive
        if scope["method"] == "POST":
            chunks = []
            while True:
                event = await receive()
                chunks.append(event.get("body", b""))
                if not event.get("more_body"):
                    break
            body, renamed = self.request(b"".join(chunks))
            headers = [(k, v) for k, v in headers if k != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            if renamed is not None:
                # The header follows the body only where it matched it (the suite also sends
                # mismatched ones, which the face must refuse).
                bare, gateway = (n.encode() for n in renamed)
                headers = [(k, gateway if k == b"mcp-name" and v == bare else v) for k, v in headers]
            sent = False

            async def replay() -> Any:
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

        async def relabel(event: Any) -> None:
            if event["type"] == "http.response.start":
                event = {**event, "headers": [(k, v) for k, v in event["headers"] if k != b"content-length"]}
            elif event["type"] == "http.response.body" and event.get("body"):
                event = {**event, "body": self.answer(event["body"])}
            await send(event)

        await self.app({**scope, "headers": headers}, replay, relabel)


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
    reference = Path(args.reference).resolve() if args.reference else None
    http, http_env, stdio = reference_commands(reference, port)
    direct = subprocess.Popen(
        http,
        env={**os.environ, **http_env},
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
    targets: list[tuple[str, list[str] | None]] = [("gateway", stdio)]
    if not args.no_empty:
        targets.append(("empty", None))
    for target, install in targets:
        port = free_port()
        stop = await serve_face(work / target, port, install)
        try:
            for req in sets:
                columns[name(target, req)] = await asyncio.to_thread(
                    run_suite, tools, f"http://127.0.0.1:{port}/mcp", work / f"{target}-{req}", req
                )
        finally:
            await stop()
    server = str(reference) if reference is not None else EVERYTHING
    return {"version": args.version, "requirements": args.requirements, "server": server, "results": columns}


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
    parser.add_argument(
        "--reference",
        help="a checkout of the Python SDK's examples/servers/everything-server (default: server-everything)",
    )
    parser.add_argument("--no-empty", action="store_true", help="leave out the face with nothing installed")
    args = parser.parse_args()
    report = asyncio.run(main_async(args))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    print(table(report))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
