"""A member's prompt answered on any replica of a team's gateway (parts A and B).

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
import time
from collections.abc import Callable
from typing import Any

from setup_agent.errors import SetupError
from setup_agent.secrets import PendingPrompt, SecretValue
from setup_agent.store import PendingApprovals, Store

__all__ = ["MEMBER_PROMPT_KIND", "MemberPromptsElsewhere"]

logger = logging.getLogger(__name__)

MEMBER_PROMPT_KIND = "member_secret"


class MemberPromptsElsewhere:
    """Members' prompts of other replicas, for the member broker that does not know them."""

    def __init__(self, shared: PendingApprovals, store: Store, is_active: Callable[[str], bool] | None) -> None:
        self.shared, self.store, self.is_active = shared, store, is_active

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
        request = item.request
        return PendingPrompt(
            prompt_id,
            str(request.get("key_name") or ""),
            str(request.get("prompt") or ""),
            request.get("server") or None,
            "",
            time.monotonic(),
        )

    def answer(self, prompt_id: str, value: SecretValue) -> bool:
        item = self.row(prompt_id)
        if item is None:
            return False
        server_id, member, key = (str(item.request.get(k) or "") for k in ("server_id", "member", "key_name"))
        by = f"token:{member}"
        if self.is_active is not None and not self.is_active(member):
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
