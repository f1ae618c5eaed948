"""The core of mcp-setup: secret refs, redaction, probe, store, connections, the tools.

It reads no environment and no global settings: faces (``app/``) build a ``Settings`` once
and pass each part what it needs. Where things live: ``docs/ARCHITECTURE.md``.

Public names are re-exported lazily (importing the package stays cheap):

- secrets: :class:`SecretRefStore`, :class:`SecretValue`; redaction: :class:`Redactor`
- prompts: :class:`PromptBroker`, :class:`PendingPrompt`; consent: :class:`ConsentBroker`, :class:`ConsentRequest`
- launching: :class:`LaunchSpec`, :class:`Prober`, :class:`ProbeResult`
- persistence: :class:`Vault`, :class:`Store`, :class:`InstalledServer`
- live servers: :class:`ConnectionManager`
- the tools: :class:`SetupService`, :class:`CallContext`, :data:`TOOL_SPECS`
- governance: :class:`ToolRegistry` (read-only inventory), :class:`ProviderConfig`, :func:`load_provider_config`
- errors: :class:`SetupError` and its tree in :mod:`setup_agent.errors`
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "CallContext",
    "ConnectionManager",
    "ConsentBroker",
    "ConsentRequest",
    "InstalledServer",
    "LaunchSpec",
    "PendingPrompt",
    "ProbeResult",
    "Prober",
    "PromptBroker",
    "ProviderConfig",
    "Redactor",
    "SecretRefStore",
    "SecretValue",
    "SetupError",
    "SetupService",
    "Store",
    "TOOL_SPECS",
    "ToolRegistry",
    "Vault",
    "load_provider_config",
]

_WHERE = {
    "CallContext": "call_context",
    "ConnectionManager": "connections",
    "ConsentBroker": "consent",
    "ConsentRequest": "consent",
    "InstalledServer": "store",
    "LaunchSpec": "launch",
    "PendingPrompt": "prompts",
    "ProbeResult": "probe",
    "Prober": "probe",
    "PromptBroker": "prompts",
    "ProviderConfig": "providers",
    "Redactor": "redact",
    "SecretRefStore": "secrets",
    "SecretValue": "secrets",
    "SetupError": "errors",
    "SetupService": "service",
    "Store": "store",
    "TOOL_SPECS": "tool_specs",
    "ToolRegistry": "tool_registry",
    "Vault": "vault",
    "load_provider_config": "providers",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'setup_agent' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
