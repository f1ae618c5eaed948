"""What the user decided in a consent, and the checks of each part of their answer.

A :class:`ConsentDecision` is built only from a user channel's answer (the web modal's POST to
``/api/consents/…``, the one-time consent page, the terminal prompt, ``mcp-setup approve``), by
:meth:`~setup_agent.setup.consent.ConsentBroker.approve`: the destination settings' values, the
sandbox widening (``sandbox_choice.py``) and the tools the user unticked. No tool
argument of an agent reaches it: the installer reads the unticked tools from the decision alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from setup_agent.errors import InvalidInput

from .consent_request import ConsentRequest
from .sandbox_choice import NO_CHOICE, SandboxChoice

__all__ = ["ConsentDecision", "MAX_SETTING_CHARS", "validated_hidden_tools", "validated_settings"]

MAX_SETTING_CHARS = 2000
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class ConsentDecision:
    """An approval: the destination settings' values the user chose (these are used), their
    widening of the sandbox, if any, the tools they unticked (held back once installed) and
    their answer to each of the consent's choices (consent_choices.py)."""

    settings: dict[str, str]
    sandbox: SandboxChoice = NO_CHOICE
    hidden_tools: frozenset[str] = frozenset()
    choices: dict[str, str] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """The JSON kept in the store for another process (shared_consents.py)."""
        return {
            "settings": self.settings,
            "sandbox": self.sandbox.public(),
            "hidden_tools": sorted(self.hidden_tools),
            "choices": self.choices,
        }


def validated_settings(request: ConsentRequest, settings: Mapping[str, Any]) -> dict[str, str]:
    names = {d.name: d for d in request.destinations}
    unknown = [k for k in settings if k not in names]
    if unknown:
        raise InvalidInput("Only the destination settings shown can be changed here.")
    out = {d.name: d.suggested for d in request.destinations}
    for name, value in settings.items():
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"Enter a value for {name}.", key=name)
        value = value.strip()
        if len(value) > MAX_SETTING_CHARS or _CONTROL.search(value):
            raise InvalidInput(f"The value for {name} is too long or holds control characters.", key=name)
        out[name] = value
    return out


def validated_hidden_tools(request: ConsentRequest, names: Iterable[Any] | None) -> frozenset[str]:
    """The tools the user unticked: names of the tools the consent showed, nothing else."""
    if not names:
        return frozenset()
    if isinstance(names, (str, bytes, Mapping)):
        raise InvalidInput("hidden_tools must be a list of the tool names shown.")
    shown = {t.get("name") for t in request.tools}
    picked = list(names)
    if any(not isinstance(n, str) or n not in shown for n in picked):
        raise InvalidInput("Only the tools shown in this consent can be left out.")
    return frozenset(picked)
