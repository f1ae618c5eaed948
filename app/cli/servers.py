"""A person's commands for installed servers: ``list``, ``show``, ``enable``, ``disable``,
``remove``, ``logs``, ``search``, ``doctor``, ``add``, ``rotate``, ``update`` (app/cli/update.py).

NAME is a server id, a qualified name or a gateway slug (:meth:`Catalog.server`). Every
command works on the data dir the running faces use; they see each change within about a
second (the store's change counter), so a disabled or removed server leaves their tool
lists and stops there.

Exit codes (docs/troubleshooting.md): 0 done; 1 failed (an error, a failed test, ``doctor``
found a problem); 2 usage; 3 no installed server has that NAME; 130 cancelled.
Errors are one line on stderr, never a traceback. ``--json`` prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.clients import installed_by_words
from setup_agent.errors import SetupError
from setup_agent.gateway import log_path, read_log

from .network import network_lines, network_step_line, sampling_line
from .readonly import EXIT_NOT_FOUND, left_out, reader, translated
from .readonly import NotFound as _NotFound
from .readonly import open_store as _store
from .readonly import resolve as _resolve
from .server_view import STATE_WORDS, idle_words, server_json, state_notes
from .server_view import state as server_state

if TYPE_CHECKING:  # the store (SQLAlchemy) loads when a command runs, not when `mcp-setup mcp` parses
    from app.settings import Settings
    from setup_agent.store import InstalledServer, Store

__all__ = [
    "EXIT_NOT_FOUND",
    "add_server_parsers",
    "run_server_command",
    "server_json",
]  # server_json: from app/cli/server_view.py

RUNTIMES = ("node", "npx", "uv", "uvx", "docker", "dnx", "python3")
COMMANDS = ("list", "show", "enable", "disable", "remove", "logs", "search", "doctor", "add", "rotate", "update")


def add_server_parsers(sub: Any) -> None:
    p = sub.add_parser("list", help="list the installed servers", description="The installed servers, oldest first.")
    p.add_argument("--json", action="store_true", help="print JSON")
    p = sub.add_parser("show", help="one installed server: launch command, settings (names only), tools")
    p.add_argument("name", nargs="?", help="server id, qualified name or slug (none: the list of installed servers)")
    p.add_argument("--json", action="store_true", help="print JSON")
    for verb, text in (
        ("enable", "start it again in every running mcp-setup session"),
        ("disable", "stop it; keep its settings"),
    ):
        p = sub.add_parser(verb, help=f"{verb} an installed server ({text})")
        p.add_argument("name", help="server id, qualified name or slug")
        p.add_argument("--tool", action="append", default=[], metavar="TOOL", help=f"{verb} only this tool of it")
        if verb == "enable":
            idle = p.add_mutually_exclusive_group()
            idle.add_argument(
                "--keep-running",
                dest="keep_running",
                action="store_const",
                const=True,
                help="never stop it when it is idle (it keeps its memory; calls never wait for a start)",
            )
            idle.add_argument(
                "--stop-when-idle",
                dest="keep_running",
                action="store_const",
                const=False,
                help="stop it after MCP_SETUP_IDLE_STOP_SECONDS unused, as by default; it starts on its next call",
            )
    p = sub.add_parser("remove", help="remove an installed server, its stored settings and sign-in")
    p.add_argument("name", help="server id, qualified name or slug")
    p = sub.add_parser("logs", help="the server's recent stderr (redacted)")
    p.add_argument("name", nargs="?", help="server id, qualified name or slug (none: the list of installed servers)")
    p.add_argument("--lines", "-n", type=int, default=50, help="how many lines (default 50)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines (Ctrl-C stops)")
    p = sub.add_parser("search", help="search the registries")
    p.add_argument("query", nargs="+", help="words to look for")
    p.add_argument("--json", action="store_true", help="print JSON")
    p = sub.add_parser("doctor", help="check runtimes, data dir, key, registries and installed servers")
    p.add_argument("--json", action="store_true", help="print JSON")
    p = sub.add_parser(
        "add",
        help="set up NAME here, secrets at hidden prompts (no model needed)",
        description="Run the guided setup flow for NAME in this terminal: search, settings, hidden prompts for "
        "secrets, test, install. Exit code: 0 installed, 1 failed (also: the input ended before a question was "
        "answered), 3 no server matches NAME, 130 cancelled (Ctrl-C).",
    )
    p.add_argument("name", help="a qualified name or words to search for")
    p.add_argument("--yes", "-y", action="store_true", help="approve the consent shown (printed in full; for scripts)")
    p.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="KEY=-|KEY=@FILE",
        help="KEY's secret from stdin (-) or a file (@FILE), never from the command line",
    )
    p = sub.add_parser(
        "rotate",
        help="replace one stored secret: hidden prompt, test, then swap",
        description="Ask for KEY's new value at a hidden prompt, test the server with it, and store it only if "
        "the server answers; otherwise the old value stays. Wherever the server runs (a serve, an AI client's mcp-setup), it restarts with it.",
    )
    p.add_argument("name", help="server id, qualified name or slug")
    p.add_argument("key", help="the setting's name, e.g. NOTION_API_KEY")
    p = sub.add_parser(
        "update",
        help="install the registry's newer version if it answers with the stored settings",
        description="Test the registry's current version with the stored settings; swap only if it answers, "
        "otherwise the installed version stays. Exit code 0 updated or already current, 1 kept the old one.",
    )
    p.add_argument("name", help="server id, qualified name or slug")
    p.add_argument(
        "--version",
        default=None,
        help="install exactly this version from the server's registry (exit 1 if it has none)",
    )
    for p in sub.choices.values():
        if p.prog.split()[-1] in COMMANDS and not any(a.dest == "verbose" for a in p._actions):
            p.add_argument("--verbose", "-v", action="store_true", help="debug logging on stderr")


def _sentence(text: str) -> str:
    """``text`` ending as a sentence does (so the next one does not run into it)."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True))


