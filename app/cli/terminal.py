"""``mcp-setup agent "GOAL"``: the setup agent in this terminal.

Questions use plain ``input()``; secrets use a hidden ``getpass`` prompt whose value goes
straight from that thread into the core (``broker.answer``) and is never seen by the agent.
Exit codes: 0 installed, 1 failed (also when the input ends before a question is answered: a
script), 3 no server matches the name, 130 cancelled (Ctrl-C, or Cancel chosen).
``mcp-setup add --yes`` approves the consent it prints; ``--secret KEY=-|@FILE`` answers KEY's
secret prompt once (app/cli/presets.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from app.runtime import build_runtime, openai_options
from app.settings import Settings
from setup_agent.agent import AgentCancelled, AgentInputEnded, spawn_subagent
from setup_agent.errors import InvalidInput, SetupError
from setup_agent.secrets import WEAK_VALUE_WARNING, PendingPrompt, PromptBroker, install_log_redaction, is_weak_value

from .daemon_input import input_in_thread
from .network import only_these_hint

__all__ = ["EXIT_CODES", "TerminalIO", "next_steps", "run_agent"]

EXIT_CODES = {"installed": 0, "failed": 1, "cancelled": 130, "not_found": 3}

_PROGRESS = {
    "mcp_setup_search": "searching the registries…",
    "mcp_setup_get": "reading the server's details…",
    "mcp_setup_test_connection": "preparing the connection test…",  # the consent question may come next
    "mcp_setup_install_and_connect": "installing and connecting…",
}


class TerminalIO:
    """A :class:`~setup_agent.agent.harness.ChatIO` on stdin/stdout and the controlling terminal."""

    def __init__(
        self,
        broker: PromptBroker,
        *,
        out: TextIO | None = None,
        consents: Any = None,
        assume_yes: bool = False,
        secrets: dict[str, str] | None = None,
        retry: str | None = None,
    ) -> None:
        self.broker = broker
        #: The exact command that runs this again (``mcp-setup add NAME``): said after a failed download.
        self.retry = retry
        self.download_failed = False
        self.consents = consents
        self.out = out or sys.stdout
        self._pending: asyncio.Future[Any] | None = None
        self.assume_yes = assume_yes  # --yes: approve the consent shown (printed in full first)
        self._secrets = dict(secrets or {})  # --secret: each answers its key's prompt once

    last_said: str = ""
    #: The server this run's install saved (its ``installing``/``done`` event): a Ctrl-C after it
    #: cannot undo the install, and the cancel message says so.
    saved_server_id: str | None = None
    #: At most one download line per this many seconds (a slow npx download ticks often).
    DOWNLOAD_TICK_SECONDS = 5.0
    _open_line = False  # a download line written in place (TTY), not yet ended
    _last_tick = float("-inf")

    def _print(self, text: str = "") -> None:
        if self._open_line:  # a download line written in place: end it first
            self.out.write("\n")
            self._open_line = False
        print(text, file=self.out, flush=True)

    async def _in_thread(self, fn: Callable[[], Any]) -> Any:
        """Run blocking terminal input in a daemon thread (never joined: Ctrl-C must not wait on it)."""
        # End of input is no one's cancel: a script's input ran out (exit 1, not 130).
        future = input_in_thread(fn, name="mcp-setup-input", on_eof=lambda: AgentInputEnded("end of input"))
        self._pending = future
        try:
            return await future
        finally:
            self._pending = None

    def interrupt(self) -> bool:
        """Ctrl-C: cancel the question being asked; False when none is."""
        if self._pending is not None and not self._pending.done():
            self._pending.set_exception(AgentCancelled("cancelled with Ctrl-C"))
            return True
        return False

    # -- ChatIO ---------------------------------------------------------------------------
    async def say(self, text: str) -> None:
        self.last_said = text
        self._print(text)

    async def ask_user(self, question: str, choices: list[str] | None = None) -> str:
        self._print()
        self._print(question)
        if not choices:
            return await self._in_thread(lambda: input("> "))
        for i, choice in enumerate(choices, 1):
            self._print(f"  {i}. {choice}")

        def pick() -> str:
            while True:
                answer = input(f"Choose 1-{len(choices)}: ").strip()
                if answer.isdigit() and 1 <= int(answer) <= len(choices):
                    return choices[int(answer) - 1]
                for choice in choices:
                    if answer.lower() == choice.lower():
                        return choice
                print("Please type the number of one of the choices.", file=self.out, flush=True)

        return await self._in_thread(pick)

    async def present_authorization(self, info: dict) -> dict:
        """An OAuth sign-in: who signs in and what is asked for, then the link to open."""
        self._print()
        self._print(info["message"])
        self._print(f"Open this link in your browser to sign in (waiting for you):\n  {info['url']}")
        return {"status": "shown"}

    async def present_secret(self, pending: PendingPrompt) -> dict:
        self._print()
        where = f" for {pending.server}" if pending.server else ""
        about = _about(pending.prompt, pending.key_name)
        self._print(
            f"Enter {pending.key_name}{where}{f' ({about})' if about else ''}. Hidden as you type; stored encrypted."
        )
        broker = self.broker
        if (given := self._secrets.pop(pending.key_name, None)) is not None:
            try:
                broker.answer(pending.prompt_id, given)  # the value goes straight into the core
            except InvalidInput as exc:
                self._print(f"The --secret value of {pending.key_name} was refused: {exc.message}")
            else:
                self._print(f"Got it: {pending.key_name} from --secret is kept for this setup.")
                return {"status": "answered"}

        def read_and_answer() -> None:
            while True:
                value = getpass.getpass(f"{pending.key_name} (hidden): ")
                weak = is_weak_value(value)  # inspected here, never kept or printed
                try:
                    broker.answer(pending.prompt_id, value)  # the value goes straight into the core
                except InvalidInput as exc:
                    print(exc.message, file=self.out, flush=True)
                    continue
                if weak:
                    print(f"Warning: {WEAK_VALUE_WARNING}", file=self.out, flush=True)
                return

        try:
            await self._in_thread(read_and_answer)
        except AgentCancelled:
            with contextlib.suppress(SetupError):
                broker.cancel(pending.prompt_id, "cancelled by the user")
            raise
        self._print(f"Got it: {pending.key_name} is kept for this setup.")
        return {"status": "answered"}

    async def present_consent(self, pending: Any) -> dict:
        """Show what will run and where secrets go; the user may change destination settings, then approves."""
        from app.pages import ONLY_THESE, consent_lines
        from setup_agent.setup import consent_document

        from .choice_pick import pick_choices
        from .tool_pick import pick_hidden, print_tools

        request, consents = pending.request, self.consents
        if consents is None:
            return {}
        self._print()
        title = consent_document(request).title.removeprefix("Allow mcp-setup to ").removesuffix("?")
        self._print(f"mcp-setup needs your approval to {title}:")
        for line in consent_lines(request, tools=False):  # the document the page shows, as text
            self._print(line)
        print_tools(request, self.out)  # the tools a test listed, numbered

        if self.assume_yes:
            return self._approve_as_shown(pending)

        def ask() -> None:
            settings: dict[str, str] = {}
            for d in request.destinations:
                print(
                    f"{d.name}: the assistant suggested {d.suggested!r}. Press Enter to keep it, or type "
                    "where it should really connect.",
                    file=self.out,
                    flush=True,
                )
                typed = input(f"{d.name} [{d.suggested}]: ").strip()
                settings[d.name] = typed or d.suggested
            accept = False
            if request.warnings:
                print("Warnings:", file=self.out, flush=True)
                for w in request.warnings:
                    print(f"  ! {w.code}: {w.message}", file=self.out, flush=True)
                accept = input('Type "accept" to accept these warnings: ').strip().lower() == "accept"
            hidden = pick_hidden(request, input, self.out)  # Enter: every tool stays
            choices = pick_choices(request, input, self.out)  # Enter: each keeps its default
            narrowed = None
            if request.only_these:  # what its test reached, and nothing else: the person's choice
                typed = input(ONLY_THESE.format(", ".join(request.only_these)) + "? [y/N]: ").strip().lower()
                narrowed = {"only_these": True} if typed in ("y", "yes") else None
            while True:
                answer = input("Allow this? [y/N]: ").strip().lower()
                if answer in ("n", "no", ""):
                    consents.deny(pending.consent_id, "denied in the terminal", by="user:terminal")
                    return
                if answer in ("y", "yes"):
                    break
            consents.approve(
                pending.consent_id,
                settings,
                accept_warnings=accept,
                by="user:terminal",
                hidden_tools=hidden,
                sandbox=narrowed,
                choices=choices,
            )

        try:
            await self._in_thread(ask)
        except SetupError as exc:  # e.g. warnings not accepted, or an empty setting: nothing runs
            self._print(exc.message)
            with contextlib.suppress(SetupError):
                consents.deny(pending.consent_id, "not approved in the terminal")
        except AgentCancelled:
            with contextlib.suppress(SetupError):
                consents.deny(pending.consent_id, "cancelled by the user")
            raise
        self._print("Approved." if consents.status(pending.consent_id) == "approved" else "Not approved: nothing runs.")
        return {}

    def _approve_as_shown(self, pending: Any) -> dict:
        """``--yes``: the consent printed above, approved as shown (suggested destinations kept);
        warnings are a person's to accept, so a consent with warnings is not approved."""
        request, consents = pending.request, self.consents
        for w in request.warnings:
            self._print(f"  ! {w.code}: {w.message}")
        try:
            consents.approve(
                pending.consent_id,
                {d.name: d.suggested for d in request.destinations},
                accept_warnings=False,
                by="user:terminal --yes",
            )
        except SetupError as exc:
            self._print(f"Not approved with --yes: {exc.message} Run without --yes to decide yourself.")
            with contextlib.suppress(SetupError):
                consents.deny(pending.consent_id, "not approved with --yes")
            return {}
        self._print(f"Approved (--yes), with all {len(request.tools)} tools." if request.tools else "Approved (--yes).")
        return {}

    def _is_tty(self) -> bool:
        isatty = getattr(self.out, "isatty", None)
        return bool(isatty and isatty())

    async def progress(self, event: dict) -> None:
        if event.get("type") == "tool_call" and event.get("name") in _PROGRESS:
            self._print(f"· {_PROGRESS[event['name']]}")
        elif event.get("type") == "progress":
            self._stage(event)

    def _stage(self, event: dict) -> None:
        """One short line per stage of a test or install (the core's progress events)."""
        stage, status = event.get("stage"), event.get("status")
        testing = event.get("action") == "mcp_setup_test_connection"
        if stage == "downloading":
            self._download(status, event)
        elif (stage, status) == ("starting", "started"):
            deadline = event.get("deadline_seconds")
            self._print("· starting the server" + (f" (waiting up to {deadline:g} s)" if deadline else ""))
        elif (stage, status) == ("tools_listed", "done") and testing:
            count = len(event.get("tools") or [])
            self._print(f"✓ test passed: {count} tool{'' if count == 1 else 's'}")
            check = event.get("key_check") or {}
            if check.get("checked"):
                self._print(f"✓ the key works: the server answered its read-only tool `{check.get('tool')}`")
            elif check.get("note"):
                self._print(f"· {check['note']}")
        elif (stage, status) == ("installing", "done"):
            self.saved_server_id = event.get("server_id")
            self._print("✓ saved; connecting…")
        elif (stage, status) == ("connected", "done"):
            self._print("✓ connected")

    def _download(self, status: Any, event: dict) -> None:
        if status == "started":
            self._print("· downloading the package…")
            self._last_tick = time.monotonic()
            return
        if status == "progress":
            now = time.monotonic()
            if now - self._last_tick < self.DOWNLOAD_TICK_SECONDS:
                return
            self._last_tick = now
            fetched = event.get("fetched") or 0
            text = f"· downloading the package… {event.get('elapsed_seconds', 0):.0f} s" + (
                f", {fetched} package{'' if fetched == 1 else 's'}" if fetched else ""
            )
            if self._is_tty():  # rewrite the line in place
                self.out.write(f"\r\x1b[K{text}")
                self.out.flush()
                self._open_line = True
            else:
                self._print(text)
        elif status == "done" and event.get("ok") is not False:  # done only when the runner says so
            fetched = event.get("fetched")
            self._print("· downloaded" + (f" ({fetched} package{'' if fetched == 1 else 's'})" if fetched else ""))
        elif status == "failed":
            self.download_failed = self.download_failed or event.get("code") == "download_failed"
            self._print("✗ the download failed")

    def retry_hint(self) -> str | None:
        """After a failed download: the command that tries again, once the registry answers."""
        if not (self.download_failed and self.retry):
            return None
        return f"Once the network or the registry answers, try again: {self.retry}"


