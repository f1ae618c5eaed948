"""``mcp-setup apply FILE``: install the servers of a lock file here, exactly.

1. The file is read (setup_agent/setup/lock_file.py: a file that is not a lock file, or of a newer
   version, is refused with what is wrong; an entry that cannot be used, such as one naming an
   unknown registry, is reported and left out, and the others go on). A server already installed
   identically is reported and left alone; one installed differently is refused (remove it first).
2. Before anything runs, each server is looked up in the file's registry at the file's exact
   version, its package found, and the registry's artifact digest compared with the file's
   (setup_agent/launch/digests.py): a difference is refused, saying expected and found. A
   launch-spec entry (a server imported from a client's config, or written by hand) has no
   registry: its launch is what the consent shows and what runs.
3. The user approves the whole file once, in this terminal (the consent the terminal shows for
   ``add``, for every server at once). With ``MCP_SETUP_CONSENT=never-ask`` it is not asked.
4. Each secret slot is asked at a hidden prompt; its value becomes a ref like any typed secret.
5. Each server is installed through the core's install (one transaction each): the launch it
   works out is checked against the file's before the consent step (``check_prepared``), the
   user's per-server consent is answered from the approval of step 3 only when it matches, and
   the tool list the test saw is checked against the file's before the commit (``check_tools``):
   a refusal leaves nothing of that server. A launch-spec entry is test-connected with its
   values in the child's environment only, its tool list checked the same way, and installed
   in one transaction, its source (``import:claude-desktop``) kept.

One entry that cannot be installed never stops the others: each is reported with why, and the
exit code says that something failed.

Exit codes: 0 all installed (or already there), 1 something failed, 3 FILE or a server/version
not found, 130 cancelled.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import getpass
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.settings import Settings
from registry_clients.errors import RegistryNotFound
from setup_agent.errors import LockMismatch, SetupError

from .daemon_input import input_in_thread
from .lock_export import entry_for

__all__ = ["run_apply"]

EXIT_FAILED, EXIT_NOT_FOUND, EXIT_CANCELLED = 1, 3, 130


@dataclass
class _Plan:
    entry: Any  # LockedServer
    package_id: str | None = None
    found_digest: str | None = None
    refs: dict[str, str] = field(default_factory=dict)  # key -> secret ref (never the value)


#: Smithery keeps no versions (registry_clients/smithery.py): its current entry is read and its
#: version, when it says one, compared with the file's.
_UNVERSIONED = ("smithery",)


async def _in_thread(fn: Any) -> Any:
    """Blocking terminal input in a daemon thread, as the terminal's questions are asked."""
    return await input_in_thread(fn, name="mcp-setup-apply-input")


class _Failed(Exception):
    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message, self.code = message, code


