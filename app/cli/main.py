"""The ``mcp-setup`` command line: ``serve``, ``mcp``, ``agent``; ``key`` and ``token`` (app/cli/team.py);
``tools`` (app/cli/tools.py); ``export`` and ``apply`` (app/cli/lock_export.py, lock_apply.py)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # read-only commands never load pydantic, asyncio or the core (app/cli/readonly.py)
    from app.settings import Settings

__all__ = ["main"]

DESCRIPTION = """\
Add MCP servers to your AI agent without hand-editing JSON and without pasting API keys
into a chat. Secrets are typed into a local page or a hidden prompt; the agent only ever
sees an opaque ref.

Data lives in $MCP_SETUP_HOME (default ~/.local/share/mcp-setup). Every setting can be
given as an environment variable MCP_SETUP_<NAME>: docs/settings.md lists them.
"""


EXAMPLES = """\
examples:
  mcp-setup serve                      open the web app and press "Add MCP server…"
  mcp-setup agent "set up the Notion MCP server"
  mcp-setup mcp                        as a stdio server for Claude Desktop, Cursor, VS Code
  mcp-setup client connect cursor      put that stdio server into Cursor's config (a backup is kept)

more, in the docs/ folder of mcp-setup's source:
  docs/cli.md              every command and option
  docs/clients.md          connecting Claude Desktop, Cursor, VS Code, Claude Code, Gemini CLI, Codex…
  docs/troubleshooting.md  the errors people meet and what to do
  docs/settings.md         the MCP_SETUP_* settings
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcp-setup")
    except PackageNotFoundError:
        return "unknown"


#: The commands as ``mcp-setup --help`` lists them, in groups a person looks for (a test checks
#: that every command is in exactly one).
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("add and use servers", ("serve", "open", "add", "search", "agent")),
    (
        "installed servers",
        ("list", "show", "enable", "disable", "allow", "update", "rotate", "remove", "tools", "tools-review"),
    ),
    ("AI clients", ("client", "import", "approve", "mcp", "run")),
    ("team", ("token", "settings", "export", "apply", "key")),
    ("when something is wrong", ("doctor", "logs", "audit")),
)

#: Logged at INFO by default: the stdio face's stderr is a client's log file, read when
#: something went wrong. Every other command is for a person: warnings and errors only,
#: unless ``--verbose``.
_LOGS_AT_INFO = frozenset({"mcp"})


def _setup_logging(verbose: bool, quiet: bool = True) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    for noisy in ("httpx", "httpcore", "httpx2", "mcp", "uvicorn.access", "alembic"):
        logging.getLogger(noisy).setLevel(logging.INFO if verbose else logging.WARNING)
    return handler


