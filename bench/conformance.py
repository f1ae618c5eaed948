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
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.helpers.conformance import free_port, install_command, serve_face, suite_env, tools_dir, wait_port

EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"
_LINE = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed")


def run_suite(tools: Path, url: str, out: Path, requirements: str | None = None) -> dict[str, tuple[int, int]]:
    """``conformance server --url`` (0.2: ``--requirements REV``, a revision's frozen set):
    {scenario: (passed, failed)} from its summary."""
    env = suite_env(tools)
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


def reference_commands(reference: Path | None, port: int) -> tuple[list[str], dict[str, str], list[str]]:
    """How to run the server under test: (its HTTP command, that command's environment, its stdio
    argv as the gateway starts it)."""
    if reference is None:
        return ["npx", "-y", EVERYTHING, "streamableHttp"], {"PORT": str(port)}, ["npx", "-y", EVERYTHING]
    path = f"import sys; sys.path.insert(0, {str(reference)!r}); from mcp_everything_server.server import "
    http = [sys.executable, "-c", path + "main; main()", "--port", str(port), "--log-level", "WARNING"]
    stdio = [sys.executable, "-c", path + "mcp; mcp.run(transport='stdio')"]
    return http, {}, stdio


async def face_with(data: Path, port: int, install: list[str] | None) -> Any:
    """The MCP face of a runtime on ``data`` (with ``install`` installed) at
    ``http://127.0.0.1:port/mcp`` (tests/helpers/conformance.py); returns a stopper."""
    import keyring.backends.fail

    from app.runtime import build_runtime
    from app.settings import Settings

    backend = keyring.backends.fail.Keyring()
    slug = None
    if install:
        name, version = EVERYTHING.rsplit("@", 1)
        slug = install_command(data, backend, install, identifier=name, version=version)
    runtime = build_runtime(
        Settings(home=data, registries="local", sandbox="off"), keyring_backend=backend, host_env=dict(os.environ)
    )
    stop_face = await serve_face(runtime, port, slug)

    async def stop() -> None:
        await stop_face()
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
        stop = await face_with(work / target, port, install)
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