# --- commands on the store alone ----------------------------------------------------------


def _list(settings: Settings, args: argparse.Namespace) -> int:
    with reader(settings) as store:
        servers, out = store.servers.list(), left_out(store)  # out: the tools the user left out
    if args.json:
        _print_json({"servers": [server_json(s, out.get(s.server_id, frozenset())) for s in servers]})
        return 0
    if not servers:
        print("No servers installed yet. `mcp-setup add NAME` or `mcp-setup search WORDS` to find one.")
        return 0
    notes = []
    for s in servers:
        words = STATE_WORDS[server_state(s)]
        kept = len([t for t in s.tools if t.get("name") not in out.get(s.server_id, ())])
        who = installed_by_words(s.installed_by)
        print(f"{s.slug:<24} {words:<13} {s.qualified_name} {s.version or ''} ({s.package_type}, {kept} tools; {who})")
        notes += [f"  {s.slug}: {note}" for note in state_notes(s, s.slug, out.get(s.server_id, frozenset()))]
    if notes:
        print()
        print("\n".join(notes))
    return 0


def _show(settings: Settings, args: argparse.Namespace) -> int:
    with reader(settings) as store:
        s = _resolve(store, args.name)
        out = left_out(store).get(s.server_id, frozenset())  # left out by the user
    spec = s.launch_spec  # templates like ${KEY}, never values
    sandbox = _sandbox_words(settings, spec)  # what the consent said it can see
    network = network_lines(settings, spec)  # its policy, how it is held, what its test reached
    if args.json:
        _print_json(
            {
                **server_json(s, out),
                "launch": spec,
                "sandbox": sandbox,
                "network": network,
                "when_idle": idle_words(bool(spec.get("keep_running")), settings.idle_stop_seconds),
                "tools": [t for t in s.tools if t.get("name") not in out],
            }
        )
        return 0
    print(f"{s.title or s.qualified_name}\n  name: {s.qualified_name}\n  id: {s.server_id}\n  slug: {s.slug}")
    print(f"  {STATE_WORDS[server_state(s)]}; version {s.version or '?'} ({s.package_type}, from {s.source})")
    for note in state_notes(s, s.slug, out):
        print(f"  {note[0].upper()}{note[1:]}")
    who = installed_by_words(s.installed_by)
    print(f"  {who[0].upper()}{who[1:]} on {s.installed_at:%Y-%m-%d %H:%M}Z")
    if spec.get("command"):
        print("  runs: " + " ".join([str(spec["command"]), *map(str, spec.get("args") or [])]))
    if spec.get("url"):
        print(f"  url: {spec['url']}")
    for k in s.env_keys:
        print(f"  setting {k.key}{' (secret, stored encrypted)' if k.secret else ''}")
    for line in sandbox:
        print(f"  sandbox: {line}")
    for line in network:
        print(f"  network: {line}")
    if step := network_step_line(s):  # "only these", or the public internet again: one command away
        print(f"  network: {step}")
    print(f"  when idle: {idle_words(bool(spec.get('keep_running')), settings.idle_stop_seconds)}")
    print(f"  {sampling_line(s)}")
    for t in s.tools:
        print(
            f"  tool {t.get('name')}{' (left out by you)' * (t.get('name') in out)}: {str(t.get('description') or '').strip()[:100]}"
        )
    return 0


