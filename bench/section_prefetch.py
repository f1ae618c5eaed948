"""Item 10 (#17 item 2): fetch while the user types.

``@modelcontextprotocol/server-everything`` from the real npm registry, each round with a cold,
private npm cache (a fresh ``HOME``, so a fresh ``~/.npm``, for the runtime and everything it
starts). A round: ``mcp_setup_request_secret`` for the server (the prompt opens), 3 s of the
user typing, the answer, then ``mcp_setup_test_connection`` with the ref; timed from the
answer to the tools listed. With prefetch (the product's default: the prompt starts filling
npm's cache) against without (``MCP_SETUP_PREFETCH_PACKAGES=false``), interleaved rounds.
Target ≤ 0.3×.

``--ecosystem pypi``: the same with ``mcp-server-time`` from the real PyPI and a cold, private
uv cache (``~/.cache/uv`` of the fresh ``HOME``; ``uv``/``uvx`` from the ``uv`` wheel beside this
Python, no Python download). The prefetch there is ``uv pip install --no-build --target`` of the
wheels into that cache (setup_agent/launch/fetch.py): nothing of the package runs before consent.

The registry entry is written here (a local catalog): the real package and version, and an
optional secret setting (``EVERYTHING_TOKEN``, which the server ignores) so that the flow
asks for a secret as a real server's would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import time
from typing import Any

from bench.common import Root, emit, median, summary

NAME = "io.github.modelcontextprotocol/server-everything"
PACKAGE = "@modelcontextprotocol/server-everything"
#: --ecosystem pypi
PYPI_NAME = "io.github.modelcontextprotocol/server-time"
PYPI_PACKAGE = "mcp-server-time"
PYPI_VERSION = "2026.10.19"
TYPING_SECONDS = 3.0  # --typing changes it (context runs: a user fetching a key from a dashboard)


def catalog_entry(root: Root, version: str, ecosystem: str = "npm") -> Any:
    catalog = root.path / "catalog"
    catalog.mkdir(exist_ok=True)
    name, package = (NAME, PACKAGE) if ecosystem == "npm" else (PYPI_NAME, PYPI_PACKAGE)
    doc = {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": name,
        "description": f"{package} from the real {ecosystem} registry.",
        "version": version,
        "packages": [
            {
                "registryType": ecosystem,
                "identifier": package,
                "version": version,
                "transport": {"type": "stdio"},
                "environmentVariables": [
                    {
                        "name": "EVERYTHING_TOKEN",
                        "description": "ignored by the server",
                        "isRequired": False,
                        "isSecret": True,
                        "format": "string",
                    }
                ],
            }
        ],
    }
    (catalog / "everything.json").write_text(json.dumps(doc))
    return catalog


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import keyring.backends.fail

    from app.runtime import build_runtime
    from app.settings import Settings
    from setup_agent.setup.service import CallContext

    pypi = args.ecosystem == "pypi"
    section = "prefetch_pypi" if pypi else "prefetch"
    version = args.version or (PYPI_VERSION if pypi else "2026.8.31")
    name = PYPI_NAME if pypi else NAME
    root = Root(section)
    out: dict[str, Any] = {"section": section, "ecosystem": args.ecosystem, "version": version, "typing_s": args.typing}
    if pypi:
        try:
            from uv import find_uv_bin

            uv_dir = os.path.dirname(find_uv_bin())
        except (ImportError, FileNotFoundError):
            out["error"] = "the uv wheel is not installed (pip install uv)"
            return out
        os.environ["PATH"] = f"{uv_dir}:{os.environ['PATH']}"  # uvx for the runtime's `which` too
    elif shutil.which("npx") is None:
        out["error"] = "npx is not on PATH"
        return out
    try:
        catalog = catalog_entry(root, version, args.ecosystem)
        t: dict[str, list[float]] = {"prefetch": [], "none": []}
        prefetch_s: list[float] = []
        counter = 0

        async def round_(kind: str) -> float:
            nonlocal counter
            counter += 1
            home = root.path / f"home-{counter}"  # a cold, private npm (~/.npm) or uv (~/.cache/uv) cache
            home.mkdir()
            if pypi:  # no Python download (the interpreter is this machine's); the system CA store (a proxy's CA)
                (home / ".config" / "uv").mkdir(parents=True)
                (home / ".config" / "uv" / "uv.toml").write_text('python-downloads = "never"\nsystem-certs = true\n')
            # The server's HOME is private in the sandbox (#23): the uv.toml above is the download
            # phase's; the sandboxed uvx takes the system certificates from the environment.
            host_env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "UV_SYSTEM_CERTS": "true"}
            settings = Settings(
                home=root.path / f"data-{counter}",
                registries="local",
                catalog_dir=catalog,
                consent="never-ask",
                prefetch_packages=kind == "prefetch",
                probe_timeout_seconds=120,
            )
            rt = build_runtime(settings, keyring_backend=keyring.backends.fail.Keyring(), host_env=host_env)
            try:
                opened = await rt.service.call(
                    "mcp_setup_request_secret",
                    {"key_name": "EVERYTHING_TOKEN", "prompt": "Your token", "server": name},
                    CallContext(),
                )
                t_open = time.perf_counter()
                if kind == "prefetch":

                    async def watch() -> None:
                        await rt.service.prefetches_settled()
                        prefetch_s.append(time.perf_counter() - t_open)

                    watcher = asyncio.create_task(watch())
                await asyncio.sleep(args.typing)  # the user types the secret
                rt.broker.answer(opened["prompt_id"], "a-token-the-server-ignores")
                t0 = time.perf_counter()
                res = await rt.service.call(
                    "mcp_setup_test_connection",
                    {"qualified_name": name, "env_refs": {"EVERYTHING_TOKEN": opened["ref"]}},
                    CallContext(),
                )
                elapsed = time.perf_counter() - t0
                assert res.get("ok") is True, res
                if kind == "prefetch":
                    await watcher
                return elapsed
            finally:
                await rt.aclose()
                shutil.rmtree(home, ignore_errors=True)

        kinds = list(t)
        for i in range(args.rounds):
            for kind in kinds[i % 2 :] + kinds[: i % 2]:
                t[kind].append(await round_(kind))
        out["times"] = {k: summary(v) for k, v in t.items()}
        out["prefetch_done_s"] = summary(prefetch_s)
        out["ratio"] = median(t["prefetch"]) / median(t["none"])
        out["per_round_ratio"] = median(p / n for p, n in zip(t["prefetch"], t["none"]))
        out["loadavg_end"] = list(os.getloadavg())
    finally:
        out["leftover_processes"] = len(root.cleanup())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ecosystem", choices=["npm", "pypi"], default="npm")
    parser.add_argument("--version", default=None, help="of the package (default: 2026.8.31 npm, 2026.10.19 pypi)")
    parser.add_argument("--typing", type=float, default=TYPING_SECONDS)
    emit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
