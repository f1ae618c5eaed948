"""Where a member's prompt is answered: on this process only, or on any replica of a team's gateway.

:class:`~setup_agent.gateway.member_prompts.MemberPrompts` holds one :class:`MemberPromptReplicas`,
chosen once when the runtime is built: :class:`OnlyHere` on SQLite (one process asks and hears the
answer), :class:`MemberPromptsElsewhere` on a team's database.

On a team's database (PostgreSQL) :class:`~setup_agent.gateway.member_prompts.MemberPrompts`
publishes each prompt it opens to ``mcp_pending`` as kind ``member_secret`` (server id, member,
key name, the prompt's text: never a value). Its one-time link is a shared capability (hash only),
so the link can be opened on another replica; there :class:`MemberPromptsElsewhere` (the member
broker's ``answer_elsewhere``) reads the row, and an answer is stored at once, encrypted, as that
member's value (``store.values.set_member_value``) by the replica that got it. The row is claimed first
(one conditional ``UPDATE``), so an answer is stored once; a revoked member's answer stores
nothing and closes the row. The replica that asked learns it from the row (NOTIFY, or its bounded
poll) while a call waits on URL elicitation; a retry on any replica reads the member's values.
No user page, tab or terminal lists these rows (``PendingApprovals.pending`` leaves them out).
"""

from __future__ import annotations

import logging
import math
from typing import Any, Protocol

from setup_agent.errors import SetupError
from setup_agent.secrets import PendingPrompt, PromptsElsewhere, SecretValue
from setup_agent.store import PendingApprovals, Store

__all__ = ["MEMBER_PROMPT_KIND", "MemberPromptReplicas", "MemberPromptsElsewhere", "OnlyHere"]

logger = logging.getLogger(__name__)

MEMBER_PROMPT_KIND = "member_secret"


class MemberPromptReplicas(Protocol):
    """The other processes a member's prompt is shared with (none, or a team's replicas)."""

    #: How often a waiting call looks at the shared row (a NOTIFY wakes it sooner); ``inf``: never.
    poll_seconds: float

    def holds(self, prompt_id: str) -> bool:
        """Whether ``prompt_id`` is an open member prompt of another replica."""
        ...

    def publish(self, prompt_id: str, request: dict[str, Any], *, ttl_seconds: float) -> None:
        """Share a prompt this replica opened (its text and whose it is; never a value)."""
        ...

    def answered(self, prompt_id: str) -> bool:
        """Whether another replica took the answer to this replica's ``prompt_id``."""
        ...

    def claim(self, prompt_id: str, member: str) -> bool:
        """Take the answer here; False when another replica took it first (it stored the value)."""
        ...

    def close(self, prompt_id: str) -> None:
        """The prompt is done here: no replica answers it any more."""
        ...

    @property
    def broker_side(self) -> PromptsElsewhere | None:
        """What the member broker asks about prompts it does not know, or None when there are none."""
        ...


class OnlyHere:
    """One process: a member's prompt is asked and answered here, and nowhere else."""

    poll_seconds = math.inf
    broker_side = None

    def holds(self, prompt_id: str) -> bool:
        return False

    def publish(self, prompt_id: str, request: dict[str, Any], *, ttl_seconds: float) -> None:
        return None

    def answered(self, prompt_id: str) -> bool:
        return False

    def claim(self, prompt_id: str, member: str) -> bool:
        return True

    def close(self, prompt_id: str) -> None:
        return None


class MemberPromptsElsewhere:
    """Members' prompts shared with a team's other replicas: this replica's published, theirs answered here."""

    #: A waiting call looks at its shared row this often (NOTIFY wakes it at once).
    poll_seconds = 2.0

    def __init__(self, shared: PendingApprovals, store: Store) -> None:
        self.shared, self.store = shared, store

    @property
    def broker_side(self) -> MemberPromptsElsewhere:
        return self

    def is_active(self, member: str) -> bool:
        """Whether ``member``'s token is still active (a revoked member's answer stores nothing)."""
        return any(t.name == member and t.active for t in self.store.tokens.list())

    def holds(self, prompt_id: str) -> bool:
        return self.row(prompt_id) is not None

    def publish(self, prompt_id: str, request: dict[str, Any], *, ttl_seconds: float) -> None:
        self.shared.publish(prompt_id, MEMBER_PROMPT_KIND, request, ttl_seconds=ttl_seconds)

    def claim(self, prompt_id: str, member: str) -> bool:
        return self.shared.answer(prompt_id, "answered", by=f"token:{member}")

    def close(self, prompt_id: str) -> None:
        try:
            self.shared.close(prompt_id)
        except SetupError as exc:
            logger.warning("a member's shared prompt could not be closed (%s)", exc.code)

    def row(self, prompt_id: str) -> Any:
        """The open ``member_secret`` row of ``prompt_id``, or None."""
        try:
            item = self.shared.get(prompt_id)
        except SetupError as exc:
            logger.warning("a member's prompt of another replica could not be read (%s)", exc.code)
            return None
        if item is None or item.kind != MEMBER_PROMPT_KIND or item.status != "pending":
            return None
        return item

    def get(self, prompt_id: str) -> PendingPrompt | None:
        item = self.row(prompt_id)
        if item is None:
            return None
        return PendingPrompt.published(prompt_id, item.request)

    def answer(self, prompt_id: str, value: SecretValue) -> bool:
        item = self.row(prompt_id)
        if item is None:
            return False
        server_id, member, key = (str(item.request.get(k) or "") for k in ("server_id", "member", "key_name"))
        by = f"token:{member}"
        if not self.is_active(member):
            self.shared.answer(prompt_id, "cancelled", by=by)
            logger.warning("a revoked member's answer was not stored")
            return False
        if not self.shared.answer(prompt_id, "answered", by=by):  # answered on another replica meanwhile
            return False
        self.store.values.set_member_value(server_id, member, key, value)
        logger.info("stored the own %s of token:%s for server %s (a prompt of another replica)", key, member, server_id)
        return True

    def cancel(self, prompt_id: str) -> bool:
        item = self.row(prompt_id)
        if item is None:
            return False
        return self.shared.answer(prompt_id, "cancelled", by=f"token:{item.request.get('member')}")

    def answered(self, prompt_id: str) -> bool:
        """Whether another replica took the answer to this replica's prompt ``prompt_id``."""
        try:
            item = self.shared.get(prompt_id)
        except SetupError:
            return False
        return item is not None and item.status == "answered"