def _sandbox_words(settings: Settings, spec: dict[str, Any]) -> list[str]:
    """The profile in the consent's words, with the mechanism this machine runs now (found as
    app.runtime's make_sandbox finds it, without loading the runtime: `show` is read-only)."""
    from setup_agent.launch import LaunchSpec, Sandbox
    from setup_agent.setup import sandbox_profile

    mechanism = Sandbox(
        settings.sandbox, hide=(Path(settings.home).expanduser(),), user_home=Path.home(), host_env=dict(os.environ)
    ).mechanism
    return sandbox_profile(LaunchSpec.model_validate(spec), mechanism, str(Path.home()))


def _set_enabled(settings: Settings, args: argparse.Namespace) -> int:
    enabled = args.command == "enable"
    if args.tool:
        from .tool_choice import set_tools_shown

        return set_tools_shown(settings, args.name, args.tool, shown=enabled)
    keep_running = getattr(args, "keep_running", None)
    with _store(settings) as store:
        s = _resolve(store, args.name)
        store.servers.set_enabled(s.server_id, enabled, actor="cli")
        if keep_running is not None:
            store.servers.set_keep_running(s.server_id, keep_running, actor="cli")
    print(
        f"{s.qualified_name} is {'enabled' if enabled else 'disabled'}; running mcp-setup sessions (your AI clients, the web page) see it at once."
    )
    if keep_running is not None:
        words = idle_words(keep_running, settings.idle_stop_seconds)
        print(f"{s.slug}: {words}.")
    return 0


def _logs(settings: Settings, args: argparse.Namespace) -> int:
    with reader(settings) as store:
        s = _resolve(store, args.name)
    logs_dir = Path(settings.home).expanduser() / "logs"
    lines = read_log(logs_dir, s.server_id, max(args.lines, 0))
    if not lines and not args.follow:
        print(f"No output recorded for {s.qualified_name} yet ({log_path(logs_dir, s.server_id)}).", file=sys.stderr)
    for line in lines:
        print(line)
    if args.follow:
        _follow(log_path(logs_dir, s.server_id))
    return 0


def _follow(path: Path) -> None:
    """Print what is appended to ``path`` (a rolled file is reopened) until Ctrl-C."""
    pos = path.stat().st_size if path.exists() else 0
    while True:
        sys.stdout.flush()
        time.sleep(0.5)
        size = path.stat().st_size if path.exists() else 0
        if size < pos:
            pos = 0  # rolled over
        if size > pos:
            with path.open("rb") as f:
                f.seek(pos)
                sys.stdout.write(f.read().decode("utf-8", "replace"))
            pos = size


# --- commands that need the core's runtime ------------------------------------------------


def _with_runtime(settings: Settings, handler: logging.Handler, body: Callable[[Any], Any]) -> Any:
    import asyncio

    from app.runtime import build_runtime
    from setup_agent.secrets import install_log_redaction

    async def go() -> Any:
        runtime = build_runtime(settings)
        install_log_redaction(runtime.redactor, handler)
        try:
            return await body(runtime)
        finally:
            await runtime.aclose()

    with translated(settings):
        return asyncio.run(go())


