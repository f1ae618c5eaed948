"""``mcp-setup key …`` and ``mcp-setup token …``: running a team's gateway.

* ``key rotate`` — a new data key; every stored value re-encrypted in one transaction.
* ``key export --to FILE`` — the current data key into a new 0600 file, for another machine
  (then ``MCP_SETUP_DATA_KEY_FILE=FILE`` there).
* ``token create NAME [--admin]`` (printed once) / ``token list`` / ``token revoke NAME``. A token is a
  client's credential (a member): it calls tools and requests secrets, and never approves. One made
  with ``--admin`` may also approve launches and tool changes on the page, audited as ``token:NAME``.

Errors are one line on stderr, exit code 1; never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from setup_agent.errors import SetupError

if TYPE_CHECKING:  # the store (SQLAlchemy) loads only when a key/token command runs: every
    from app.settings import Settings

    # other command builds this parser, and `mcp-setup mcp` must not pay for it
    from setup_agent.secrets import Vault
    from setup_agent.store import Store

__all__ = ["add_key_parser", "add_token_parser", "rotate_data_key", "run_key", "run_token"]


def add_key_parser(sub: Any) -> None:
    key = sub.add_parser(
        "key",
        help="rotate or export the data key that encrypts stored settings",
        description="The data key encrypts every stored server setting. Machines sharing one database need "
        "the same key: export it here and name it there with MCP_SETUP_DATA_KEY_FILE.",
    )
    actions = key.add_subparsers(dest="key_command", metavar="ACTION", required=True)
    actions.add_parser(
        "rotate",
        help="re-encrypt every stored value under a new key (one transaction)",
        description="Make a new data key and re-encrypt every stored value with it, in one transaction: if "
        "anything fails, the stored values and the key stay as they were. Afterwards export the new key to the "
        "other machines and restart their instances.",
    )
    export = actions.add_parser("export", help="write the current key to a new file (mode 0600)")
    export.add_argument("--to", required=True, type=Path, metavar="FILE", help="a new file (never overwritten)")


def add_token_parser(sub: Any) -> None:
    token = sub.add_parser(
        "token",
        help="named bearer tokens for your HTTP AI clients and a team's members",
        description="Clients send 'Authorization: Bearer TOKEN' to `serve`'s /mcp (the key in the page link "
        "opens only your page). A client token (--client, or made by `mcp-setup client connect CLIENT --http`) "
        "is one of your own AI clients: it uses your stored settings. A member token is a team member's, "
        "recorded as token:NAME, with the member's own keys. Neither can approve what runs (only you can, on "
        "the page or with `mcp-setup approve`), unless a member token was made with --admin. A revoked token "
        "is refused at once by every instance on the database, with every page session it opened.",
    )
    actions = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="make a token for NAME and print it once")
    create.add_argument("name")
    create.add_argument(
        "--admin",
        action="store_true",
        help="this token may also open the page and approve launches and tool changes (audited as token:NAME)",
    )
    create.add_argument(
        "--client",
        action="store_true",
        help="a token for one of your own HTTP AI clients (it uses your stored settings; it approves nothing)",
    )
    actions.add_parser("list", help="list the tokens (names and dates, never the tokens)")
    revoke = actions.add_parser("revoke", help="refuse NAME's token from now on")
    revoke.add_argument("name")


def rotate_data_key(vault: Vault, store: Store) -> tuple[int, Vault]:
    """Re-encrypt under a new key. The key location first holds new + old keys (so nothing is
    ever unreadable), then the values move in one transaction, then the old key is dropped.
    On failure the old values stay and the key location is put back as it was."""
    rotated = vault.with_new_key()
    rotated.save()
    try:
        count = store.values.rotate_key(rotated.only_current_key())
    except BaseException:
        vault.save()
        raise
    final = rotated.only_current_key()
    final.save()
    return count, final


def run_key(settings: Settings, args: argparse.Namespace) -> int:
    def rotate(vault: Vault, store: Callable[[], Store]) -> str:
        if vault.key_location == "memory":
            raise SetupError("There is no stored data key to rotate.")
        with store() as s:
            count, _ = rotate_data_key(vault, s)
        return (
            f"Re-encrypted {count} stored value(s) under a new data key ({vault.key_location}).\n"
            "Other machines on this database need it now: `mcp-setup key export --to FILE`, copy FILE there "
            "(MCP_SETUP_DATA_KEY_FILE), and restart their instances."
        )

    def export(vault: Vault, store: Callable[[], Store]) -> str:
        vault.export_key(args.to)
        return f"Wrote the data key to {args.to} (mode 0600). On another machine: MCP_SETUP_DATA_KEY_FILE={args.to}"

    return _run(settings, {"rotate": rotate, "export": export}[args.key_command])


def run_token(settings: Settings, args: argparse.Namespace) -> int:
    def act(vault: Vault, store: Callable[[], Store]) -> str:
        with store() as s:
            tokens = s.tokens
            if args.token_command == "create":
                admin = bool(getattr(args, "admin", False))
                client = bool(getattr(args, "client", False))
                token = tokens.create(args.name, admin=admin, kind="client" if client else "member")
                may = (
                    "It may also open the page and approve what runs (an admin token)."
                    if admin
                    else "It can call tools and ask for secrets; it cannot approve what runs."
                )
                if client:
                    may = "It is one of your AI clients: it uses your stored settings; it cannot approve what runs."
                return (
                    f"{token}\n\nThis is the token for {args.name}; it is shown only now. Clients send it as "
                    f"'Authorization: Bearer <token>'. {may}"
                )
            if args.token_command == "revoke":
                tokens.revoke(args.name)
                return f"Revoked the token {args.name}: every instance refuses it from now on."
            rows = tokens.list()
            if not rows:
                return "No tokens yet (mcp-setup token create NAME)."
            return "\n".join(
                f"{t.name}\tcreated {t.created_at:%Y-%m-%d %H:%M}Z\t"
                + ("active" if t.active else f"revoked {t.revoked_at:%Y-%m-%d %H:%M}Z")
                + ("\tadmin" if t.admin else "")
                + ("\tclient" if t.kind == "client" else "")
                for t in rows
            )

    return _run(settings, act)


def _run(settings: Settings, action: Callable[[Vault, Callable[[], Store]], str]) -> int:
    from app.data_key import open_vault
    from setup_agent.store import Store

    home = Path(settings.home).expanduser()
    try:
        vault = open_vault(settings)
        text = action(vault, lambda: Store.for_data_dir(home, vault, settings.database_url))
    except SetupError as exc:
        print(f"mcp-setup: {exc.message}", file=sys.stderr)
        return 1
    print(text)
    return 0