class _Help(argparse.HelpFormatter):
    """Wraps at spaces only: a command such as ``mcp-setup client connect`` in a sentence is never
    split at its hyphen, so it can be read (and copied) whole."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(
            " ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
        )


class _CommandParser(argparse.ArgumentParser):
    """A command's parser (and its actions'): help wrapped by :class:`_Help` unless it asks otherwise."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-setup",
        usage="%(prog)s [-h] [--version] COMMAND ...",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    serve = sub.add_parser(
        "serve",
        help="run the web app with the 'Add MCP server…' button (127.0.0.1)",
        description="Run the local web app. It prints the page's address, with a one-time token; only this "
        "computer can reach it. Installed servers are started in the background. Ctrl-C stops everything.",
    )
    serve.add_argument("--port", type=int, default=None, help="port to listen on (default 8765; 0 picks a free one)")
    serve.add_argument("--no-browser", action="store_true", help="do not open a browser")
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; another one needs TLS)"
    )
    serve.add_argument("--tls-cert", type=Path, default=None, metavar="FILE", help="TLS certificate (PEM)")
    serve.add_argument("--tls-key", type=Path, default=None, metavar="FILE", help="TLS private key (PEM)")
    serve.add_argument(
        "--insecure-http", action="store_true", help="serve plain HTTP on a non-loopback --host (behind a TLS proxy)"
    )
    serve.add_argument("--verbose", "-v", action="store_true", help="log every request and debug lines on stderr")
    page = sub.add_parser(
        "open",
        help="show the page link of the running `mcp-setup serve` (and open it in a browser)",
        description="Print the link of the page `mcp-setup serve` shows on this data folder, and open it in a "
        "browser where one can show up. The link holds that run's key: it changes at every start of serve.",
    )
    page.add_argument("--no-browser", action="store_true", help="only print the link")
    mcp = sub.add_parser(
        "mcp",
        help="run as a stdio MCP server (for Claude Desktop, Cursor, VS Code…)",
        description="Speak MCP on stdin/stdout: the mcp_setup_* tools, and every installed server's tools as "
        "<server>__<tool>. `mcp-setup client connect CLIENT` adds it to Claude Desktop, Cursor, VS Code and others "
        '(by hand: a stdio server {"command": "<full path of mcp-setup>", "args": ["mcp"]}). Logs go to stderr.',
    )
    mcp.add_argument("--verbose", "-v", action="store_true", help="debug logging on stderr")
    agent = sub.add_parser(
        "agent",
        help="run the setup agent in this terminal for GOAL",
        description="Let the setup assistant find, configure, test and install a server. Secrets are asked "
        "with a hidden prompt. Exit code: 0 installed, 1 failed, 130 cancelled.",
        add_help=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    agent.add_argument("-h", "--help", action=_AgentHelp, nargs=0, help="show this help message and exit")
    agent.add_argument("goal", help='what to set up, e.g. "set up the Notion MCP server"')
    agent.add_argument("--driver", default=None, help="guided (default, offline) or openai")
    agent.add_argument("--verbose", "-v", action="store_true", help="debug logging on stderr")
    from .clients import add_client_parsers
    from .servers import add_server_parsers
    from .team import add_key_parser, add_token_parser
    from .tools import add_tools_parser

    add_key_parser(sub)
    add_token_parser(sub)
    add_tools_parser(sub)
    add_server_parsers(sub)
    add_client_parsers(sub)
    from .approve import add_approve_parser
    from .audit import add_audit_parser, add_tools_review_parser

    add_approve_parser(sub)
    from .network import add_allow_parser

    add_allow_parser(sub)
    from .member_keys import add_settings_parser

    add_settings_parser(sub)
    from .lock_export import add_lock_parsers

    add_lock_parsers(sub)
    add_audit_parser(sub)
    add_tools_review_parser(sub)
    # `mcp-setup COMMAND --help` opens with the one line `mcp-setup --help` shows for it, where
    # the command has no longer description of its own (argparse keeps that line on the action).
    for action in sub._choices_actions:
        command = sub.choices.get(action.dest)
        if command is not None and command.description is None and action.help:
            command.description = action.help[0].upper() + action.help[1:] + "."
    for command in _leaves(sub):
        if not any(a.dest == "verbose" for a in command._actions):
            command.add_argument("--verbose", "-v", action="store_true", help="log debug lines on stderr")
    _group_commands(parser, sub)
    return parser


def _leaves(sub: Any) -> list[argparse.ArgumentParser]:
    """Every command's parser that parses the last words (``client connect``'s, not ``client``'s)."""
    out = []
    for command in dict.fromkeys(sub.choices.values()):
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        out += [leaf for a in nested for leaf in _leaves(a)] if nested else [command]
    return out


def _group_commands(parser: argparse.ArgumentParser, sub: Any) -> None:
    """``--help`` lists the commands in :data:`GROUPS`, each with its one line, before the options."""
    lines = {action.dest: action.help for action in sub._choices_actions}
    groups = []
    for title, names in GROUPS:
        group = parser.add_argument_group(title)
        group._group_actions += [argparse.Action([], name, help=lines[name], metavar=name) for name in names]
        groups.append(parser._action_groups.pop())
    parser._action_groups[:0] = groups
    sub.help = argparse.SUPPRESS  # listed in the groups instead


def unknown_command(argv: Sequence[str], commands: Sequence[str]) -> str | None:
    """What to say when the first word is not a command (``lst``: did you mean ``list``?)."""
    word = next((a for a in argv if not a.startswith("-")), None)
    if word is None or word in commands:
        return None
    import difflib

    near = difflib.get_close_matches(word, commands, n=2, cutoff=0.7)
    hint = " or ".join(f"'{n}'" for n in near)
    return f"mcp-setup: unknown command '{word}'. " + (
        f"Did you mean {hint}?" if near else "`mcp-setup --help` lists the commands."
    )


class _Version(argparse.Action):
    """``--version``, read from the package metadata only when asked (importlib.metadata is slow)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> None:
        parser.exit(message=f"mcp-setup {_version()}\n")


class _AgentHelp(argparse.Action):
    """``agent --help`` also names the agent that would run, read from its definition file
    (only then: the other commands never load the archetypes)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> None:
        from setup_agent.agent import load_archetypes

        registry = load_archetypes()
        lines = [
            f"  {a.id} ({a.driver} driver): {a.description}\n    defined in {a.source}"
            for a in sorted(registry.agents.values(), key=lambda a: a.id)
        ]
        lines += [f"  not loaded: {message}" for message in registry.errors.values()]
        parser.epilog = "the setup agent:\n" + ("\n".join(lines) or "  none found")
        parser.print_help()
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    if (problem := unknown_command(argv, list(commands))) is not None:
        print(problem, file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    handler = _setup_logging(getattr(args, "verbose", False), quiet=args.command not in _LOGS_AT_INFO)
    # Piped input (a script answering a hidden prompt) has no echo to hide: getpass's warning
    # about it is Python's, not something the person can act on.
    import getpass
    import warnings

    warnings.filterwarnings("ignore", category=getpass.GetPassWarning)
    from .readonly import LightSettings, settings_error, takes_light_settings

    if takes_light_settings(args):
        settings: Any = LightSettings(os.environ)
    else:
        from pydantic import ValidationError

        from app.settings import Settings

        try:
            settings = Settings()
        except ValidationError as exc:  # say which setting is wrong, by its variable name
            return settings_error(exc)
    from setup_agent.errors import SetupError

    from .data_dir import check, explained

    try:
        if args.command != "doctor":  # doctor lists each problem with the rest of its checks
            check(settings)
        return _run(parser, args, settings, handler)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the boundary: a data folder that cannot be used, or the core's error, in one line
        said = explained(exc, settings) or (exc if isinstance(exc, SetupError) else None)
        if said is None:
            raise
        print(f"mcp-setup: {said.message}", file=sys.stderr)
        return 1


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, settings: Any, handler: logging.Handler) -> int:
    if args.command in ("serve", "mcp", "agent", "tools", "apply"):  # config.toml (capability providers)
        from .tools import check_config

        if (problem := check_config(settings)) is not None:
            print(problem, file=sys.stderr)
            return 2
    if args.command == "mcp":
        import asyncio

        code = asyncio.run(_run_mcp(settings, handler))
        if code == 130:  # interrupted: everything is closed; skip the interpreter's teardown
            _exit_now(code)  # of the whole core (over a second here), past a client's grace
        return code
    if args.command == "serve":
        from app.web import run_serve

        return run_serve(
            settings,
            handler,
            port=args.port,
            open_browser=not args.no_browser,
            host=args.host,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            insecure_http=args.insecure_http,
        )
    if args.command == "agent":
        import asyncio

        from .terminal import run_agent

        return asyncio.run(run_agent(settings, handler, args.goal, driver=args.driver))
    if args.command in ("key", "token"):
        from . import team as cli_team

        return (cli_team.run_key if args.command == "key" else cli_team.run_token)(settings, args)
    if args.command == "allow":
        from .network import run_allow

        return run_allow(settings, args)
    if args.command == "approve":
        from .approve import run_approve

        return run_approve(settings, args)
    if args.command in ("audit", "tools-review"):
        from . import audit as cli_audit

        return (cli_audit.run_audit if args.command == "audit" else cli_audit.run_tools_review)(settings, args)
    if args.command == "settings":
        from .member_keys import run_settings

        return run_settings(settings, args)
    if args.command in ("export", "apply"):  # lock files
        from . import lock_apply, lock_export

        return (
            lock_export.run_export(settings, args)
            if args.command == "export"
            else (lock_apply.run_apply(settings, args, handler))
        )
    if args.command == "tools":
        from .tools import run_tools

        return run_tools(settings, args)
    from .servers import COMMANDS, run_server_command

    if args.command in COMMANDS:
        return run_server_command(settings, args, handler)
    if args.command in ("client", "run", "import"):
        from .clients import run_client_command

        return run_client_command(settings, args, handler)
    if args.command == "open":
        from .page_link import run_open

        return run_open(settings, args)
    parser.print_help()
    return 2


def _exit_now(code: int) -> None:
    """Exit at once with ``code``, the logs and standard streams flushed first."""
    import os

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


async def _run_mcp(settings: Settings, handler: logging.Handler) -> int:
    import asyncio
    import signal

    from app.mcp import end_servers_now, run_stdio

    # SIGTERM (a client giving up on us) still stops every server we started, each asked first.
    # SIGINT is a client closing us with a short grace (Claude Code waits 100 ms, then kills):
    # the servers we started are ended at once, then the calls in flight are cancelled and the
    # rest unwinds; the exit code says "interrupted", with no traceback.
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    interrupted: list[bool] = []

    def interrupt() -> None:
        interrupted.append(True)
        end_servers_now(settings)
        if task is not None:
            task.cancel()

    if task is not None:
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        loop.add_signal_handler(signal.SIGINT, interrupt)
    try:
        await run_stdio(settings, handler)
    except asyncio.CancelledError:
        return 130 if interrupted else 143
    return 0


if __name__ == "__main__":
    sys.exit(main())