def _remove(settings: Settings, args: argparse.Namespace, handler: logging.Handler) -> int:
    with _store(settings) as store:
        s = _resolve(store, args.name)

    async def body(runtime: Any) -> dict:
        from setup_agent.setup import CallContext, RemoveRequest

        request = RemoveRequest.parse({"server_id": s.server_id})
        return await runtime.service.remove(request, CallContext(installed_by="cli"))

    result = _with_runtime(settings, handler, body)
    log = log_path(Path(settings.home).expanduser() / "logs", s.server_id)
    for p in (log, log.with_name(log.name + ".1")):
        p.unlink(missing_ok=True)
    signed_out = " and signed out" if result.get("signed_out") else ""
    print(f"Removed {s.qualified_name}{signed_out}; its stored settings are deleted.")
    return 0


def _search(settings: Settings, args: argparse.Namespace, handler: logging.Handler) -> int:
    query = " ".join(args.query)

    async def body(runtime: Any) -> dict:
        from setup_agent.setup import SearchRequest

        return await runtime.service.search(SearchRequest.parse({"query": query, "page_size": 20}), None)

    result = _with_runtime(settings, handler, body)
    if args.json:
        _print_json(result)
        return 0
    with _store(settings) as store:
        installed = {s.qualified_name: s.slug for s in store.servers.list()}
    meant = " or ".join(f'"{reading}"' for reading in result.get("did_you_mean", []))
    if meant and result["servers"]:
        print(f"Did you mean {meant}?")
    for item in result["servers"]:
        name = item["qualified_name"]
        mark = f"  [installed as {installed[name]}]" if name in installed else ""
        title = item.get("title")
        about = f"{title}: " if title and title != name else ""
        print(f"{name}  ({item.get('source')}){mark}\n    {about}{str(item.get('description') or '')[:120]}")
    failed = [e for e in result.get("errors", []) if not str(e.get("message", "")).startswith("skipped")]
    for err in result.get("errors", []):
        if err in failed:
            print(f"registry {err.get('source')} could not be searched: {err.get('message')}", file=sys.stderr)
        else:  # not configured (Smithery without a key): said once, as what it is
            print(f"registry {err.get('source')}: {err.get('message')}", file=sys.stderr)
    if not result["servers"]:
        why = " Some registries could not be reached (above)." if failed else "" if meant else " Try other words."
        again = f" Did you mean {meant}? `mcp-setup search {result['did_you_mean'][0]}`" if meant else ""
        print("Nothing found." + why + again)
        if "local" in settings.registry_names:
            print(f"The local catalog is {settings.catalog_path}: add a server.json there (docs/tool-registry.md).")
    return 0


def _doctor(settings: Settings, args: argparse.Namespace, handler: logging.Handler) -> int:
    from setup_agent.launch import runner_source  # the system's runner, or the one bundled

    from .data_dir import problems as data_dir_problems
    from .doctor import run_checks, unusable_checks

    found: list[SetupError] = list(data_dir_problems(settings))
    if not found:
        try:
            checks = _with_runtime(settings, handler, lambda runtime: run_checks(runtime, which=runner_source))
        except SetupError as exc:  # the runtime cannot start (a team's key, config.toml): said as a check
            found = [exc]
    if found:
        checks = unusable_checks(found, which=runner_source)
    problems = [c for c in checks if not c["ok"]]
    if args.json:
        _print_json(
            {"ok": not problems, "checks": checks, **({"not_checked": ["registries", "servers"]} if found else {})}
        )
    else:
        for c in checks:
            print(
                f"{'ok ' if c['ok'] else 'BAD'} {c['name']}: {c['detail']}"
                + ("" if c["ok"] else f"\n    fix: {c['fix']}")
            )
        if found:
            print("The registries and the installed servers are checked once these are fixed.")
        print("Everything looks fine." if not problems else f"{len(problems)} problem(s) found.")
    return 1 if problems else 0


def _installed_as(store: Store, name: str) -> InstalledServer | None:
    """The installed server ``name`` (as typed to ``add``) means: its id, qualified name or slug,
    or, ignoring case, its slug or the last part of its qualified name when only one has it."""
    found = store.servers.catalog().server(name)
    if found is not None:
        return store.servers.get(found.server_id)
    low = name.strip().lower()
    hits = [s for s in store.servers.list() if low in (s.slug.lower(), s.qualified_name.rsplit("/", 1)[-1].lower())]
    return hits[0] if len(hits) == 1 else None


