"""The ``mcp_setup_*`` tools: :class:`SetupService` (``service.py``) and what it runs:
arguments (the typed request of each tool in ``tool_requests.py``, parsed once in
``SetupService.call``; their schemas in ``tool_specs.py``; bounds and the no-echo rule in
``tool_args.py``), preparation (``preparation.py``), the user's
consent (``consent.py``, ``consent_request.py``, its choices in ``consent_choices.py``,
``tool_review.py``; shared with every process
through the store, and one per request and asker among a team's replicas, in ``shared_consents.py``;
secret prompts and the guard's locks likewise in ``shared_prompts.py``, ``shared_locks.py``), test-connect (``probe.py``,
``adoption.py``), install (``installer.py``), bundles for get/test (``bundle_manifests.py``),
search cards (``search_cards.py``), lock files (``lock_file.py``), providers and admission
(``providers.py``), replacing a stored secret, tested first (``rotation.py``), updating to a newer
version, swapped in only if it answers (``updates.py``) and the caller's
context (``call_context.py``).

Imports gateway, oauth, launch, store, secrets, errors and :mod:`registry_clients`; never agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .call_context import CallContext
    from .consent import ConsentBroker, ConsentSharing
    from .consent_request import (
        ConsentDocument,
        ConsentRequest,
        budget_line,
        build_consent_request,
        consent_document,
        sandbox_profile,
    )
    from .lock_file import (
        LockedServer,
        ParsedLock,
        check_digest,
        check_launch,
        check_tools,
        differences,
        lock_document,
        locked_server,
        parse_lock,
    )
    from .probe import Prober, ProbeResult
    from .providers import ProviderConfig, load_provider_config
    from .rotation import rotate_secret
    from .service import SetupService
    from .shared_consents import SharedDecisions, StoreConsents, TeamConsents, answer_shared, consent_requester
    from .shared_locks import PublishedLocks
    from .shared_prompts import PublishedPrompts, ReplicaPrompts, answer_secret_shared
    from .tool_requests import InstallRequest, ListRequest, RemoveRequest, SearchRequest, TestRequest
    from .tool_review import ToolReview, tools_change_request
    from .tool_specs import FACE_TOKENS, TOOL_NAMES, TOOL_SPECS
    from .updates import UpdateOffer, update_offer, update_server

__all__ = [
    "ConsentDocument",
    "budget_line",
    "consent_document",
    "answer_secret_shared",
    "answer_shared",
    "build_consent_request",
    "CallContext",
    "LockedServer",
    "ParsedLock",
    "check_digest",
    "check_launch",
    "check_tools",
    "consent_requester",
    "differences",
    "InstallRequest",
    "ListRequest",
    "lock_document",
    "locked_server",
    "parse_lock",
    "ConsentBroker",
    "ConsentSharing",
    "ConsentRequest",
    "load_provider_config",
    "Prober",
    "ProbeResult",
    "ProviderConfig",
    "RemoveRequest",
    "rotate_secret",
    "sandbox_profile",
    "SearchRequest",
    "SetupService",
    "SharedDecisions",
    "StoreConsents",
    "TeamConsents",
    "PublishedLocks",
    "PublishedPrompts",
    "ReplicaPrompts",
    "TestRequest",
    "TOOL_NAMES",
    "TOOL_SPECS",
    "FACE_TOKENS",
    "ToolReview",
    "tools_change_request",
    "UpdateOffer",
    "update_offer",
    "update_server",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "answer_secret_shared": "shared_prompts",
        "answer_shared": "shared_consents",
        "SharedDecisions": "shared_consents",
        "StoreConsents": "shared_consents",
        "TeamConsents": "shared_consents",
        "PublishedLocks": "shared_locks",
        "PublishedPrompts": "shared_prompts",
        "ReplicaPrompts": "shared_prompts",
        "consent_requester": "shared_consents",
        "build_consent_request": "consent_request",
        "CallContext": "call_context",
        "LockedServer": "lock_file",
        "ParsedLock": "lock_file",
        "check_digest": "lock_file",
        "check_launch": "lock_file",
        "check_tools": "lock_file",
        "differences": "lock_file",
        "lock_document": "lock_file",
        "locked_server": "lock_file",
        "parse_lock": "lock_file",
        "ConsentBroker": "consent",
        "ConsentSharing": "consent",
        "ConsentRequest": "consent_request",
        "ConsentDocument": "consent_request",
        "budget_line": "consent_request",
        "consent_document": "consent_request",
        "load_provider_config": "providers",
        "Prober": "probe",
        "ProbeResult": "probe",
        "ProviderConfig": "providers",
        "rotate_secret": "rotation",
        "sandbox_profile": "consent_request",
        "SetupService": "service",
        "InstallRequest": "tool_requests",
        "ListRequest": "tool_requests",
        "RemoveRequest": "tool_requests",
        "SearchRequest": "tool_requests",
        "TestRequest": "tool_requests",
        "TOOL_NAMES": "tool_specs",
        "TOOL_SPECS": "tool_specs",
        "FACE_TOKENS": "tool_specs",
        "ToolReview": "tool_review",
        "tools_change_request": "tool_review",
        "UpdateOffer": "updates",
        "update_offer": "updates",
        "update_server": "updates",
    },
)
