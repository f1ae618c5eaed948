"""``mcp-setup approve``: answer, in a terminal, what waits for your approval in any mcp-setup.

A stdio face whose client cannot show a page, on a machine with no browser, has nowhere else to
ask: its consent waits in the store (see :mod:`setup_agent.setup.shared_consents`). This command
lists every such consent and tool-list change opened by any mcp-setup process on the data dir (or
the team's database), shows each exactly as the consent page does, and records your answer as
``user:terminal``; the waiting process applies it within a second. A secret prompt waiting the
same way is answered at a hidden prompt (the value is encrypted with the data key on its way),
after the consents: you see what will run before you type the key it gets.
It also tells of every refused guess at a secret (the guard's incidents), and unblocks a client
the guard blocked, if you say so: only you can.

It is a user channel, so it takes answers from a person only: it refuses to run without a
terminal, and reads each answer from the terminal itself (``/dev/tty``), never from stdin.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from setup_agent.errors import InvalidInput, SetupError

if TYPE_CHECKING:  # pydantic loads when a command runs, not when the parser is built
    from app.settings import Settings

__all__ = ["add_approve_parser", "run_approve"]

_NO_TTY = (
    "mcp-setup approve: this command takes your answers in a terminal only (it never reads them from a pipe "
    "or a script). Run it in a terminal window."
)
BY = "user:terminal"


def add_approve_parser(sub: Any) -> None:
    sub.add_parser(
        "approve",
        help="approve or deny, in this terminal, what an AI client asked to run",
        description="List what waits for your approval in any mcp-setup on this machine (a server an AI "
        "client asked to test or install, a changed tool list) and answer each. It shows exactly what will "
        "run and where your secrets go. Answers are read from this terminal only, never from a pipe.",
    )


def run_approve(settings: Settings, args: argparse.Namespace, *, tty: Callable[[], TextIO] | None = None) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(_NO_TTY, file=sys.stderr)
        return 2
    try:
        answers = (tty or _open_tty)()
    except OSError:
        print(_NO_TTY, file=sys.stderr)
        return 2
    from app.data_key import open_vault
    from setup_agent.store import PendingApprovals, SharedApprovals, SharedRefs, Store, owner_alive, process_owner

    try:
        vault = open_vault(settings)
        with Store.for_data_dir(Path(settings.home).expanduser(), vault, settings.database_url) as store:
            shared = PendingApprovals(store, owner=process_owner())
            team = store.database.engine.dialect.name == "postgresql"  # a team's: answers usable on any replica
            refs = SharedRefs(store, vault) if team else None
            remembered = SharedApprovals(store) if team else None
            waiting = [item for item in shared.pending() if owner_alive(item.owner)]
            # What will run comes before the keys it would get: a key is asked once you have seen it.
            waiting.sort(key=lambda item: item.kind == "secret")
            if not waiting:
                print("Nothing is waiting for your approval.")
                return 0
            print(f"{len(waiting)} request(s) wait for your approval.\n")
            for item in waiting:
                if item.kind == "secret":
                    _answer_secret(shared, vault, item, refs=refs, ttl=settings.secret_ttl_seconds)
                elif item.kind in ("incident", "lock"):
                    _answer_guard(shared, item, answers)
                else:
                    _answer_one(shared, item, answers, remembered=remembered, ttl=settings.secret_ttl_seconds)
    except SetupError as exc:
        print(f"mcp-setup: {exc.message}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, EOFError):
        print("\nStopped. Nothing more was answered.", file=sys.stderr)
        return 130
    finally:
        answers.close()
    return 0


def _open_tty() -> TextIO:
    return open("/dev/tty", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by run_approve


def _ask(answers: TextIO, question: str) -> str:
    print(question, end="", flush=True)
    line = answers.readline()
    if not line:
        raise EOFError
    return line.strip()


def _printable(text: object, limit: int = 500) -> str:
    """An agent's text, safe for a terminal: no escape sequences, no control characters."""
    return "".join(ch if ch.isprintable() else " " for ch in str(text or ""))[:limit]


def _answer_secret(shared: Any, vault: Any, item: Any, *, refs: Any = None, ttl: float = 900.0) -> None:
    import getpass

    from setup_agent.setup import answer_secret_shared

    key = _printable(item.request.get("key_name"), 128)
    server = item.request.get("server")
    print(f"An AI client asks for your {key}" + (f" for {_printable(server, 200)}" if server else "") + ".")
    print(f"  It says: {_printable(item.request.get('prompt'))}")
    print("  What you type stays on this computer; the assistant only gets a reference to it.")
    while True:
        value = getpass.getpass(f"  Your {key} (hidden; press Enter to skip, type - to cancel): ")  # reads /dev/tty
        if not value:
            print("Skipped.\n")
            return
        try:
            done = answer_secret_shared(
                shared, vault, item.item_id, None if value == "-" else value, by=BY, shared_refs=refs, ttl_seconds=ttl
            )
        except InvalidInput as exc:
            print(f"  {exc.message}")
            continue
        finally:
            value = ""
        print(("Saved. The assistant can go on now." if done else "It was answered elsewhere or expired.") + "\n")
        return


