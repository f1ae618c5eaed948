"""The ``guided`` driver: a deterministic setup conversation over the same tools, no model.

goal → search → pick (clear best match, or ask among the top few) → get → ask non-secret
values / request secrets → test → on failure (recovery.py): re-enter the value the error points
at, try again or read the log after a crash, try another package, or cancel → install →
summary of the tools now available.

A remote that answers ``oauth_required`` (or ``needs_sign_in``) is signed in to with ``mcp_setup_authorize``:
the face shows the user the sign-in box (host, scopes, link); when it does not wait, the user says Done once
signed in. The test and the install then carry the ref as ``oauth_ref`` (the driver never sees a token).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..harness import AgentCancelled, AgentSession, installed_summary
from .recovery import CANCEL, on_failure

__all__ = ["GuidedDriver", "goal_query", "name_matches"]

NONE_OF_THESE = "None of these"
MAX_CHOICES = 5

_FILLER_PHRASES = (
    "i would like to",
    "i'd like to",
    "i want to",
    "can you",
    "could you",
    "would you",
    "help me",
    "set up",
    "setup",
    "hook up",
    "mcp servers",
    "mcp server",
    "for me",
    "please",
)
_FILLER_WORDS = {
    "a",
    "an",
    "the",
    "my",
    "our",
    "me",
    "to",
    "for",
    "with",
    "and",
    "of",
    "on",
    "in",
    "up",
    "it",
    "install",
    "add",
    "configure",
    "connect",
    "enable",
    "get",
    "use",
    "using",
    "want",
    "need",
    "mcp",
    "server",
    "servers",
    "integration",
    "tool",
    "tools",
    "plugin",
    "new",
    "one",
    "some",
}
# Codes where re-entering a value cannot help.

# Codes answered by signing in (mcp_setup_authorize), not by re-entering a value.
_SIGN_IN = {"oauth_required", "needs_sign_in"}
# A failed secret prompt is offered again only for these: the prompt itself went wrong (the
# face could not show it, it was lost or timed out). Any other code (already_installed,
# invalid_input, not_found…) comes back the same on every retry, so the run stops instead.
_PROMPT_RETRYABLE = {"prompt_failed", "prompt_not_found", "secret_expired", "timeout"}


class _Stop(Exception):
    """The run ends now with this summary (nothing was installed): retrying cannot help."""


def goal_query(goal: str) -> str:
    """The search words in a goal: "set up the Notion MCP server for me" → "notion"."""
    text = " " + re.sub(r"[^\w\s./@-]+", " ", goal.lower()) + " "
    for phrase in _FILLER_PHRASES:
        text = text.replace(f" {phrase} ", " ")
    words = [w.strip(".") for w in text.split()]
    return " ".join(w for w in words if w and w not in _FILLER_WORDS and "withheld" not in w)


def _norm(text: str) -> str:
    parts = re.split(r"[^a-z0-9]+", text.lower())
    return "".join(p for p in parts if p and p not in ("mcp", "server", "servers"))


def name_matches(query: str, server: dict[str, Any]) -> bool:
    """True when ``query`` names ``server`` (exactly, or but for words like "mcp"/"server")."""
    q = _norm(query)
    qn = server.get("qualified_name", "")
    names = {qn, qn.rsplit("/", 1)[-1], server.get("display_name", "")}
    return bool(q) and q in {_norm(n) for n in names if n}


class GuidedDriver:
    """Deterministic policy; all talk and all tools go through the session."""

    def __init__(self, *, archetype: Any = None, options: dict | None = None, redactor: Any = None) -> None:
        self.options = dict(options or {})

    async def run(self, s: AgentSession) -> str:
        server = await self._find(s)
        if server is None:
            return "Nothing was installed: no server was chosen."
        try:
            return await self._setup(s, server)
        except _Stop as stop:
            return str(stop)

    # -- chat helpers ---------------------------------------------------------------------
    @staticmethod
    async def _say(s: AgentSession, text: str) -> None:
        await s.call("say", {"text": text})

    @staticmethod
    async def _ask(s: AgentSession, question: str, choices: list[str] | None = None) -> str | None:
        """The answer, or None when the harness withheld it (it looked like a secret)."""
        args: dict[str, Any] = {"question": question}
        if choices:
            args["choices"] = choices
        result = await s.call("ask_user", args)
        if result.get("ok") is False:
            return None
        return str(result.get("answer", "")).strip()

    async def _choose(self, s: AgentSession, question: str, choices: list[str]) -> str:
        """One of ``choices`` (by text or number); asks again until it gets one."""
        while True:
            answer = await self._ask(s, question, choices)
            if answer is not None:
                if answer.isdigit() and 1 <= int(answer) <= len(choices):
                    return choices[int(answer) - 1]
                for choice in choices:
                    if answer.lower() == choice.lower():
                        return choice
            question = "Please pick one of the choices."

    # -- finding the server ---------------------------------------------------------------
    async def _find(self, s: AgentSession) -> dict[str, Any] | None:
        query = goal_query(s.goal)
        while True:
            if not query:
                answer = await self._ask(s, "Which MCP server would you like to set up? (e.g. notion, github)")
                query = goal_query(answer or "")
                if not query:
                    return None
            servers, unreachable = await self._search(s, query)
            s.found(bool(servers))
            if servers:
                chosen = await self._pick(s, query, servers)
                if chosen is not None:
                    return chosen
            elif unreachable:
                where = " and ".join(sorted(unreachable))
                await self._say(
                    s,
                    f"I found no MCP server matching “{query}” in the registries that answered "
                    f"(not the {where} registry, which could not be searched).",
                )
            else:
                await self._say(s, f"I found no MCP server matching “{query}”.")
            answer = await self._ask(s, "Type another name to search for, or press Enter to stop.")
            query = goal_query(answer or "")
            if not query:
                return None

    async def _search(self, s: AgentSession, query: str) -> tuple[list[dict[str, Any]], set[str]]:
        """The servers found for ``query``, and the registries that could not be searched."""
        words = sorted({w for w in query.split() if len(w) > 1}, key=lambda w: (-len(w), w)) if " " in query else []
        queries = [query, *words]  # a multi-word query that finds nothing: each word, longest first
        found: dict[tuple[str, str], dict[str, Any]] = {}
        told: set[str] = set()  # each registry's failure is said once per search
        for q in queries:
            result = await s.call("mcp_setup_search", {"query": q, "page_size": 10})
            if result.get("ok") is False:
                await self._say(s, f"Searching failed: {result['error']['message']}")
                return [], set()
            for err in result.get("errors") or []:
                if str(err.get("message", "")).startswith("skipped"):
                    continue  # not configured (Smithery without a key): normal, not a failure to report
                if err.get("source") not in told:
                    told.add(err.get("source"))
                    await self._say(s, f"The {err.get('source')} registry could not be searched: {err.get('message')}")
            for server in result.get("servers") or []:
                found.setdefault((server.get("source", ""), server["qualified_name"]), server)
            if found:
                break
        return list(found.values()), {str(source) for source in told}

    async def _pick(self, s: AgentSession, query: str, servers: list[dict[str, Any]]) -> dict[str, Any] | None:
        exact = [sv for sv in servers if name_matches(query, sv)]
        if len(exact) == 1:
            return exact[0]
        if len(servers) == 1:
            return servers[0]
        top = (exact or servers)[:MAX_CHOICES]
        labels = []
        for sv in top:
            desc = (sv.get("description") or "").strip().split("\n")[0][:90]
            label = f"{sv['qualified_name']} ({sv.get('source', '?')})" + (f": {desc}" if desc else "")
            labels.append(label)
        answer = await self._choose(
            s, f"I found several servers for “{query}”. Which one do you mean?", [*labels, NONE_OF_THESE]
        )
        return None if answer == NONE_OF_THESE else top[labels.index(answer)]

    # -- setting it up --------------------------------------------------------------------
    async def _setup(self, s: AgentSession, server: dict[str, Any]) -> str:
        name = server["qualified_name"]
        base: dict[str, Any] = {"qualified_name": name}
        if server.get("source"):
            base["source"] = server["source"]
        await self._say(s, f"Setting up {name}.")
        detail = await s.call("mcp_setup_get", dict(base))
        if detail.get("ok") is False:
            message = detail["error"]["message"]
            await self._say(s, f"I could not read the details of {name}: {message}")
            return f"Nothing was installed: {message}"
        if detail.get("installed"):  # before asking for anything
            await self._already_installed(
                s, name, {"details": {"server_id": detail.get("server_id")}}, detail.get("installed_as")
            )
        keys: list[dict[str, Any]] = detail.get("required_env_keys") or []
        available = [p["id"] for p in detail.get("packages") or [] if p.get("available")]
        if not available:
            reasons = "; ".join(p.get("reason", p["id"]) for p in detail.get("packages") or []) or "it lists no package"
            await self._say(s, f"{name} cannot run on this machine yet: {reasons}.")
            return f"Nothing was installed: {name} cannot run here ({reasons})."
        env: dict[str, str] = {}
        env_refs: dict[str, str] = {}
        for key in keys:
            if key.get("required"):
                await self._collect(s, name, key, env, env_refs)
        # An optional secret (an API key for more requests, say) is offered, one question each:
        # the install leaves out what is unset, so it could not be added later. Other optional
        # settings keep the server's own defaults.
        skipped = []
        for key in keys:
            if key.get("required") or key.get("provided"):
                continue
            if key.get("secret"):
                what = (key.get("description") or "").strip().rstrip(".")
                question = (
                    f"{name} can also use {key['name']}"
                    + (f" ({what})" if what else "")
                    + ". It is optional. Set it now?"
                )
                if await self._choose(s, question, ["No", "Yes"]) == "Yes":
                    await self._collect(s, name, key, env, env_refs)
                    continue
            if key.get("default") is None:  # one with a default is not unset: the core fills it in
                skipped.append(key["name"])
        if skipped:
            await self._say(s, f"Optional settings left unset: {', '.join(skipped)}.")
        package: str | None = None
        # (package, inputs) -> error code of each failed test: an option is never
        # tried again with the same inputs; when none is left, the run stops with a summary.
        failed: dict[tuple[str, str], str] = {}
        oauth_ref: str | None = None
        signed_in = 0  # sign-ins made this run: a second refusal after one is a failure, not a loop
        while True:
            args = {**base, "env": dict(env), "env_refs": dict(env_refs)}
            if package:
                args["package"] = package
            if oauth_ref:
                args["oauth_ref"] = oauth_ref
            tested = await s.call("mcp_setup_test_connection", args)
            if tested.get("ok") is not False:
                break
            code = tested["error"].get("code")
            if code == "already_installed":
                await self._already_installed(s, name, tested["error"])
            if code == "consent_denied":  # the user's own choice: said in their words, and not retried
                await self._say(s, "You did not allow running it, so nothing was run.")
                return f"Nothing was installed: the user did not allow running {name}."
            if code in _SIGN_IN and signed_in < 2:
                signed_in += 1
                oauth_ref = await self._sign_in(s, name, {**args, "env_refs": dict(env_refs)})
                continue
            inputs = json.dumps([env, env_refs], sort_keys=True)
            failed[(package or detail.get("package") or available[0], inputs)] = tested["error"].get("code", "")
            untried = [p for p in available if (p, inputs) not in failed]
            action = await on_failure(self, s, tested["error"], keys, env_refs, untried, package)
            if action is None:
                if len(failed) > 1:
                    summary = ", ".join(f"{p} ({code})" for (p, _), code in failed.items())
                    await self._say(s, f"Every option failed: {summary}.")
                    return f"Nothing was installed: every option failed ({summary})."
                return f"Nothing was installed: {tested['error']['message']}"
            kind, value = action
            if kind == "retry":  # the same settings once more (a flaky start)
                continue
            if kind == "package":
                package = value
            else:
                key = next(k for k in keys if k["name"] == value)
                env.pop(value, None)
                env_refs.pop(value, None)
                await self._collect(s, name, key, env, env_refs)
        installed = await s.call("mcp_setup_install_and_connect", args)
        if installed.get("ok") is False:
            message = installed["error"]["message"]
            await self._say(s, f"Installing {name} failed: {message}")
            return f"Nothing was installed: {message}"
        return installed_summary({**installed, "qualified_name": name})  # the face shows the summary

    async def _collect(
        self, s: AgentSession, server: str, key: dict[str, Any], env: dict[str, str], env_refs: dict[str, str]
    ) -> None:
        name = key["name"]
        if key.get("secret"):
            env_refs[name] = await self._secret(s, server, key)
            return
        default, choices = key.get("default"), key.get("choices")
        question = f"{name}: {key.get('description') or 'a setting of ' + server}"
        if default is not None:
            question += f" (press Enter for {default})"
        while True:
            answer = await self._ask(s, question, choices or None)
            if answer is None:
                await self._say(s, f"I'll ask for {name} through the hidden secret prompt instead.")
                env_refs[name] = await self._secret(s, server, key)
                return
            if answer:
                env[name] = answer
                return
            if default is not None:
                return  # the core fills in the default
            question = f"{name} is required. Please enter a value."

    async def _secret(self, s: AgentSession, server: str, key: dict[str, Any]) -> str:
        name = key["name"]
        # What the setting is; each face says in its own words how the value is kept.
        prompt = key.get("description") or f"The {name} setting of {server}."
        while True:
            result = await s.call("mcp_setup_request_secret", {"key_name": name, "prompt": prompt, "server": server})
            if result.get("ok") is False:
                code = result["error"].get("code")
                if code == "prompt_cancelled":
                    raise AgentCancelled(result["error"]["message"])
                if code == "already_installed":
                    await self._already_installed(s, server, result["error"])
                if code not in _PROMPT_RETRYABLE:  # the same answer would come back: no retry menu
                    await self._say(s, f"The secret prompt for {name} failed: {result['error']['message']}")
                    raise _Stop(f"Nothing was installed: {result['error']['message']}")
                await self._say(s, f"The secret prompt for {name} failed: {result['error']['message']}")
                if await self._choose(s, f"Try {name} again?", ["Try again", CANCEL]) == CANCEL:
                    raise AgentCancelled("cancelled by the user")
                continue
            if result.get("status") == "pending":
                where = f" at {result['url']}" if result.get("url") else ""
                await self._say(s, f"Please enter {name}{where}; it never goes through this chat.")
                if await self._choose(s, f"Choose Done once you have entered {name}.", ["Done", CANCEL]) == CANCEL:
                    raise AgentCancelled("cancelled by the user")
            return result["ref"]

    async def _already_installed(
        self, s: AgentSession, server: str, error: dict[str, Any], slug: str | None = None
    ) -> None:
        """Say so in the driver's own words (the core's never echo the name) and stop."""
        if slug:
            text = (
                f'{server} is already installed as "{slug}". To install it again, remove it first (the Remove '
                f"button in the list of installed servers, or mcp-setup remove {slug}); or keep using it."
            )
        else:
            sid = (error.get("details") or {}).get("server_id")
            text = (
                f"{server} is already installed"
                + (f" (server id {sid})" if sid else "")
                + ". Remove it first to install it again, or keep using it."
            )
        await self._say(s, text)
        raise _Stop(text)

    async def _sign_in(self, s: AgentSession, server: str, args: dict[str, Any]) -> str:
        """Sign in to ``server`` with ``mcp_setup_authorize``; the ref to pass as ``oauth_ref``."""
        await self._say(s, f"{server} signs in with your account (OAuth). I'll open its sign-in for you.")
        wanted = {k: args[k] for k in ("qualified_name", "source", "package", "env", "env_refs") if args.get(k)}
        while True:
            result = await s.call("mcp_setup_authorize", wanted)
            if result.get("ok") is False:
                await self._say(s, f"Signing in to {server} failed: {result['error']['message']}")
                if await self._choose(s, f"Try signing in to {server} again?", ["Try again", CANCEL]) == CANCEL:
                    raise AgentCancelled("cancelled by the user")
                continue
            if result.get("status") == "pending":
                where = f" at {result['url']}" if result.get("url") else ""
                await self._say(s, f"Please sign in to {server}{where}; your sign-in never goes through this chat.")
                if (
                    await self._choose(s, f"Choose Done once you have signed in to {server}.", ["Done", CANCEL])
                    == CANCEL
                ):
                    raise AgentCancelled("cancelled by the user")
            else:
                await self._say(s, f"Signed in to {server}.")
            return str(result["ref"])