def already_installed_message(s: InstalledServer, typed: str) -> str:
    """What to do instead of adding an installed server again, as commands of this terminal."""
    text = (
        f'{s.qualified_name} is already installed as "{s.slug}". To reinstall: mcp-setup remove {s.slug}, '
        f"then mcp-setup add {typed}."
    )
    secrets = [k.key for k in s.env_keys if k.secret]
    if len(secrets) == 1:
        text += f" To change its key: mcp-setup rotate {s.slug} {secrets[0]}."
    elif secrets:
        text += f" To change a key: mcp-setup rotate {s.slug} KEY (one of {', '.join(secrets)})."
    return text


def _add(settings: Settings, args: argparse.Namespace, handler: logging.Handler) -> int:
    from .presets import SecretArgError, read_secret_args
    from .terminal import run_agent

    try:
        secrets = read_secret_args(args.secret, sys.stdin)
    except SecretArgError as exc:
        print(f"mcp-setup: {exc}", file=sys.stderr)
        return 2
    with _store(settings) as store:  # before asking anything
        existing = _installed_as(store, args.name)
    if existing is not None:
        print(already_installed_message(existing, args.name), file=sys.stderr)
        return 1
    import asyncio

    # the person typed the command: the install is theirs (as remove/disable say `by cli`)
    return asyncio.run(
        run_agent(
            settings,
            handler,
            f"set up {args.name}",
            driver="guided",
            installed_by="cli",
            assume_yes=args.yes,
            secrets=secrets,
            retry=shlex.join(
                ["mcp-setup", "add", args.name, *(["--yes"] if args.yes else [])]
                + [part for given in args.secret or () for part in ("--secret", given)]
            ),
        )
    )


def _rotate(settings: Settings, args: argparse.Namespace, handler: logging.Handler) -> int:
    from .rotate import rotate

    with _store(settings) as store:
        s = _resolve(store, args.name)
    if args.key not in {k.key for k in s.env_keys}:
        print(
            f"mcp-setup: {s.qualified_name} has no setting {args.key!r} (`mcp-setup show {s.slug}`).", file=sys.stderr
        )
        return 1
    import getpass

    value = getpass.getpass(f"New value of {args.key} (hidden): ")
    if not value:
        print("mcp-setup: no value typed; nothing changed.", file=sys.stderr)
        return 1
    try:
        message = _with_runtime(settings, handler, lambda runtime: rotate(runtime, s, args.key, value))
    except SetupError as exc:
        print(f"mcp-setup: {_sentence(exc.message)} The old value of {args.key} stays.", file=sys.stderr)
        return 1
    print(message)
    return 0


def _update(settings: Settings, args: argparse.Namespace, handler: logging.Handler) -> int:
    from .update import update

    with _store(settings) as store:
        s = _resolve(store, args.name)
    code, message = _with_runtime(settings, handler, lambda runtime: update(runtime, s, args.version))
    print(message, file=sys.stdout if code == 0 else sys.stderr)
    return code


_STORE_ONLY = {"list": _list, "show": _show, "enable": _set_enabled, "disable": _set_enabled, "logs": _logs}
_RUNTIME = {"remove": _remove, "search": _search, "doctor": _doctor, "add": _add, "rotate": _rotate, "update": _update}


def run_server_command(settings: Settings, args: argparse.Namespace, handler: logging.Handler) -> int:
    try:
        if args.command in ("show", "logs") and not args.name:  # which one? the list says
            print(f"Which server? `mcp-setup {args.command} NAME`, NAME from this list:", file=sys.stderr)
            args.json = False
            _list(settings, args)
            return 2
        if args.command in _STORE_ONLY:
            return _STORE_ONLY[args.command](settings, args)
        return _RUNTIME[args.command](settings, args, handler)
    except _NotFound as exc:
        print(f"mcp-setup: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except SetupError as exc:
        print(f"mcp-setup: {exc.message}", file=sys.stderr)
        return 1
