"""Secret prompts shared through the store, so a person can answer one in any mcp-setup.

A stdio face on a machine with no browser hands the agent a secret page link the person cannot
open. :class:`PublishedPrompts` publishes each prompt the process's
:class:`~setup_agent.secrets.PromptBroker` opens (key name, the agent's prompt text, the server:
no value) to :class:`~setup_agent.store.PendingApprovals`; ``mcp-setup approve`` in a terminal
answers it with a hidden prompt (:func:`answer_secret_shared`: the value is encrypted with the
data key before it is written, and deleted once picked up). Before a ref is read, the owner
picks up the values entered elsewhere and answers its own broker with them: from there the
value is a live ref like any other, single use, never seen by the agent. On a team's database a
broker built with :class:`ReplicaPrompts` also answers the prompts of other replicas: the value
goes into the prompt's shared ref (encrypted), usable on any replica.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from setup_agent.errors import InvalidInput, SetupError
from setup_agent.secrets import PendingPrompt, PromptBroker, SecretRefStore, SecretValue, Vault
from setup_agent.store import PendingApprovals, SharedRefs

from .shared_items import Published

__all__ = ["PublishedPrompts", "ReplicaPrompts", "answer_secret_shared"]

log = logging.getLogger(__name__)


class PublishedPrompts:
    """``broker``'s prompts published to ``shared``, their refs filled with the values entered
    elsewhere (subscribed from construction on; ``refs`` pulls before every read)."""

    def __init__(
        self, broker: PromptBroker, refs: SecretRefStore, shared: PendingApprovals, vault: Vault, *, ttl_seconds: float
    ) -> None:
        self.broker = broker
        self.vault = vault
        self.published = Published(shared, ttl_seconds=ttl_seconds)
        broker.subscribe(self._event)
        refs.add_pull(self._pull)

    def _event(self, event: dict[str, Any]) -> None:
        pid = str(event.get("prompt_id"))
        if event.get("type") == "secret_request":
            self.published.publish(pid, "secret", {k: event.get(k) for k in ("key_name", "prompt", "server")})
        elif event.get("type") == "secret_done":
            self.published.closed(pid)

    def _pull(self) -> None:
        for item in self.published.answered():  # their rows (and the encrypted values) are gone now
            try:
                if item.status == "answered":
                    sealed = base64.b64decode((item.decision or {}).get("value_encrypted", ""))
                    self.broker.answer(item.item_id, self.vault.decrypt(sealed))
                else:
                    self.broker.cancel(item.item_id, "cancelled by the user in a terminal")
            except SetupError as exc:  # answered here meanwhile, expired, or a value it refused
                log.info("a secret entered elsewhere was not used (%s)", exc.code)


def answer_secret_shared(
    shared: PendingApprovals,
    vault: Vault,
    item_id: str,
    value: str | None,
    *,
    by: str,
    shared_refs: SharedRefs | None = None,
    ttl_seconds: float = 900.0,
) -> bool:
    """Answer a shared secret prompt from a user channel of another process (``None``: cancel).
    The value is encrypted with the data key; False when the prompt is no longer open. With
    ``shared_refs`` (a team's database) the prompt's ref gets it at once: usable on any replica,
    also once the replica that asked is gone."""
    item = shared.get(item_id)
    if item is None or item.status != "pending" or item.kind != "secret":
        return False
    if value is None:
        return shared.answer(item_id, "cancelled", by=by)
    if not value.strip():
        raise InvalidInput("Please enter a value, or skip it.")
    filled = shared_refs is not None and shared_refs.fill_prompt(item_id, SecretValue(value), ttl_seconds=ttl_seconds)
    sealed = base64.b64encode(vault.encrypt(value)).decode("ascii")
    return shared.answer(item_id, "answered", by=by, decision={"value_encrypted": sealed}) or filled


class ReplicaPrompts:
    """The prompts of other replicas on a team's database, for a :class:`PromptBroker` that does
    not know them (its ``elsewhere``): it answers them into the prompt's shared ref."""

    def __init__(self, shared: PendingApprovals, vault: Vault, shared_refs: SharedRefs, *, ttl_seconds: float) -> None:
        self.shared, self.vault, self.shared_refs, self.ttl_seconds = shared, vault, shared_refs, ttl_seconds

    def get(self, prompt_id: str) -> PendingPrompt | None:
        try:
            item = self.shared.get(prompt_id)
        except SetupError as exc:
            log.warning("a secret prompt of another mcp-setup could not be read (%s)", exc.code)
            return None
        if item is None or item.kind != "secret" or item.status != "pending":
            return None
        return PendingPrompt.published(prompt_id, item.request)

    def answer(self, prompt_id: str, value: SecretValue) -> bool:
        return answer_secret_shared(
            self.shared,
            self.vault,
            prompt_id,
            value.reveal(),
            by="user",
            shared_refs=self.shared_refs,
            ttl_seconds=self.ttl_seconds,
        )

    def cancel(self, prompt_id: str) -> bool:
        return answer_secret_shared(self.shared, self.vault, prompt_id, None, by="user")