def _answer_guard(shared: Any, item: Any, answers: TextIO) -> None:
    """An agent sent a value mcp-setup protects (a guess at a secret?): told; a lock may be lifted."""
    who = _printable(item.request.get("principal"), 200)
    count = item.request.get("refusals")
    print(
        f"Warning: {who} sent a value that mcp-setup protects in its tool arguments"
        + (f" ({count} time(s))" if isinstance(count, int) else "")
        + ". The calls were refused. An assistant "
        "never needs your stored secrets: it may be trying to guess one."
    )
    if item.kind == "incident":
        shared.close(item.item_id)  # told: it leaves the list
        print()
        return
    print("  Its tool calls are blocked.")
    if _ask(answers, f"  Unblock {who}? [y/N] ").lower() in ("y", "yes"):
        shared.answer(item.item_id, "approved", by=BY)
        print("Unblocked: its next call goes through again.\n")
    else:
        print("It stays blocked.\n")


def _answer_one(shared: Any, item: Any, answers: TextIO, *, remembered: Any = None, ttl: float = 900.0) -> None:
    from app.pages import ONLY_THESE, consent_lines
    from setup_agent.setup import ConsentRequest, answer_shared, consent_document

    from .choice_pick import pick_choices
    from .tool_pick import pick_hidden, print_tools

    request = ConsentRequest.from_public(item.request)
    if request.action == "tools_change":
        print(f"The tools of {request.server} changed since you approved them:")
        for tool in (request.tools_change or {}).get("tools") or []:
            print(f"  {tool.get('change', 'changed')}: {tool.get('name')}")
            if tool.get("description"):
                print(f"      {tool['description'][:500]}")
        question = "Approve the new tool list? [y/N] "
    else:
        for line in consent_lines(request, tools=False):  # the document the page shows, as text
            print(_printable(line, 4000))
        print_tools(request, sys.stdout)  # the tools a test listed, numbered
        question = consent_document(request).title.removesuffix("?") + "? [y/N] "
    settings: dict[str, str] = {}
    for destination in request.destinations:
        typed = _ask(answers, f"  {destination.name} [{destination.suggested}] (Enter keeps it): ")
        if typed:
            settings[destination.name] = typed
    accept = False
    if request.warnings:
        print("  Warnings:")
        for warning in request.warnings:
            print(f"    {warning.code}: {warning.message}")
    if _ask(answers, question).lower() not in ("y", "yes"):
        answer_shared(shared, item.item_id, approve=False, by=BY)
        print("Denied. Nothing runs.\n")
        return
    if request.warnings:
        accept = _ask(answers, "  Type yes to accept these warnings: ").lower() == "yes"
        if not accept:
            answer_shared(shared, item.item_id, approve=False, by=BY)
            print("Denied (the warnings were not accepted). Nothing runs.\n")
            return
    hidden = pick_hidden(request, lambda question: _ask(answers, question), sys.stdout)  # Enter: all stay
    choices = pick_choices(request, lambda question: _ask(answers, question), sys.stdout)  # Enter: the defaults
    sandbox: dict[str, Any] | None = None
    if request.widenable:  # the user's widening of the sandbox, asked once they said yes
        extra = _ask(answers, "  Another folder it may read and write (a full path; Enter for none): ")
        offline = _ask(answers, "  Run it with no network? [y/N] ").lower() in ("y", "yes")
        reads = [  # files of the home its command line names: kept from it unless the user says so
            path
            for path in request.home_files
            if _ask(answers, f"  Let it read {_printable(path, 300)} (in your home folder)? [y/N] ").lower()
            in ("y", "yes")
        ]
        sandbox = {"extra_paths": [extra] if extra else [], "network": not offline, "reads": reads}
    if request.only_these:  # narrowed to what its test reached: the person's choice
        question = "  " + ONLY_THESE.format(", ".join(request.only_these)) + "? [y/N] "
        if _ask(answers, question).lower() in ("y", "yes"):
            sandbox = {**(sandbox or {}), "only_these": True}
    try:
        done = answer_shared(
            shared,
            item.item_id,
            approve=True,
            by=BY,
            settings=settings,
            accept_warnings=accept,
            sandbox=sandbox,
            hidden_tools=hidden,
            choices=choices,
            remembered=remembered,
            ttl_seconds=ttl,
        )
    except InvalidInput as exc:
        print(f"Not approved: {exc.message}\n")
        return
    print(
        ("Approved. The assistant can go on now." if done else "It was answered elsewhere or expired meanwhile.") + "\n"
    )
