"""``mcp-setup import CLIENT``: plain-text keys out of a client's config, into the vault.

For each entry (not already ours) whose ``env`` holds literal secret-looking values
(:func:`app.clients.looks_secret`): ask per key, at a hidden prompt, whether to move it;
test the server with its current command and env (values in the child's environment only);
install it under the entry's name (secret values encrypted, the launch spec holding only
``${KEY}``); and rewrite the entry to ``mcp-setup run SLUG``. One file write at the end,
after a backup. An entry whose test fails, or with a key the user keeps, stays as it was.
Literal secrets in ``args`` or ``headers`` are reported, not moved (they need a template the
server understands). At the end, every setting and file that still holds a plain-text secret
is listed with why (kept by the user, its test failed, in args or headers, the backup). A
symlinked config is written through to its target.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from app.clients import GATEWAY_ENTRY, ClientConfig, entry_for, is_ours, looks_secret, secret_reason
from app.settings import Settings
from setup_agent.errors import SetupError
from setup_agent.launch import LaunchSpec, Value
from setup_agent.secrets import SecretValue

__all__ = ["run_import"]


def _confirm(name: str, key: str) -> bool:
    """A visible y/n (the question is no secret; the value is never shown)."""
    try:
        answer = input(f"Move {name}'s {key} into mcp-setup's vault? [y/N]: ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def run_import(
    settings: Settings,
    args: argparse.Namespace,
    handler: logging.Handler,
    config: ClientConfig,
    launcher: list[str],
    launcher_env: dict[str, str],
) -> int:
    from .servers import _with_runtime

    if not config.path.exists():
        print(
            f"{config.path}: not there, so nothing to import ({config.client} keeps its MCP servers in that "
            "file; --config FILE reads another one)."
        )
        return 0
    found: list[tuple[str, dict[str, Any], dict[str, str], set[str]]] = []
    plain: list[str] = []  # what stays in plain text, and why
    for name, entry in config.servers().items():
        if is_ours(entry, launcher) or not entry.get("command"):
            continue
        env = {k: v for k, v in (entry.get("env") or {}).items() if isinstance(v, str)}
        secret = {k for k, v in env.items() if looks_secret(k, v)}
        loose = [a for a in entry.get("args") or [] if looks_secret("arg", a)]
        if loose or any(looks_secret(k, v) for k, v in (entry.get("headers") or {}).items()):
            print(f"{name}: a secret-looking value is in its args or headers; move it by hand (not changed).")
            plain.append(f"{name}: a value in its args or headers (mcp-setup cannot move it: move it by hand)")
        if secret:
            found.append((name, entry, env, secret))
    if found:  # what was found, before anything is asked
        print(f"In {config.path}, {len(found)} server entr{'y' if len(found) == 1 else 'ies'} with plain-text keys:")
        for name, _, env, secret in found:
            print(f"  {name}: " + ", ".join(f"{k} ({secret_reason(k, env[k])})" for k in sorted(secret)))
    plans: list[tuple[str, dict[str, Any], set[str]]] = []
    for name, entry, env, secret in found:
        if all(args.yes or _confirm(name, key) for key in sorted(secret)):
            plans.append((name, {**entry, "env": env}, secret))
        else:
            print(f"{name}: kept as it is.")
            plain += [f"{name}: {key} ({secret_reason(key, env[key])}; you kept it)" for key in sorted(secret)]
    if not plans:
        print(f"{config.path}: nothing to import.")
        _report(plain)
        return 0

    async def body(runtime: Any) -> dict[str, str]:
        done: dict[str, str] = {}
        for name, entry, secret in plans:
            try:
                done[name] = await _install(runtime, config.client, name, entry, secret)
            except SetupError as exc:
                print(f"{name}: not imported: {exc.message}")
                plain.extend(f"{name}: {key} (not imported: its test failed)" for key in sorted(secret))
        return done

    done = _with_runtime(settings, handler, body)
    if not done:
        _report(plain)
        return 1
    edit, how = _rewrite(config, done, launcher, launcher_env, per_server=getattr(args, "per_server", False))
    target = edit.target()
    backup = edit.write()
    through = f" (through the link {config.path})" if target != config.path else ""
    print(f"Imported {', '.join(done)}; {target}{through} now {how}.")
    if backup is not None:
        plain.append(f"{backup}: the old file's copy, readable by you only (delete it when done)")
    _report(plain)
    return 0 if len(done) == len(plans) else 1


def _rewrite(
    config: ClientConfig, done: dict[str, str], launcher: list[str], env: dict[str, str], *, per_server: bool
) -> tuple[Any, str]:
    """One name per tool: through the gateway entry, their old entries removed (the
    gateway lists their tools already); or, ``per_server``, one ``run SLUG`` entry each and no gateway entry."""
    ours = {n: e for n, e in config.servers().items() if is_ours(e, launcher)}
    if per_server:
        gateways = tuple(n for n, e in ours.items() if (e.get("args") or [])[-1:] == ["mcp"])
        entries = {n: entry_for(config.client, [*launcher, "run", slug], env) for n, slug in done.items()}
        return config.set_entries(entries, remove=gateways), "runs each of them with `mcp-setup run`"
    entries = {GATEWAY_ENTRY: entry_for(config.client, [*launcher, "mcp"], env)}
    names = ", ".join(f"{slug}__…" for slug in done.values())
    return config.set_entries(entries, remove=tuple(done)), f"reaches them through its {GATEWAY_ENTRY} entry ({names})"


def _report(plain: list[str]) -> None:
    """Every file or setting that still holds a plain-text secret, and why."""
    if plain:
        print("Still in plain text:\n" + "\n".join(f"  {line}" for line in plain))


async def _install(runtime: Any, client: str, name: str, entry: dict[str, Any], secret: set[str]) -> str:
    # A secret read from the client's file is masked from here on; the launch reveals it.
    env: dict[str, Value] = {k: SecretValue(v) if k in secret else v for k, v in entry["env"].items()}
    for key in secret:
        runtime.redactor.register(env[key], f"[secret:{key}]")
    spec = LaunchSpec(
        command=str(entry["command"]),
        args=[str(a) for a in entry.get("args") or []],
        env={k: "${" + k + "}" for k in env},
    )
    result = await runtime.prober.probe(spec, env)
    server = await asyncio.to_thread(
        runtime.store.servers.install,
        qualified_name=name,
        source=f"import:{client}",
        version=None,
        package_type="stdio",
        launch_spec=spec.model_dump(mode="json"),
        installed_by=f"import:{client}",
        tools_hash=result.tools_hash,
        env={k: (v, k in secret) for k, v in env.items()},
        tools=result.tools,
    )
    print(f"{name}: tested ({len(result.tools)} tools) and installed as {server.slug}.")
    return server.slug
