"""``mcp-setup audit [--json]`` and ``mcp-setup tools-review [SERVER]``.

* ``audit`` prints the append-only audit: installs, removals, enable/disable, tool-list
  changes, approvals and rejections, with time, actor and hashes (never values).
  ``audit --verify`` checks the rows' keyed chain (setup_agent/store/audit.py) and names the
  first broken link, its row's id, time and event (exit code 1), or prints the number of rows,
  from which row the chain is keyed and the last row's hash.
* ``tools-review`` shows, in a terminal, each installed server whose tools changed since the
  user approved them (new texts escaped: no control character reaches the terminal) and asks
  approve / reject / skip. It refuses to run without a terminal on stdin: an approval is the
  person's, out of band, never something a script or an agent pipes in.

Errors are one line on stderr, exit code 1; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # the parser is built at every start: the core loads only when a command runs
    from app.settings import Settings
    from setup_agent.store import InstalledServer, Store

__all__ = ["add_audit_parser", "add_tools_review_parser", "escape", "run_audit", "run_tools_review"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def add_audit_parser(sub: Any) -> None:
    audit = sub.add_parser(
        "audit",
        help="print the audit: installs, removals, tool-list changes, approvals",
        description="Print the append-only audit of this data dir's database: installs, removals, enable/disable, "
        "tool-list changes and the user's approvals or rejections, with time, actor and hashes (never values).",
    )
    audit.add_argument("--json", action="store_true", help='one JSON document: {"audit": [rows], "counts": {...}}')
    audit.add_argument("--limit", type=int, default=None, metavar="N", help="only the last N rows")
    audit.add_argument(
        "--verify",
        action="store_true",
        help="check the keyed chain from the first row; name the first bad row: id, time, event (exit code 1)",
    )


def add_tools_review_parser(sub: Any) -> None:
    review = sub.add_parser(
        "tools-review",
        help="approve or reject the changed tools of installed servers (in a terminal)",
        description="Show each installed server whose tools changed since you approved them, and approve or "
        "reject the new list. Until you approve, agents get only the tools as you approved them.",
    )
    review.add_argument("server", nargs="?", default=None, help="server id, name or slug (default: every one waiting)")


def escape(text: str) -> str:
    """``text`` with every control or direction-changing character shown as ``\\xNN``/``\\uNNNN``."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