def next_steps(slug: str) -> str:
    """What to do after an install, with the short name the other commands take."""
    from app.clients import CLIENTS

    return (
        f'Its short name is "{slug}": mcp-setup show {slug}, mcp-setup remove {slug}. To use it in your AI '
        f"client: mcp-setup client connect CLIENT ({', '.join(CLIENTS)})."
    )


def _about(prompt: str, key_name: str) -> str:
    """The prompt's words without what the line already says: the key's name (as a "NAME:"
    label or in parentheses), the closing full stop, and a privacy sentence (this line says how the value is kept)."""
    text = " ".join(str(prompt or "").split())
    for sentence in ("It is stored encrypted and never shown to the assistant.",):
        text = text.replace(sentence, "").strip()
    text = text.replace(f"({key_name})", "").strip().rstrip(".").strip()
    if text.startswith(f"{key_name}:"):
        text = text[len(key_name) + 1 :].strip()
    return "" if text.lower() in ("", key_name.lower()) else text


@contextlib.contextmanager
def _terminal_restored():
    """Put the terminal back as it was (a hidden prompt left by Ctrl-C must not keep echo off)."""
    saved = None
    try:
        import termios

        if sys.stdin.isatty():
            saved = termios.tcgetattr(sys.stdin.fileno())
    except (ImportError, OSError, ValueError):
        pass
    try:
        yield
    finally:
        if saved is not None:
            with contextlib.suppress(Exception):
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)


