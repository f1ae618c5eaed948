"""OAuth sign-in for remote servers: the browser step out of band, tokens only in the core.

:class:`SignIns` runs ``mcp_setup_authorize``: the SDK's ``OAuthClientProvider`` discovers the
protected-resource and authorization-server metadata, registers a client (dynamic
registration, or a configured client id), and builds the authorization request with PKCE and
the RFC 8707 ``resource``. Before the browser step, :meth:`SignIns._check` refuses metadata
whose endpoints leave the authorization server's origin (so codes and tokens go to the one
host the user is shown) and a non-https server off loopback; the face then shows the user the
authorization server's host, the scopes and the link. The redirect is caught on loopback by a
:class:`~setup_agent.oauth.callback.CallbackListener` that checks ``state``; for a team's
replicas (PostgreSQL and a public host) it comes to ``/oauth/callback`` on any replica, which
redeems the code itself (:mod:`setup_agent.oauth.shared_exchange`: the authorization-code step
is ours there, its PKCE verifier stored encrypted with the sign-in). The tokens become
a :class:`Grant` held behind a ref (``secret://…``) bound to that server's key
(:meth:`SignIns.key_for`): the agent never sees a token.

The grant and the auth that uses it live in :mod:`setup_agent.oauth.grant`; :class:`SignIns`
makes a :class:`GrantAuth` from a ref (test, install) or from an installed server's stored grant
(the connection manager's ``auth_for`` hook, which stores renewed grants). Every token is handed
to the redactor as soon as it exists.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from setup_agent.errors import OAuthError, OAuthRefused, SecretError, SecretPending, SecretWrongKey, SetupError
from setup_agent.secrets import Redactor, SecretRefStore, SecretValue

from .callback import CallbackListener
from .checks import CheckedTransport, check_endpoint, check_issuer, translate
from .grant import GRANT_KEY, Grant, GrantAuth, host_of, origin
from .shared_callback import SharedCallback, callback_answer
from .shared_exchange import ExchangedElsewhere, SharedProvider, finish_exchange

if TYPE_CHECKING:
    from setup_agent.store import SharedSignIns

__all__ = ["GRANT_KEY", "Grant", "GrantAuth", "Presenter", "SignIns", "origin"]

logger = logging.getLogger(__name__)

#: ``await present(info)``: show ``info`` (server, url, authorization_server, scopes, message) to
#: the user; return ``{"status": "pending"}`` when the face does not wait for the sign-in.
Presenter = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "mcp-setup", "version": "0.1.0"},
    },
}


class _Storage:
    """The SDK's ``TokenStorage`` for one sign-in, in memory."""

    def __init__(self, client_info: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class SignIns:
    """Runs sign-ins and turns stored grants into :class:`GrantAuth`. ``store`` persists refreshes."""

    def __init__(
        self,
        refs: SecretRefStore,
        redactor: Redactor,
        *,
        store: Any = None,
        timeout: float = 300.0,
        http_timeout: float = 30.0,
        client_name: str = "mcp-setup",
        clock: Callable[[], float] = time.time,
        shared: SharedSignIns | None = None,
    ) -> None:
        """``shared``: a team's sign-ins in progress (the store's ``SharedSignIns``): once a face
        serves the callback (:meth:`serve_callbacks_at`), the redirect may reach any replica."""
        self.refs = refs
        self.redactor = redactor
        self.store = store
        self.timeout = timeout
        self.http_timeout = http_timeout
        self.client_name = client_name
        self.clock = clock
        self._flows: set[asyncio.Task[Any]] = set()
        self._by_ref: dict[str, asyncio.Task[Any]] = {}  # the flow behind each pending ref (cancel)
        self._failed: dict[str, SetupError] = {}  # why a flow ended without a grant (failure(); a few)
        self._cancelled: set[str] = set()
        #: A team's: the store's ``SharedSignIns`` and serve's public base; then the redirect
        #: comes to ``<base>/oauth/callback`` on any replica (shared_callback.py), not to loopback.
        self.shared = shared
        self.callback_base: str | None = None
        self._waiting: set[SharedCallback] = set()

    def answer_callback(self, query_string: str) -> tuple[int, str, str]:
        """serve's ``GET /oauth/callback`` on this replica (a worker thread): a team's sign-in
        started on any replica is finished here, its tokens exchanged by this one."""
        assert self.shared is not None

        def exchange(state: str, record: dict[str, Any], response: dict[str, Any]) -> tuple[int, str, str]:
            return finish_exchange(
                self.shared,
                self.refs,
                state,
                record,
                response,
                protect=self.protect,
                timeout=self.http_timeout,
                clock=self.clock,
            )

        return callback_answer(self.shared, query_string, exchange=exchange)

    def serve_callbacks_at(self, base: str) -> None:
        """A face serves ``<base>/oauth/callback`` for every replica (a team's public address)."""
        self.callback_base = base

    def kick(self) -> None:
        """A sign-in's answer may have arrived on another replica (the change feed calls this)."""
        for waiting in list(self._waiting):
            waiting.kick()

    @staticmethod
    def key_for(qualified_name: str) -> str:
        """The ref key a sign-in for ``qualified_name`` is bound to."""
        return "OAUTH_" + hashlib.sha256(qualified_name.encode()).hexdigest()[:24].upper()

    def protect(self, grant: Grant) -> None:
        for value in grant.secret_values():
            self.redactor.register(value, "[secret:oauth]")

    # -- the browser sign-in ------------------------------------------------------------
    async def authorize(
        self, *, qualified_name: str, url: str, present: Presenter | None, client_id: str | None = None
    ) -> dict[str, Any]:
        listener: Any = CallbackListener()
        if self.shared is not None and self.callback_base:
            listener = SharedCallback(self.shared, base=self.callback_base, ttl_seconds=self.timeout)
            self._waiting.add(listener)
        await listener.start()
        ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        preset = None
        if client_id:
            preset = OAuthClientInformationFull(
                client_id=client_id, redirect_uris=[listener.redirect_uri], token_endpoint_auth_method="none"
            )
        provider: OAuthClientProvider
        shared = isinstance(listener, SharedCallback)  # then the replica the redirect reaches exchanges the code

        async def redirect_handler(auth_url: str) -> None:
            info = self._check(auth_url, provider, listener, qualified_name)
            if not ready.done():
                ready.set_result(info)

        async def callback_handler() -> Any:
            return await listener.wait(self.timeout)

        provider = (SharedProvider if shared else OAuthClientProvider)(
            url,
            OAuthClientMetadata(
                client_name=self.client_name,
                redirect_uris=[listener.redirect_uri],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            _Storage(preset),
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )
        ref = self.refs.reserve(self.key_for(qualified_name))
        if isinstance(provider, SharedProvider):
            provider.bind(listener, ref=ref, key=self.key_for(qualified_name))
        task = asyncio.create_task(self._run(provider, url, listener, ref, ready), name="mcp-setup-oauth")
        self._flows.add(task)
        task.add_done_callback(self._flows.discard)
        self._by_ref[ref] = task
        task.add_done_callback(lambda _t: self._by_ref.pop(ref, None))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # reported through `ready`
        await asyncio.wait({ready, task}, timeout=self.http_timeout * 3, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            task.cancel()
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
            raise OAuthError(f"Signing in to {qualified_name} did not get as far as the browser step in time.")
        info = ready.result()
        shown = await present(info) if present is not None else {"status": "pending"}
        out = {"ref": ref, "server": qualified_name, **{k: v for k, v in info.items() if k != "message"}}
        if shown.get("status") == "pending":
            return {
                **out,
                **shown,
                "status": "pending",
                "message": (
                    f"Ask the user to open the link to sign in to {qualified_name} at {info['authorization_server']}. "
                    "The ref works once they have signed in; the tokens are never shown to you."
                ),
            }
        await asyncio.shield(task)
        out.pop("url", None)
        return {**out, "status": "authorized"}

    async def _run(
        self, provider: OAuthClientProvider, url: str, listener: Any, ref: str, ready: asyncio.Future[Any]
    ) -> None:
        try:
            headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
            transport = CheckedTransport(provider)  # a foreign endpoint is refused before it is sent to
            async with httpx2.AsyncClient(
                auth=provider, timeout=self.timeout + self.http_timeout, transport=transport
            ) as http:
                response = await http.post(url, json=_INITIALIZE, headers=headers)
            if response.status_code in (401, 403) or provider.context.current_tokens is None:
                raise OAuthRefused(f"The server still refused the sign-in (HTTP {response.status_code}).")
            grant = self._grant(provider, url)
            self.protect(grant)
            self.refs.fulfil(ref, grant.model_dump_json())
        except ExchangedElsewhere:  # the replica that got the redirect exchanged the code and filled the ref
            pass
        except BaseException as exc:
            handed_over = ref not in self._cancelled and isinstance(listener, SharedCallback)  # cancel(): ends it
            if isinstance(exc, asyncio.CancelledError) and handed_over and listener.leave():
                raise  # this replica stops (a shutdown): the one the redirect reaches finishes the sign-in
            err = translate(exc)
            self._failed[ref] = err  # before the ref goes: a waiter woken by that reads it
            while len(self._failed) > 32:
                self._failed.pop(next(iter(self._failed)))
            self.refs.discard(ref)
            if not ready.done():
                ready.set_exception(err)
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise err from None
        finally:
            self._waiting.discard(listener)
            await listener.aclose()

    async def cancel(self, ref: str) -> None:
        """End the sign-in behind ``ref`` now (the user declined, or did not finish in time): its
        ref is discarded and its loopback listener closed. Harmless when it already ended."""
        self._cancelled.add(ref)
        self.refs.discard(ref)
        task = self._by_ref.get(ref)
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=self.http_timeout)
        self._cancelled.discard(ref)
        self._failed.pop(ref, None)

    def failure(self, ref: str) -> SetupError | None:
        """Why the sign-in behind ``ref`` ended without a grant (once), None when unknown here."""
        return self._failed.pop(ref, None)

    def _check(
        self, auth_url: str, provider: OAuthClientProvider, listener: Any, qualified_name: str
    ) -> dict[str, Any]:
        """Refuse what would send a code or token to a host the user is not shown."""
        ctx = provider.context
        meta = ctx.oauth_metadata
        issuer = (
            str(meta.issuer) if meta is not None else f"{urlsplit(ctx.server_url).scheme}://{host_of(ctx.server_url)}"
        )
        if ctx.auth_server_url and origin(ctx.auth_server_url) != origin(issuer):
            raise OAuthRefused(
                f"The server names the authorization server {host_of(ctx.auth_server_url)}, but its metadata is for "
                f"{host_of(issuer)}; mcp-setup refuses to sign in there."
            )
        endpoints = {"sign-in page": auth_url}
        if meta is not None:
            for name in ("token_endpoint", "registration_endpoint", "revocation_endpoint"):
                if getattr(meta, name, None):
                    endpoints[name.replace("_", " ")] = str(getattr(meta, name))
        for what, endpoint in endpoints.items():
            check_endpoint(what, endpoint, issuer)
        check_issuer(issuer)
        params = {k: v[0] for k, v in parse_qs(urlsplit(auth_url).query).items()}
        if params.get("redirect_uri") != listener.redirect_uri or not params.get("state"):
            raise OAuthRefused("The sign-in request does not come back to mcp-setup's own loopback address.")
        listener.expect(params["state"])
        scopes = params.get("scope", "").split()
        host = host_of(issuer)
        return {
            "server": qualified_name,
            "url": auth_url,
            "authorization_server": host,
            "scopes": scopes,
            "resource": params.get("resource"),
            "message": (
                f"Sign in to {qualified_name} at {host}. mcp-setup asks for "
                + (f"these permissions: {', '.join(scopes)}." if scopes else "no particular permissions (scopes).")
                + " Your sign-in stays on this computer; the assistant never sees it."
            ),
        }

    def _grant(self, provider: OAuthClientProvider, url: str) -> Grant:
        ctx = provider.context
        tokens, client = ctx.current_tokens, ctx.client_info
        assert tokens is not None and client is not None
        meta = ctx.oauth_metadata
        token_endpoint = provider._get_token_endpoint()
        issuer = str(meta.issuer) if meta is not None else f"{urlsplit(url).scheme}://{host_of(url)}"
        revocation = str(meta.revocation_endpoint) if meta is not None and meta.revocation_endpoint else None
        return Grant(
            server_url=url,
            resource=ctx.get_resource_url(),
            issuer=issuer,
            token_endpoint=token_endpoint,
            revocation_endpoint=revocation,
            client_id=client.client_id,
            client_secret=client.client_secret,
            token_endpoint_auth_method=client.token_endpoint_auth_method,
            scope=tokens.scope,
            access_token=tokens.access_token,
            refresh_token=tokens.refresh_token,
            expires_at=self.clock() + tokens.expires_in if tokens.expires_in else None,
        )

    # -- using a grant ------------------------------------------------------------------
    def auth_for_ref(self, ref: str, qualified_name: str, url: str | None) -> GrantAuth:
        """The auth for a sign-in ref, which must be this server's (and this URL's)."""
        key = self.key_for(qualified_name)
        again = f"Call mcp_setup_authorize for {qualified_name} to sign in again."
        try:
            value = self.refs.resolve({key: ref})[key]
        except SecretWrongKey:
            raise SecretWrongKey(f"This oauth_ref is a sign-in for another server. {again}", key="oauth_ref") from None
        except SecretPending:
            raise SecretPending(
                f"The user has not finished signing in to {qualified_name} yet. Wait for them, then try again.",
                key="oauth_ref",
            ) from None
        except SecretError as exc:
            raise type(exc)(f"This oauth_ref is unknown, used up or expired. {again}", key="oauth_ref") from None
        grant = Grant.model_validate_json(value.reveal())
        if url is None or origin(grant.server_url) != origin(url):
            raise OAuthRefused(f"This sign-in was made for another address than {qualified_name}'s; sign in again.")
        self.protect(grant)
        return GrantAuth(
            grant, label=qualified_name, clock=self.clock, timeout=self.http_timeout, on_change=self.protect
        )

    def auth_for_installed(self, server: Any, values: Mapping[str, str | SecretValue]) -> GrantAuth | None:
        """The connection manager's hook: a :class:`GrantAuth` for an installed server that signed in
        (its stored values, masked: the grant's tokens are read here, to sign its requests)."""
        stored = values.get(GRANT_KEY)
        if not stored:
            return None
        grant = Grant.model_validate_json(stored.reveal() if isinstance(stored, SecretValue) else stored)
        self.protect(grant)

        async def persist(new: Grant) -> None:
            self.protect(new)
            if self.store is not None:
                await asyncio.to_thread(
                    self.store.values.set_env_value, server.server_id, GRANT_KEY, new.model_dump_json(), True
                )

        return GrantAuth(
            grant, label=server.qualified_name, on_change=persist, clock=self.clock, timeout=self.http_timeout
        )

    async def revoke(self, grant_json: str) -> bool:
        """Revoke the grant's tokens where its authorization server supports it (RFC 7009)."""
        grant = Grant.model_validate_json(grant_json)
        endpoint = grant.revocation_endpoint
        if not endpoint or origin(endpoint) != origin(grant.issuer):
            return False
        done = False
        async with httpx2.AsyncClient(timeout=self.http_timeout) as http:
            for token, hint in ((grant.refresh_token, "refresh_token"), (grant.access_token, "access_token")):
                if not token:
                    continue
                data, headers = grant.client_auth({"token": token, "token_type_hint": hint})
                try:
                    response = await http.post(endpoint, data=data, headers=headers)
                    done = done or response.status_code == 200
                except httpx2.HTTPError as exc:
                    logger.warning("could not revoke a sign-in at %s (%s)", host_of(endpoint), type(exc).__name__)
        return done

    async def aclose(self) -> None:
        for task in list(self._flows):
            task.cancel()
        if self._flows:
            await asyncio.wait(list(self._flows), timeout=5)
