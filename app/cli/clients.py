"""Clients get the tools, never a plaintext key: ``client connect|disconnect``, ``run``, ``import``.

* ``client list`` shows the clients found here, which are connected, the gateway's ``/mcp``
  address and the tools as a client names them (the page shows the same, app/clients).
* ``client connect CLIENT`` adds one entry ``mcp-setup`` that runs ``mcp-setup mcp`` (the
  gateway); ``--per-server`` instead adds one entry per installed server (its slug) running
  ``mcp-setup run SLUG``. ``disconnect`` removes what ``connect`` wrote. ``--dry-run`` prints
  the diff. Files are merged by :mod:`app.clients` (backup, idempotent, malformed
  files untouched).
* ``run NAME`` execs one installed stdio server with its settings decrypted into the child's
  environment only (the ``op run`` pattern): no config file, argv or log holds a value.
* ``import CLIENT`` moves literal secret-looking ``env`` values of the client's entries into
  the vault (a hidden confirmation per key), installs each such entry under its name with its
  command, tests it, and rewrites the entry to ``mcp-setup run NAME`` (backup kept).

Exit codes: 0 done (or nothing to do), 1 failed or a file could not be merged, 2 usage,
3 no installed server has that NAME.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.clients import (
    CLIENTS,
    GATEWAY_ENTRY,
    ClientConfig,
    ConfigError,
    client_config,
    client_rows,
    connect_over_http,
    launcher_command,
    launcher_env,
    plan_connect,
    updated_words,
)
from setup_agent.errors import SetupError

if TYPE_CHECKING:  # pydantic loads when a command runs, not when the parser is built
    from app.settings import Settings
    from setup_agent.launch import Fetcher, LaunchSpec

__all__ = [
    "GATEWAY_ENTRY",
    "add_client_parsers",
    "launcher_command",
    "run_client_command",
]  # the first and third: app/clients


def add_client_parsers(sub: Any) -> None:
    client = sub.add_parser(
        "client",
        help="put mcp-setup into an MCP client's config (claude-desktop, cursor, vscode, …)",
        description="Add (or remove) the entry that gives CLIENT every installed server's tools through "
        "`mcp-setup mcp`. Other entries stay as they are; the old file is kept as <file>.bak-<time>. "
        "Clients: " + ", ".join(CLIENTS) + ".",
    )
    actions = client.add_subparsers(dest="client_command", metavar="ACTION", required=True)
    p = actions.add_parser("list", help="the clients on this computer, whether each is connected, the tools' names")
    p.add_argument("--json", action="store_true", help="print JSON")
    for verb in ("connect", "disconnect"):
        p = actions.add_parser(verb, help=f"{verb} CLIENT")
        p.add_argument("client", choices=list(CLIENTS))
        p.add_argument("--dry-run", action="store_true", help="print the change as a diff; write nothing")
        p.add_argument("--per-server", action="store_true", help="one entry per installed server (mcp-setup run)")
        if verb == "connect":
            p.add_argument(
                "--http",
                action="store_true",
                help="reach `mcp-setup serve`'s /mcp over HTTP with a new client token of this client's own "
                "(revocable: mcp-setup token revoke CLIENT); default: the client starts `mcp-setup mcp`",
            )
        p.add_argument(
            "--config", type=Path, default=None, metavar="FILE", help="the config file (default: the client's)"
        )
    run = sub.add_parser(
        "run",
        help="start one installed stdio server with its secrets in its environment only",
        description="For clients that want one entry per server: replaces itself with the server's process, "
        "settings decrypted into that process's environment (never argv, never a file).",
    )
    run.add_argument("name", help="server id, qualified name or slug")
    imp = sub.add_parser(
        "import",
        help="move plain-text keys out of a client's config into mcp-setup",
        description="For each entry of CLIENT's config with literal secret-looking env values: confirm each key "
        "(y/n), store it encrypted, test the server and install it under the same name; then the client reaches "
        "it through the mcp-setup gateway entry and its old entry goes (--per-server: the entry runs `mcp-setup run "
        "NAME` instead), so each tool has one name. The old file is kept as a backup.",
    )
    imp.add_argument("client", choices=list(CLIENTS))
    imp.add_argument(
        "--config", type=Path, default=None, metavar="FILE", help="the config file (default: the client's)"
    )
    imp.add_argument("--yes", action="store_true", help="move every secret-looking value without asking")
    imp.add_argument(
        "--per-server",
        action="store_true",
        help="one `mcp-setup run NAME` entry per imported server, no gateway entry (default: the gateway's)",
    )


def _config(args: argparse.Namespace) -> ClientConfig:
    if args.config is not None:
        return ClientConfig(args.client, args.config)
    return client_config(args.client, Path.home())


def _connect(settings: Settings, args: argparse.Namespace) -> int:
    from .servers import _store

    config = _config(args)
    launcher, env = launcher_command(), launcher_env(settings)
    slugs = None
    if args.per_server and args.client_command != "disconnect":
        with _store(settings) as store:
            slugs = [
                s.slug for s in store.servers.list() if s.enabled and s.launch_spec.get("transport", "stdio") == "stdio"
            ]
    if getattr(args, "http", False):
        return _connect_http(settings, args, config, launcher)
    plan = plan_connect(config, launcher, env, disconnect=args.client_command == "disconnect", per_server=slugs)
    if plan.edit is None:  # the file is left as it is (malformed); the person gets the entry to paste
        print(f"mcp-setup: {plan.error}", file=sys.stderr)
        print(plan.paste_where, file=sys.stderr)
        print(plan.snippet)
        return 1
    edit = plan.edit
    if not edit.changed:
        print(f"{config.path}: already up to date; nothing written.")
        return 0
    if args.client_command != "disconnect":
        _warn_long_names(settings, args)
    if args.dry_run:
        print(edit.diff(), end="")
        return 0
    backup = edit.write()
    print(updated_words(config.path, backup) + ". Restart the client.")
    return 0


def _serve_url(settings: Settings) -> tuple[str, str | None]:
    """The ``/mcp`` address of the serve on this data folder (the running one's, else the
    configured port's) and a note for the person when it is not running."""
    from urllib.parse import urlsplit

    from app.web import running_serve

    running = running_serve(Path(settings.home).expanduser())
    if running is not None and running.url:
        parts = urlsplit(running.url)
        return f"{parts.scheme}://{parts.netloc}/mcp", None
    return (
        f"http://127.0.0.1:{settings.port}/mcp",
        f"Start `mcp-setup serve` (port {settings.port}) for the client to reach it.",
    )


def _connect_http(settings: Settings, args: argparse.Namespace, config: ClientConfig, launcher: list[str]) -> int:
    """``client connect CLIENT --http`` (app.clients.connect_over_http, as the page's Connect)."""
    from .servers import _store

    url, note = _serve_url(settings)
    with _store(settings) as store:
        plan, backup = connect_over_http(config, launcher, url, store.tokens, apply=not args.dry_run)
    if plan.edit is None:  # malformed: nothing is made; the entry to paste names the token to make
        print(f"mcp-setup: {plan.error}", file=sys.stderr)
        print(plan.paste_where, file=sys.stderr)
        print(plan.snippet)
        print(f"(make its token with `mcp-setup token create {config.client} --client`)", file=sys.stderr)
        return 1
    if args.dry_run:
        print(plan.edit.diff(), end="")
        return 0
    print(
        updated_words(config.path, backup)
        + f": {config.client} reaches {url} with a client token of its own (it cannot approve anything; "
        f"`mcp-setup token revoke {config.client}` ends it). Restart the client."
    )
    if note:
        print(note)
    return 0


def _list_clients(settings: Settings, args: argparse.Namespace) -> int:
    """``client list``: the clients found here, connected or not, and how an HTTP client connects."""
    from .readonly import left_out, reader

    launcher, env = launcher_command(), launcher_env(settings)
    rows = client_rows(Path.home(), launcher, env)
    with reader(settings) as store:
        out = left_out(store)  # what the person left out, a client never gets
        tools = [t.name for t in store.servers.catalog().tools() if t.tool_name not in out.get(t.server.server_id, ())]
    if args.json:
        print(json.dumps({"clients": rows, "http": _http_hint(settings), "tools": tools}, indent=2))
        return 0
    for r in rows:
        state = (
            ("connected" if r["up_to_date"] else "connected (an older entry)") if r["connected"] else "not connected"
        )
        state = f"cannot read its file: {r['problem']}" if r["problem"] else state
        if r["found"] or r["connected"]:
            print(f"{r['client']:<15} {state:<14} {r['path']}")
    missing = [r["client"] for r in rows if not (r["found"] or r["connected"])]
    if missing:
        print(f"Not found on this computer: {', '.join(missing)}.")
    print("Connect one: mcp-setup client connect CLIENT (--dry-run shows the change first).")
    print(_http_hint(settings)["text"])
    if tools:
        print(f"Its tools, as a client names them ({len(tools)}): " + ", ".join(tools))
    return 0


def _http_hint(settings: Settings) -> dict[str, str]:
    url = f"http://127.0.0.1:{settings.port}/mcp"
    text = (
        f"HTTP clients: {url} while `mcp-setup serve` runs: `mcp-setup client connect CLIENT --http` writes it "
        "with a client token of that client's own (for another client: `mcp-setup token create NAME --client`, "
        "sent as 'Authorization: Bearer TOKEN'). The key in the page link opens only your page."
    )
    return {"url": url, "text": text}


def _warn_long_names(settings: Settings, args: argparse.Namespace) -> None:
    """Say which installed tools the client would refuse for the length of its own name for them."""
    from setup_agent.store import names_too_long

    from .servers import _store

    with _store(settings) as store:
        long = names_too_long(store.servers.catalog(), args.client, None if args.per_server else GATEWAY_ENTRY)
    if long:
        shown = ", ".join(long[:5]) + (f" and {len(long) - 5} more" if len(long) > 5 else "")
        print(f"mcp-setup: warning: {args.client} refuses tool names this long: {shown}.", file=sys.stderr)


def _run(settings: Settings, args: argparse.Namespace) -> int:
    from .servers import _resolve, _store

    home = Path(settings.home).expanduser()
    with _store(settings) as store:
        server = _resolve(store, args.name)
        values = store.values.env_values(server.server_id)  # masked: the launch reveals them as it starts the server
    if not server.enabled:
        print(f"mcp-setup: {server.qualified_name} is disabled (`mcp-setup enable {server.slug}`).", file=sys.stderr)
        return 1
    from app.runtime import make_direct_starts, make_fetcher, make_sandbox
    from setup_agent.launch import LaunchSpec, NetRecord, ProcessLedger, local_command, materialize, refused_words

    spec = LaunchSpec.model_validate(server.launch_spec)
    if spec.transport != "stdio" or not spec.command:
        print(
            f"mcp-setup: {server.qualified_name} is a remote server; use the gateway (`mcp-setup mcp`).",
            file=sys.stderr,
        )
        return 1
    direct = make_direct_starts(settings)
    # Nothing noted here of what its runner installed (another machine installed it, or the entry
    # was pruned since): downloaded first, as the gateway's start does, rather than by the runner
    # at the start, which would run outside the download's sandbox and without the registry's
    # login (only the download is given it): a private registry would refuse it.
    fetcher = make_fetcher(
        settings, os.environ, make_sandbox(settings, os.environ), direct, ProcessLedger(home / "procs")
    )
    if not fetcher.start_ready(spec):
        import asyncio  # only here: the read-only commands built with this parser never load it

        asyncio.run(_downloaded(fetcher, spec))
    install_dir = home / "servers" / server.server_id
    install_dir.mkdir(parents=True, exist_ok=True)
    resolved = materialize(
        spec, values, dirname=str(install_dir / "bundle") if spec.needs_install_dir else None, cwd=str(install_dir)
    )
    # The same launch as the gateway's start (docs/sandbox.md): bwrap or the Landlock launcher.
    # Its proxy, when it has one, runs in this process: a refusal is said on stderr (stdout is the client's).
    record = NetRecord(
        on_refused=lambda attempt: print(f"mcp-setup: {refused_words(attempt, server.slug)}", file=sys.stderr)
    )
    command = local_command(
        resolved,
        sandbox=make_sandbox(settings, os.environ),
        host_env=os.environ,
        record=record,
        direct=direct,  # the program the runner installed, as the gateway starts it
    )
    sys.stdout.flush()
    return command.become()


async def _downloaded(fetcher: Fetcher, spec: LaunchSpec) -> None:
    """``spec``'s download phase before ``run`` starts it: a failure its runner named (a registry
    that needs a login, no network…) is said and nothing starts; one it did not name lets the
    start say what is wrong."""
    from setup_agent.errors import DownloadTimeout

    try:
        state = await fetcher.fetch(spec)
    except TimeoutError:
        raise DownloadTimeout(
            f"Downloading the package took longer than {fetcher.timeout:g} seconds "
            "(MCP_SETUP_DOWNLOAD_TIMEOUT_SECONDS). Try again: what arrived stays in the cache."
        ) from None
    finally:
        await fetcher.aclose()
    if state is not None and (error := state.error()) is not None:
        raise error


def run_client_command(settings: Settings, args: argparse.Namespace, handler: Any) -> int:
    from .servers import EXIT_NOT_FOUND, _NotFound

    try:
        if args.command == "client":
            return (_list_clients if args.client_command == "list" else _connect)(settings, args)
        if args.command == "run":
            return _run(settings, args)
        from .client_import import run_import

        return run_import(settings, args, handler, _config(args), launcher_command(), launcher_env(settings))
    except ConfigError as exc:
        print(f"mcp-setup: {exc}", file=sys.stderr)
        return 1
    except _NotFound as exc:
        print(f"mcp-setup: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except SetupError as exc:
        print(f"mcp-setup: {exc.message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"mcp-setup: {exc.strerror or exc}: {exc.filename or ''}", file=sys.stderr)
        return 1