def run_audit(settings: Settings, args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout

    if getattr(args, "verify", False):
        return _verify(settings, args, out)
    if not settings.database_url:  # a SQLite data dir: read with the standard library
        from setup_agent.store import SQLITE_FILE_NAME, read_sqlite_audit

        db = Path(settings.home).expanduser() / SQLITE_FILE_NAME
        read = read_sqlite_audit(db, args.limit) if db.exists() else ([], {"total": 0})
        if read is not None:
            rows, counts = read
            print(_audit_text(rows, counts, args.json), file=out)
            return 0

    def act(store: Store) -> str:
        return _audit_text(store.audit.entries(limit=args.limit), store.audit.counts(), args.json)

    return _run(settings, act, out)


def _audit_text(rows: list[Any], counts: dict[str, int], as_json: bool) -> str:
    if as_json:
        return json.dumps({"audit": [r.public() for r in rows], "counts": counts}, indent=2)
    if not rows:
        return "The audit is empty."
    lines = []
    for r in rows:
        hashes = " ".join(
            x for x in (r.old_hash and f"from {r.old_hash[:12]}", r.new_hash and f"to {r.new_hash[:12]}") if x
        )
        lines.append(
            "\t".join(
                x
                for x in (
                    f"{r.at:%Y-%m-%d %H:%M:%S}Z",
                    r.event,
                    escape(r.qualified_name or r.server_id or "-"),
                    f"by {escape(r.actor)}",
                    hashes,
                    escape(r.detail or ""),
                )
                if x
            )
        )
    return "\n".join(lines)


def _verify(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    found: dict[str, Any] = {}

    def act(store: Store) -> str:
        report = store.audit.verify()
        found.update(report.public())
        if args.json:
            return json.dumps(report.public(), indent=2)
        keyed = (
            f"keyed from row {report.keyed_from} (sealed {report.sealed_at:%Y-%m-%d %H:%M:%S}Z)"
            if report.keyed_from > 1
            else "keyed from its first row"
        )
        if report.ok:
            return (
                f"The audit's chain is whole: {report.rows} rows, {keyed}; the last row's hash is {report.last_hash}."
            )
        first = report.broken[0]
        more = f" ({len(report.broken)} broken links in all)" if len(report.broken) > 1 else ""
        return (
            f"The audit's chain is broken at row {first['id']} ({first['at']}, {escape(first['event'])}): "
            f"{first['reason']}{more}. The chain is {keyed}."
        )

    status = _run(settings, act, out)
    return status if status or found.get("ok") else 1


def run_tools_review(
    settings: Settings, args: argparse.Namespace, *, stdin: TextIO | None = None, out: TextIO | None = None
) -> int:
    stdin, out = stdin or sys.stdin, out or sys.stdout
    if not stdin.isatty():
        print("mcp-setup: tools-review asks you, in a terminal; run it there (nothing was approved).", file=sys.stderr)
        return 1

    def act(store: Store) -> str:
        servers = store.servers.list()
        if args.server is not None:
            servers = [s for s in servers if args.server in (s.server_id, s.qualified_name, s.slug)]
        waiting = [s for s in servers if s.tools_state == "changed"]
        offers = store.pins.offers()
        prompts = [s for s in servers if s.server_id in offers and offers[s.server_id].prompts_state == "changed"]
        if not waiting and not prompts:
            if args.server is not None:
                return f"No change of {escape(args.server)} is waiting for review."
            return "No installed server has changed tools waiting for review."
        done = [_review_one(store, server, stdin, out) for server in waiting]
        done += [_review_prompts(store, server, offers[server.server_id], stdin, out) for server in prompts]
        return "\n".join(done)

    return _run(settings, act, out)


def _review_one(store: Store, server: InstalledServer, stdin: TextIO, out: TextIO) -> str:
    from setup_agent.setup import tools_change_request
    from setup_agent.store import summarize

    change = tools_change_request(server).tools_change or {}
    name = escape(server.qualified_name)
    print(
        f"\nThe tools of {name} changed since you approved them: {escape(summarize(change.get('diff', {})))}", file=out
    )
    print("Texts are shown as the server wrote them (control characters escaped).", file=out)
    for tool in change.get("tools", []):
        print(f"  {tool['change']} tool {escape(tool['name'])}:", file=out)
        print(f"    description: {escape(tool['description'])}", file=out)
        if tool["change"] == "changed":
            print(f"    approved was: {escape(tool['pinned_description'] or '')}", file=out)
        print(f"    inputs: {escape(tool['inputSchema'])}", file=out)
    for removed in change.get("diff", {}).get("removed", []):
        print(f"  removed tool {escape(removed)}", file=out)
    out.flush()
    while True:
        print("Approve this tool list? [a]pprove / [r]eject / [s]kip: ", end="", file=out, flush=True)
        answer = stdin.readline()
        if not answer:
            return f"{name}: skipped (nothing decided)."
        answer = answer.strip().lower()
        if answer in ("a", "approve"):
            store.pins.approve_tools(server.server_id, server.live_hash or "", actor="user:terminal")
            return f"{name}: approved; agents get the new tool list."
        if answer in ("r", "reject"):
            store.pins.reject_tools(server.server_id, server.live_hash or "", actor="user:terminal")
            return f"{name}: rejected; agents keep the approved tools."
        if answer in ("s", "skip", ""):
            return f"{name}: skipped (nothing decided)."


def _review_prompts(store: Store, server: InstalledServer, offer: Any, stdin: TextIO, out: TextIO) -> str:
    """A server's changed prompt list: shown as the server wrote it, approved or skipped."""
    name = escape(server.qualified_name)
    approved = {p["name"]: p for p in offer.pinned_prompts}
    print(f"\nThe prompts of {name} changed since you approved them (changed and new ones are held back):", file=out)
    for prompt in offer.live_prompts:
        if approved.get(prompt["name"]) == prompt:
            continue
        state = "changed" if prompt["name"] in approved else "new"
        print(f"  {state} prompt {escape(prompt['name'])}: {escape(str(prompt.get('description') or ''))}", file=out)
    print("Approve this prompt list? [a]pprove / [s]kip: ", end="", file=out, flush=True)
    if stdin.readline().strip().lower() in ("a", "approve"):
        store.pins.approve_prompts(server.server_id, offer.live_hash or "", actor="user:terminal")
        return f"{name}: prompts approved; agents get the new prompt list."
    return f"{name}: prompts skipped (nothing decided)."


def _run(settings: Settings, action: Callable[[Store], str], out: TextIO) -> int:
    from app.data_key import open_vault
    from setup_agent.errors import SetupError
    from setup_agent.store import Store

    home = Path(settings.home).expanduser()
    try:
        vault = open_vault(settings)
        with Store.for_data_dir(home, vault, settings.database_url) as store:
            text = action(store)
    except SetupError as exc:
        print(f"mcp-setup: {exc.message}", file=sys.stderr)
        return 1
    print(text, file=out)
    return 0
