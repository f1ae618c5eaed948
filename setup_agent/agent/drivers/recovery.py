"""What the guided driver offers after a failed connection test.

* **Re-enter KEY** only when a key can be what went wrong: the server refused the settings
  (``rejected``), or the error names the key; never for a crash that does not name one, a
  timeout or an unreachable server (typing the key again does not fix those).
* **Try again** and **Show the log** after a crash (``exited``): a start can fail once; the
  log is the server's last output, already redacted by the probe (``details.stderr_tail``).
* **Try the X package instead** for each package not tried yet with these settings.

A download that failed is said by its step (the page's row, the terminal's line) and by the run's
summary: the driver says it again only before asking what to do.
"""

from __future__ import annotations

import re
from typing import Any

from ..harness import AgentCancelled, AgentSession

__all__ = ["CANCEL", "SHOW_LOG", "TRY_AGAIN", "on_failure", "pointed_key"]

CANCEL = "Cancel"
TRY_AGAIN = "Try again"
SHOW_LOG = "Show the log"

# Codes a typed value cannot cause: no "Re-enter KEY" for these.
_NOT_A_VALUE = {
    "runtime_missing",
    "command_not_found",
    "no_runnable_package",
    "package_not_found",
    "bundle_invalid",
    "not_found",
    "registry_unavailable",
    "registry_auth",
    "already_installed",
    "store_error",
    "internal",
    "consent_required",
    "consent_denied",
    "timeout",
    "unreachable",
    "protocol_error",
    "oauth_required",
    "needs_sign_in",
    "oauth_refused",
    "oauth_denied",
    "oauth_error",
    "download_failed",
    "download_timeout",
}
#: The package did not arrive: the message names it, the registry and why.
_DOWNLOAD = {"download_failed", "download_timeout"}
#: A crash: it may start the next time, and its log says why it did not.
_CRASH = {"exited"}


def pointed_key(error: dict[str, Any], keys: list[dict[str, Any]], env_refs: dict[str, str]) -> str | None:
    """The setting an error points at: its ``key``, a key named in the message, or (when the
    server refused the settings) the only secret."""
    if error.get("code") in _NOT_A_VALUE:
        return None
    names = [k["name"] for k in keys]
    if error.get("key") in names:
        return error["key"]
    message = error.get("message", "")
    for name in names:
        if re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message):
            return name
    if error.get("code") in _CRASH:  # it crashed without naming a key: the key is not the suspect
        return None
    secrets = [k["name"] for k in keys if k.get("secret") and k["name"] in env_refs]
    return secrets[0] if len(secrets) == 1 else None


async def on_failure(
    driver: Any,
    s: AgentSession,
    error: dict[str, Any],
    keys: list[dict[str, Any]],
    env_refs: dict[str, str],
    available: list[str],
    package: str | None,
) -> tuple[str, str] | None:
    """Explain ``error``; ("key", NAME), ("package", ID), ("retry", ""), None (give up) or raises cancel."""
    code, message = error.get("code", ""), error.get("message", "")
    if code == "runtime_missing":
        await driver._say(s, f"This server cannot start here yet. {message}")
    elif code in _DOWNLOAD:
        pass  # the failed step says it, and the run's summary; said below only before a question
    else:
        await driver._say(s, f"The connection test failed. {message}")
    choices: list[str] = []
    key = pointed_key(error, keys, env_refs)
    if key:
        choices.append(f"Re-enter {key}")
    log = str((error.get("details") or {}).get("stderr_tail") or "").strip()
    if code in _CRASH:
        choices += [TRY_AGAIN] + ([SHOW_LOG] if log else [])
    packages = [f"Try the {p} package instead" for p in available if p != package]
    choices += packages
    if not choices:
        return None
    if code in _DOWNLOAD:
        await driver._say(s, message)  # what could not be downloaded, from where, and why
    while True:
        answer = await driver._choose(s, "What would you like to do?", [*choices, CANCEL])
        if answer == SHOW_LOG:  # said, then asked again without it
            await driver._say(s, "The server's last output (secrets hidden):\n" + log[-2000:])
            choices.remove(SHOW_LOG)
            continue
        break
    if answer == CANCEL:
        raise AgentCancelled("cancelled by the user")
    if answer == TRY_AGAIN:
        return ("retry", "")
    if key and answer == f"Re-enter {key}":
        return ("key", key)
    return ("package", available[[f"Try the {p} package instead" for p in available].index(answer)])
