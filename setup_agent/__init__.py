"""The core of mcp-setup, in packages by concern, each importing only those below it::

    agent → setup → oauth → gateway → launch → store → secrets → errors

(``errors.py`` and ``lazy.py`` sit below all; :mod:`registry_clients` below the core). It reads
no environment and no global settings: faces (``app/``) build a ``Settings`` once and pass each
part what it needs. Where things live: ``docs/ARCHITECTURE.md``.

Public names are re-exported lazily (importing the package stays cheap):

- secrets: :class:`SecretRefStore`, :class:`SecretValue`; redaction: :class:`Redactor`
- prompts: :class:`PromptBroker`, :class:`PendingPrompt`; consent: :class:`ConsentBroker`, :class:`ConsentRequest`
- launching: :class:`LaunchSpec`, :class:`Prober`, :class:`ProbeResult`
- persistence: :class:`Vault`, :class:`Store`, :class:`InstalledServer`
- live servers: :class:`ConnectionManager`
- the tools: :class:`SetupService`, :class:`CallContext`, :data:`TOOL_SPECS`
- governance: :class:`ToolRegistry` (read-only inventory), :class:`ProviderConfig`, :func:`load_provider_config`
- the sub-agent: :func:`spawn_subagent`
- errors: :class:`SetupError` and its tree in :mod:`setup_agent.errors`
"""

from __future__ import annotations

from .lazy import lazy_exports

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
    "spawn_subagent",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CallContext": "setup",
        "ConnectionManager": "gateway",
        "ConsentBroker": "setup",
        "ConsentRequest": "setup",
        "InstalledServer": "store",
        "LaunchSpec": "launch",
        "PendingPrompt": "secrets",
        "ProbeResult": "setup",
        "Prober": "setup",
        "PromptBroker": "secrets",
        "ProviderConfig": "setup",
        "Redactor": "secrets",
        "SecretRefStore": "secrets",
        "SecretValue": "secrets",
        "SetupError": "errors",
        "SetupService": "setup",
        "Store": "store",
        "TOOL_SPECS": "setup",
        "ToolRegistry": "agent",
        "Vault": "secrets",
        "load_provider_config": "setup",
        "spawn_subagent": "agent",
    },
)
