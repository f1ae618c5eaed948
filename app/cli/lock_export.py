"""``mcp-setup export [--to FILE]``: the installed servers as a lock file, and the
parsers of ``export`` and ``apply`` (app/cli/lock_apply.py).

The file (setup_agent/setup/lock_file.py) names each server's registry, exact version,
artifact digest, launch templates, sandbox, approved tools and pinned hash, its secret slots
(names only) and its non-secret settings. Secret values are never read into it: a stored
setting that is secret becomes a name. Settings stored twice under two names (a key and its
alias, which the install stores both) are written once, under the name the launch uses.

Written to stdout, or with ``--to FILE`` to that file (a new file gets mode 0644: it holds no
secret; an existing one keeps its mode). Exit codes: 0 written, 1 failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from setup_agent.errors import SetupError

if TYPE_CHECKING:
    from app.settings import Settings
    from setup_agent.setup import LockedServer
    from setup_agent.store import InstalledServer, Store

__all__ = ["add_lock_parsers", "entry_for", "run_export"]

EXPORT_HELP = """\
Write every installed server as a lock file: registry and name, exact version, the artifact's
digest (npm integrity, PyPI sha256, OCI digest, MCPB sha256), the launch command with ${KEY}
templates, the sandbox, the approved tools and their pinned hash, the secret settings' NAMES
(never their values) and the other settings' values; a server imported from a client's config
as its launch command and where it came from. `mcp-setup apply FILE` installs the same servers
on another machine, asking only for the secrets.

Exit code: 0 written, 1 failed.
"""

APPLY_HELP = """\
Install the servers a lock file (from `mcp-setup export`) lists, exactly as it says:

  1. each server is looked up in the registry the file names, at the file's exact version;
     an artifact whose digest differs from the file's is refused (nothing of it runs);
  2. you approve the whole file once, in this terminal (what runs, the sandbox, the tools);
  3. each secret setting is asked for at a hidden prompt (the file holds names only);
  4. each server is test-connected; a tool list that differs from the file's is refused and
     that server is not installed (nothing half-installed: each install is one transaction).

A server from no registry (imported from a client's config, or written by hand) is in the
file as its launch command ("registry": null, "source": "import:claude-desktop"): step 1 has
nothing to look up, and step 4 tests that command. An entry that cannot be used or installed is
reported with why; the others are installed all the same.

Servers already installed identically are reported and left alone; one installed here
differently is refused (remove it first). MCP_SETUP_CONSENT=never-ask skips step 2 (CI).

Exit codes: 0 every server installed or already there, 1 failed (a difference, a bad file, a
test that failed), 3 FILE or a server or version not found, 130 cancelled or not approved.
"""


def add_lock_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "export",
        help="write the installed servers as a lock file (no secret values)",
        description=EXPORT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--to", type=Path, default=None, metavar="FILE", help="write to FILE (default: standard output)")
    p.add_argument("--verbose", "-v", action="store_true", help="debug logging on stderr")
    p = sub.add_parser(
        "apply",
        help="install the servers of a lock file here, exactly (asks only for secrets)",
        description=APPLY_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, metavar="FILE", help="a lock file written by `mcp-setup export`")
    p.add_argument("--verbose", "-v", action="store_true", help="debug logging on stderr")


@contextmanager
def open_store(settings: Settings):
    from app.data_key import open_vault
    from setup_agent.store import Store

    with Store.for_data_dir(Path(settings.home).expanduser(), open_vault(settings), settings.database_url) as store:
        yield store


def entry_for(store: Store, server: InstalledServer) -> LockedServer:
    """The lock entry of ``server``: its secret settings as names, its others' values."""
    from setup_agent.launch import LaunchSpec
    from setup_agent.oauth import GRANT_KEY
    from setup_agent.setup import locked_server

    values = store.values.env_values(server.server_id)
    keys = [k for k in server.env_keys if k.key != GRANT_KEY and k.key in values]
    templated = LaunchSpec.model_validate(server.launch_spec).keys()
    kept = [k for k in keys if k.key in templated]
    seen = [values[k.key].reveal() for k in kept]  # compared here only, never written when secret
    for k in keys:
        if k in kept:
            continue
        value = values[k.key].reveal()
        if value in seen:  # the same setting under its other name (an alias stored beside it)
            continue
        kept.append(k)
        seen.append(value)
    settings = {k.key: values[k.key].reveal() for k in kept if not k.secret}
    secrets = [k.key for k in kept if k.secret]
    offers = store.pins.offers().get(server.server_id)  # the tools the user left out
    return locked_server(
        server,
        settings,
        secrets,
        oauth=GRANT_KEY in values,
        left_out=sorted(offers.hidden_tools) if offers is not None else (),
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcp-setup")
    except PackageNotFoundError:
        return "unknown"


def _write(path: Path, text: str) -> None:
    """``text`` into ``path``: a new file 0644 (no secret in it), an existing one keeps its mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def run_export(settings: Settings, args: argparse.Namespace) -> int:
    from setup_agent.setup import lock_document

    try:
        with open_store(settings) as store:
            entries = [entry_for(store, s) for s in store.servers.list()]
    except SetupError as exc:
        print(f"mcp-setup: {exc.message}", file=sys.stderr)
        return 1
    at = datetime.now(UTC).replace(microsecond=0).isoformat()
    doc = lock_document(entries, exported_at=at, generator=f"mcp-setup {_version()}")
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if args.to is None:
        sys.stdout.write(text)
        return 0
    try:
        _write(args.to, text)
    except OSError as exc:
        print(f"mcp-setup: cannot write {args.to}: {exc.strerror or exc}.", file=sys.stderr)
        return 1
    secrets = sorted({f"{e.qualified_name} {k}" for e in entries for k in e.secrets})
    print(
        f"Wrote {len(entries)} server{'s' if len(entries) != 1 else ''} to {args.to} (no secret values in it).",
        file=sys.stderr,
    )
    if secrets:
        print(f"`mcp-setup apply {args.to}` will ask for: {', '.join(secrets)}.", file=sys.stderr)
    unrecorded = [e.qualified_name for e in entries if e.digest is None and e.package_type in ("npm", "pypi")]
    if unrecorded:
        print(
            f"No artifact digest was recorded for {', '.join(unrecorded)} (installed before mcp-setup recorded "
            "them): apply installs the file's exact version and says so.",
            file=sys.stderr,
        )
    return 0