async def run_agent(
    settings: Settings,
    log_handler: logging.Handler,
    goal: str,
    driver: str | None = None,
    installed_by: str = "agent",
    *,
    assume_yes: bool = False,
    secrets: dict[str, str] | None = None,
    retry: str | None = None,
) -> int:
    """Run the ``mcp_setup`` agent for ``goal`` here; returns the exit code. ``installed_by``:
    the install's actor (``cli`` for ``mcp-setup add``, the person's own command); ``retry``:
    the command that runs this again, printed after a failed download."""
    if logging.getLogger().level > logging.DEBUG:
        log_handler.setLevel(logging.WARNING)  # keep the conversation readable; --verbose shows all
    runtime = build_runtime(settings)
    install_log_redaction(runtime.redactor, log_handler)
    io = TerminalIO(runtime.broker, consents=runtime.consents, assume_yes=assume_yes, secrets=secrets, retry=retry)
    secrets = None  # the values live in io only, until their prompt takes them
    options = openai_options(settings) if driver == "openai" else {}
    loop = asyncio.get_running_loop()
    with _terminal_restored():
        task = asyncio.ensure_future(
            spawn_subagent(
                "mcp_setup",
                {"goal": goal},
                service=runtime.service,
                redactor=runtime.redactor,
                io=io,
                driver=driver,
                driver_options=options,
                installed_by=installed_by,
            )
        )

        def on_sigint() -> None:
            if not io.interrupt():
                task.cancel()

        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        slug = only_these = None
        try:
            result = await task
            if result.get("status") == "installed" and result.get("server_id"):
                installed = await asyncio.to_thread(runtime.store.servers.get, result["server_id"])
                slug = installed.slug if installed is not None else None
                only_these = only_these_hint(installed) if installed is not None else None
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not task.cancelled() or (current is not None and current.cancelling()):
                raise
            # An install cancelled after its commit is there (all or nothing, but not nothing): say so.
            saved = (
                await asyncio.to_thread(runtime.store.servers.get, io.saved_server_id) if io.saved_server_id else None
            )
            if saved is not None:
                names = f"{saved.qualified_name} (mcp-setup remove {saved.slug} takes it out)"
                print(f"\nCancelled by the user, after the install was saved: {names}.", flush=True)
            else:
                print("\nCancelled by the user. Nothing was installed.", flush=True)
            return EXIT_CODES["cancelled"]
        except (KeyError, ValueError) as exc:
            print(f"mcp-setup: {exc.args[0] if exc.args else exc}", file=sys.stderr, flush=True)
            return 2
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
            await runtime.aclose()
    if result["summary"] != io.last_said:
        print(f"\n{result['summary']}", flush=True)
    if slug:
        print(next_steps(slug), flush=True)
    if only_these:  # where its test connected, and "only these" one command away
        print(only_these, flush=True)
    if hint := io.retry_hint():
        print(hint, flush=True)
    return EXIT_CODES[result.get("reason") if result.get("reason") == "not_found" else result["status"]]
