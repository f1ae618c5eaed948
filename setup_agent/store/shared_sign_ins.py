"""OAuth sign-ins in progress shared by a team's replicas: :class:`SharedSignIns`.

A sign-in started on replica A sends the browser to ``https://PUBLIC_HOST:PORT/oauth/callback``;
the balancer may hand that redirect to replica B. The table ``mcp_sign_ins`` joins them:

- A :meth:`~SharedSignIns.open` s a row for the authorization request's ``state`` (its SHA-256
  only) and its own replica id, with a deadline, and (``0013_sign_in_exchange``) what the token
  exchange needs (the PKCE verifier, the client, the ref to fill), encrypted with the data key;
- B :meth:`~SharedSignIns.claim` s that exchange with one conditional ``UPDATE … WHERE
  answer_encrypted IS NULL AND expires_at > now RETURNING`` (the first redirect wins, a replay is
  refused), does the exchange itself and :meth:`~SharedSignIns.finish` es the row ("done", or
  why not; the exchange cleared); a ``NOTIFY`` wakes A, if it is still there;
- A :meth:`~SharedSignIns.take` s the outcome with one ``DELETE … RETURNING`` (once). A row of
  a sign-in without an exchange (an older replica's) gets the code by :meth:`~SharedSignIns.answer`
  instead, and A exchanges it.

Nothing of the code, the state, the verifier or the tokens is stored in clear. Expired rows are
removed by whichever replica opens the next sign-in.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, update
from sqlalchemy.orm import sessionmaker

from setup_agent.secrets import Vault

from .change_feed import PENDING_CHANNEL, notify
from .database import Store
from .engine import translated
from .models import Clock, utcnow
from .shared_rows import SignInRow

__all__ = ["SharedSignIns"]


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode("utf-8", "surrogatepass")).hexdigest()


class SharedSignIns:
    """``mcp_sign_ins``: the redirect of a sign-in, received by any replica, taken by the one waiting."""

    def __init__(self, store: Store, vault: Vault, *, clock: Clock = utcnow) -> None:
        self._sessions = sessionmaker(store.database.engine, expire_on_commit=False)
        self._vault = vault
        self._clock = clock

    def open(self, state: str, *, owner: str, ttl_seconds: float, exchange: dict[str, Any] | None = None) -> None:
        """A row for ``state``; ``exchange``: what the replica receiving the redirect needs to finish."""
        now = self._clock()
        sealed = None if exchange is None else self._vault.encrypt(json.dumps(exchange))
        row = SignInRow(
            state_hash=_digest(state),
            owner=owner[:128],
            answer_encrypted=None,
            created_at=now,
            expires_at=now + timedelta(seconds=ttl_seconds),
            exchange_encrypted=sealed,
        )
        with translated("record a sign-in"), self._sessions() as s, s.begin():
            s.execute(delete(SignInRow).where(SignInRow.expires_at <= now))  # any replica sweeps
            s.add(row)

    def answer(self, state: str, response: dict[str, Any]) -> bool:
        """The authorization response (``code``/``iss`` or ``error``) for ``state``: True for the
        first one of a sign-in still open; False when unknown, answered already, taken or expired."""
        query = (
            update(SignInRow)
            .where(
                SignInRow.state_hash == _digest(state),
                SignInRow.answer_encrypted.is_(None),
                SignInRow.exchange_encrypted.is_(None),
                SignInRow.expires_at > self._clock(),
            )
            .values(answer_encrypted=self._vault.encrypt(json.dumps(response)))
        )
        with translated("answer a sign-in"), self._sessions() as s, s.begin():
            done = bool(s.execute(query).rowcount)
            if done:
                notify(s, PENDING_CHANNEL)
            return done

    def claim(self, state: str) -> dict[str, Any] | None:
        """The exchange of the sign-in ``state``, for this replica alone to do (then :meth:`finish`);
        None when it has none, or is unknown, claimed already (a replayed redirect) or expired."""
        query = (
            update(SignInRow)
            .where(
                SignInRow.state_hash == _digest(state),
                SignInRow.answer_encrypted.is_(None),
                SignInRow.exchange_encrypted.is_not(None),
                SignInRow.expires_at > self._clock(),
            )
            .values(answer_encrypted=self._vault.encrypt(json.dumps({"exchanging": True})))
            .returning(SignInRow.exchange_encrypted)
        )
        with translated("claim a sign-in's exchange"), self._sessions() as s, s.begin():
            found = s.scalars(query).first()
        return None if found is None else json.loads(self._vault.decrypt(found).reveal())

    def finish(self, state: str, outcome: dict[str, Any]) -> None:
        """A claimed exchange's outcome (``done``, or ``failed``/``error`` and why), for the replica
        waiting; the exchange (verifier, client secret) is cleared."""
        query = (
            update(SignInRow)
            .where(SignInRow.state_hash == _digest(state), SignInRow.exchange_encrypted.is_not(None))
            .values(answer_encrypted=self._vault.encrypt(json.dumps(outcome)), exchange_encrypted=None)
        )
        with translated("finish a sign-in"), self._sessions() as s, s.begin():
            if s.execute(query).rowcount:
                notify(s, PENDING_CHANNEL)

    def take(self, state: str) -> dict[str, Any] | None:
        """The response (or a claimed exchange's outcome) once it arrived (and the row gone with it),
        else None. Once only."""
        query = (
            delete(SignInRow)
            .where(
                SignInRow.state_hash == _digest(state),
                SignInRow.answer_encrypted.is_not(None),
                SignInRow.exchange_encrypted.is_(None),
            )
            .returning(SignInRow.answer_encrypted)
        )
        with translated("read a sign-in's answer"), self._sessions() as s, s.begin():
            found = s.scalars(query).first()
        return None if found is None else json.loads(self._vault.decrypt(found).reveal())

    def close(self, state: str) -> None:
        with translated("end a sign-in"), self._sessions() as s, s.begin():
            s.execute(delete(SignInRow).where(SignInRow.state_hash == _digest(state)))