def run_apply(settings: Settings, args: argparse.Namespace, handler: logging.Handler) -> int:
    from setup_agent.setup import parse_lock

    path: Path = args.file
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        print(f"mcp-setup: no such file: {path}.", file=sys.stderr)
        return EXIT_NOT_FOUND
    except (OSError, UnicodeDecodeError) as exc:
        print(f"mcp-setup: cannot read {path}: {getattr(exc, 'strerror', None) or exc}.", file=sys.stderr)
        return EXIT_FAILED
    try:
        parsed = parse_lock(text)
    except SetupError as exc:
        print(f"mcp-setup: {path}: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    for problem in parsed.problems:
        _say(f"✗ {problem}", err=True)
    done: list[str] = []
    try:
        code = asyncio.run(_run(settings, handler, parsed.servers, done, len(parsed.problems)))
        return EXIT_FAILED if parsed.problems and code == 0 else code
    except (KeyboardInterrupt, EOFError):
        said = "Cancelled: nothing was installed."
        if done:
            said = f"Cancelled; installed before that, and kept: {', '.join(done)}."
        print(f"\n{said}", file=sys.stderr)
        return EXIT_CANCELLED
    except SetupError as exc:  # the store, the data key, config.toml: in the core's words
        print(f"mcp-setup: {exc.message}", file=sys.stderr)
        return EXIT_FAILED


async def _run(
    settings: Settings, handler: logging.Handler, entries: list[Any], done: list[str], unusable: int = 0
) -> int:
    from app.runtime import build_runtime
    from setup_agent.secrets import install_log_redaction

    runtime = build_runtime(settings)
    install_log_redaction(runtime.redactor, handler)
    try:
        return await _apply(runtime, entries, done, unusable)
    finally:
        await runtime.aclose()


def _say(text: str = "", *, err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout, flush=True)


async def _apply(runtime: Any, entries: list[Any], installed: list[str], unusable: int = 0) -> int:
    """Install what can be installed; each entry that cannot is said with why (``unusable``: the
    entries the file's reading left out, already said)."""
    failures: list[tuple[str, int]] = [("", EXIT_FAILED)] * unusable
    todo: list[_Plan] = []
    same = 0
    for entry in entries:
        try:
            plan = await _preflight(runtime, entry)
        except _Failed as exc:
            _say(f"✗ {runtime.redactor.redact(exc.message)}", err=True)
            failures.append((entry.qualified_name, exc.code))
            continue
        if plan is None:
            same += 1
            _say(f"= {_named(entry)} is already installed as the file says.")
        else:
            todo.append(plan)
    if todo:
        if not await _consent(runtime, todo):
            _say("Not approved: nothing was installed.", err=True)
            return EXIT_CANCELLED
        await _ask_secrets(runtime, todo)
        for plan in todo:
            try:
                await (_install_launch if plan.entry.from_launch else _install)(runtime, plan)
                installed.append(plan.entry.qualified_name)
            except (SetupError, _Failed) as exc:
                message = exc.message
                said = runtime.redactor.redact(message)
                _say(f"✗ {plan.entry.qualified_name}: {said} Nothing of it was installed.", err=True)
                failures.append((plan.entry.qualified_name, EXIT_FAILED))
    _say(f"{len(installed)} installed, {same} already installed identically, {len(failures)} failed.")
    return _exit(failures)


def _named(entry: Any) -> str:
    return f"{entry.qualified_name} {entry.version}" if entry.version else entry.qualified_name


def _exit(failures: list[tuple[str, int]]) -> int:
    if not failures:
        return 0
    return EXIT_NOT_FOUND if all(code == EXIT_NOT_FOUND for _, code in failures) else EXIT_FAILED


async def _preflight(runtime: Any, entry: Any) -> _Plan | None:
    """None when installed identically; a plan checked against the registry otherwise."""
    from setup_agent.setup import check_digest, differences

    name = entry.qualified_name
    existing = await asyncio.to_thread(runtime.store.servers.get_by_name, name)
    if existing is not None:
        here = await asyncio.to_thread(entry_for, runtime.store, existing)
        diff = differences(entry, here)
        if not diff:
            return None
        raise _Failed(
            f"{name} is installed here differently ({'; '.join(diff)}). To apply the file's: "
            f"mcp-setup remove {existing.slug}, then apply again."
        )
    if entry.oauth:
        raise _Failed(f"{name} signs in with OAuth, which apply cannot do for you: mcp-setup add {name}.")
    if entry.from_launch:  # nothing to look up: its launch is what the consent shows and what runs
        return _Plan(entry)
    if entry.registry not in runtime.hub.sources:
        raise _Failed(
            f"{name} comes from the registry {entry.registry!r}, which this mcp-setup does not search "
            f"(MCP_SETUP_REGISTRIES={','.join(runtime.hub.sources)}): add it there."
        )
    try:
        versioned = entry.version if entry.registry not in _UNVERSIONED else None
        detail = await runtime.hub.get(name, source=entry.registry, version=versioned)
    except RegistryNotFound:
        raise _Failed(f"{_named(entry)} is not in the registry {entry.registry} (any more).", EXIT_NOT_FOUND) from None
    except Exception as exc:  # noqa: BLE001 - in the core's words
        from setup_agent.translation import translate

        raise _Failed(f"{name}: the registry {entry.registry} could not be read ({translate(exc).message})") from None
    options = [p for p in detail.packages if p.type == entry.package_type]
    option = next((p for p in options if p.identifier == entry.identifier), None)
    if option is None:
        has = ", ".join(f"{p.type} {p.identifier}" for p in detail.packages) or "none"
        raise _Failed(
            f"{name} {entry.version}: the registry lists no {entry.package_type} package "
            f"{entry.identifier} (it lists: {has}).",
            EXIT_NOT_FOUND,
        )
    version = option.version or detail.version
    if entry.version and version and version != entry.version:
        raise _Failed(
            f"{name}: the registry {entry.registry} offers version {version}, the file {entry.version}.", EXIT_NOT_FOUND
        )
    from setup_agent.launch import build_spec

    try:  # where the registry says the package is now: what an install would fetch
        spec = build_spec(option)
    except SetupError:
        spec = entry.spec().model_copy(update={"version": option.version, "file_sha256": option.file_sha256})
    found = await runtime.service.installer.digests.resolve(spec, option.registry_base_url)
    try:
        check_digest(entry, found)
    except LockMismatch as exc:
        raise _Failed(exc.message) from None
    return _Plan(entry, package_id=option.id, found_digest=found)


def _warnings(entry: Any) -> list[str]:
    from setup_agent.launch import argv_secret_keys

    keys = argv_secret_keys(entry.spec(), set(entry.secrets))
    if not keys:
        return []
    return [
        f"argv_secret: {entry.qualified_name} takes {', '.join(keys)} on its command line, where other users "
        "of this computer can see it (for example with ps) while it runs."
    ]


def _request(entry: Any, mechanism: str) -> Any:
    """The consent request of one entry, as an install of it would build it (templates, no value)."""
    from registry_clients.models import RequiredKey
    from setup_agent.setup import build_consent_request

    keys = [RequiredKey(name=k, secret=True) for k in entry.secrets] + [RequiredKey(name=k) for k in entry.settings]
    return build_consent_request(
        server=entry.qualified_name,
        version=entry.version,
        spec=entry.spec(),
        keys=keys,
        values=entry.settings,
        action="install",
        sandbox=mechanism,
        user_home=str(Path.home()),
    )


async def _consent(runtime: Any, todo: list[_Plan]) -> bool:
    """The whole file, shown once; the user's yes or no (True when consent is off)."""
    from app.pages import consent_lines
    from setup_agent.launch import digest_kind

    if runtime.consents is None or not runtime.consents.ask:
        _say(f"Installing {len(todo)} server(s) without asking (MCP_SETUP_CONSENT=never-ask).")
        return True
    mechanism = runtime.prober.sandbox.mechanism if runtime.prober.sandbox is not None else "none"
    _say(f"mcp-setup needs your approval to install {len(todo)} server(s) from this lock file:")
    warnings: list[str] = []
    for plan in todo:
        e = plan.entry
        where = f"the registry {e.registry}" if not e.from_launch else f"its own launch command ({e.source})"
        _say(f"\n  {_named(e)} from {where}")
        for line in consent_lines(_request(e, mechanism))[2:]:  # the sections `add`'s consent shows
            _say(f"    {line}")
        if not e.from_launch:
            digest = e.digest or f"not in the file; the registry's now: {plan.found_digest or 'none'}"
            _say(f"    Artifact: {digest_kind(e.package_type)} {digest}")
        for k, v in sorted(e.settings.items()):
            _say(f"    Setting {k}: {v}")
        if e.secrets:
            _say(f"    Asked next (hidden): {', '.join(e.secrets)}")
        tools = sorted(e.tools)
        listed = ", ".join(tools) if tools else "not recorded in the file (any list is taken)"
        _say(f"    Tools ({len(tools)}): {listed}")
        if e.left_out:  # unticked where the file was written: left out here too
            _say(f"    Left out: {', '.join(e.left_out)}")
        warnings += _warnings(e)

    def ask() -> bool:
        if warnings:
            print("Warnings:", flush=True)
            for w in warnings:
                print(f"  ! {w}", flush=True)
            if input('Type "accept" to accept these warnings: ').strip().lower() != "accept":
                return False
        while True:
            answer = input(f"\nInstall these {len(todo)} server(s)? [y/N]: ").strip().lower()
            if answer in ("n", "no", ""):
                return False
            if answer in ("y", "yes"):
                return True

    try:
        return await _in_thread(ask)
    except EOFError:
        return False


async def _ask_secrets(runtime: Any, todo: list[_Plan]) -> None:
    """Each secret slot at a hidden prompt; the value becomes a ref at once (the redactor knows it
    from then on) and only the ref is kept."""
    for plan in todo:
        for key in plan.entry.secrets:
            prompt = f"{key} for {plan.entry.qualified_name} (hidden): "
            while True:
                value = await _in_thread(functools.partial(getpass.getpass, prompt))
                if value:
                    break
                print(f"{key} is needed; type its value (Ctrl-C cancels).", flush=True)
            plan.refs[key] = runtime.refs.mint(key, value)
            del value


async def _install(runtime: Any, plan: _Plan) -> None:
    from setup_agent.setup import CallContext, InstallRequest, check_launch, check_tools

    entry = plan.entry
    env_refs = dict(plan.refs)
    seen: dict[str, Any] = {}

    async def check_prepared(prepared: Any) -> None:
        from setup_agent.setup import check_digest

        check_launch(entry, prepared.spec)
        digests = runtime.service.installer.digests
        check_digest(entry, await digests.resolve(prepared.spec, prepared.package.registry_base_url))
        seen["prepared"] = prepared

    async def tools_as_filed(tools: list[dict[str, Any]]) -> None:
        check_tools(entry, tools)

    async def present_consent(pending: Any) -> dict:
        """The file was approved as a whole: this server's consent is answered from it, when it matches."""
        request, prepared = pending.request, seen.get("prepared")
        shown = {w.split(":", 1)[0] for w in _warnings(entry)}
        if prepared is None or any(w.code not in shown for w in request.warnings):
            runtime.consents.deny(pending.consent_id, "not what the lock file showed", by="user:terminal")
            return {}
        extra = [g for g in entry.grants if g not in prepared.spec.sandbox_grants]
        sandbox = {"extra_paths": extra, "network": entry.network} if extra or not entry.network else None
        values = {d.name: entry.settings.get(d.name) or d.suggested for d in request.destinations}
        runtime.consents.approve(
            pending.consent_id, values, accept_warnings=bool(request.warnings), by="user:terminal", sandbox=sandbox
        )
        return {}

    ctx = CallContext(
        installed_by="cli",
        principal="user:terminal",
        present_consent=present_consent,
        check_prepared=check_prepared,
        check_tools=tools_as_filed,
        left_out=frozenset(entry.left_out),
    )
    request = InstallRequest.parse(
        {
            "qualified_name": entry.qualified_name,
            "source": entry.registry,
            "env_refs": env_refs,
            "env": dict(entry.settings),
            **({"version": entry.version} if entry.version and entry.registry not in _UNVERSIONED else {}),
            **({"package": plan.package_id} if plan.package_id else {}),
        }
    )
    _say(f"· installing {_named(entry)}: test-connecting…")
    result = await runtime.service.install_and_connect(request, ctx)
    server = await asyncio.to_thread(runtime.store.servers.get, result["server_id"])
    if not entry.enabled and server is not None:
        await asyncio.to_thread(runtime.store.servers.set_enabled, server.server_id, False, actor="cli")
    slug = server.slug if server is not None else result["server_id"]
    state = "installed, disabled as in the file" if not entry.enabled else f"installed, {result.get('status')}"
    _say(f"✓ {_named(entry)} {state} ({len(result.get('tools') or [])} tools) as {slug}")


async def _install_launch(runtime: Any, plan: _Plan) -> None:
    """A launch-spec entry (imported, hand-made): test its launch with the file's settings and the
    typed secrets (in the child's environment only), check the tool list against the file's,
    then install it in one transaction, its source kept, and connect it."""
    import secrets as _random

    from setup_agent.secrets import SecretValue
    from setup_agent.setup import check_tools

    entry = plan.entry
    spec = entry.spec()
    secret_values: dict[str, SecretValue] = runtime.refs.resolve(plan.refs)
    values: dict[str, Any] = {**entry.settings, **secret_values}
    _say(f"· installing {_named(entry)}: test-connecting…")
    result = await runtime.prober.probe(spec, values)
    check_tools(entry, result.tools)
    server_id = "srv_" + _random.token_hex(6)
    runtime.connections.expect(server_id)  # a store sync must not start it before it is connected here
    try:
        server = await asyncio.to_thread(
            runtime.store.servers.install,
            server_id=server_id,
            qualified_name=entry.qualified_name,
            source=entry.source,
            version=entry.version,
            package_type=entry.package_type,
            launch_spec=spec.model_dump(mode="json"),
            installed_by="cli",
            tools_hash=result.tools_hash,
            env={
                **{k: (v, False) for k, v in entry.settings.items()},
                **{k: (v, True) for k, v in secret_values.items()},
            },
            title=entry.title,
            tools=result.tools,
            hidden_tools=sorted(entry.left_out),
        )
    except BaseException:
        runtime.connections.expect(server_id, False)
        raise
    runtime.refs.consume(plan.refs)
    if not entry.enabled:
        await asyncio.to_thread(runtime.store.servers.set_enabled, server.server_id, False, actor="cli")
        runtime.connections.expect(server_id, False)
        _say(f"✓ {_named(entry)} installed, disabled as in the file ({len(result.tools)} tools) as {server.slug}")
        return
    status = await runtime.connections.connect(server)
    shown = [t for t in result.tools if t.get("name") not in entry.left_out]
    _say(f"✓ {_named(entry)} installed, {status.status} ({len(shown)} tools) as {server.slug}")
