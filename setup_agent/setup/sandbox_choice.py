"""The user's widening of a server's sandbox, chosen in the consent: an extra folder it
may read and write, or no network at all. Never the agent's choice: only the consent's answer
(the page, the web modal, the terminal) carries one, and it is stored with the install in the
launch spec (``sandbox_grants``, ``sandbox_network``), so a remembered approval brings it back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setup_agent.errors import InvalidInput
from setup_agent.launch import LaunchSpec

__all__ = ["NO_CHOICE", "SandboxChoice", "apply_sandbox_choice", "validated_sandbox_choice"]

_MAX_PATHS = 8


@dataclass(frozen=True)
class SandboxChoice:
    extra_paths: tuple[str, ...] = ()
    network: bool = True
    #: Files of the user's home that the command line names and the user ticked: read-only.
    reads: tuple[str, ...] = ()

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {"extra_paths": list(self.extra_paths), "network": self.network}
        if self.reads:
            out["reads"] = list(self.reads)
        return out


NO_CHOICE = SandboxChoice()


def validated_sandbox_choice(
    widenable: bool, raw: Mapping[str, Any] | None, home_files: Sequence[str] = ()
) -> SandboxChoice:
    """``raw``: ``{"extra_paths": [PATH, …], "network": bool, "reads": [FILE, …]}`` from the
    consent's answer; ``reads`` only from ``home_files`` (the ones the consent showed to tick)."""
    if not raw:
        return NO_CHOICE
    if not isinstance(raw, Mapping):
        raise InvalidInput("sandbox must be an object: {extra_paths: [folders], network: true|false}.")
    network = raw.get("network", True)
    if not isinstance(network, bool):
        raise InvalidInput("sandbox.network must be true or false.")
    paths = raw.get("extra_paths") or []
    if isinstance(paths, str):
        paths = [p for p in paths.splitlines() if p.strip()]
    if not isinstance(paths, list) or len(paths) > _MAX_PATHS or not all(isinstance(p, str) for p in paths):
        raise InvalidInput(f"sandbox.extra_paths must be a list of at most {_MAX_PATHS} folders.")
    chosen: list[str] = []
    for text in paths:
        path = Path(os.path.expanduser(text.strip()))
        if not path.is_absolute() or any(ord(c) < 32 for c in text):
            raise InvalidInput("Give each extra folder as a full path, such as /home/you/notes.")
        resolved = path.resolve()
        if resolved == Path("/"):
            raise InvalidInput("The whole disk cannot be given to a server: choose a folder.")
        if not resolved.exists():
            raise InvalidInput("An extra folder must exist on this computer.")
        if str(resolved) not in chosen:
            chosen.append(str(resolved))
    reads = raw.get("reads") or []
    if not isinstance(reads, list) or not all(isinstance(r, str) and r in home_files for r in reads):
        raise InvalidInput("sandbox.reads may only name files the consent showed to tick.")
    choice = SandboxChoice(tuple(chosen), network, tuple(dict.fromkeys(reads)))
    if choice != NO_CHOICE and not widenable:
        raise InvalidInput("This server does not run in mcp-setup's sandbox: there is nothing to widen.")
    return choice


def apply_sandbox_choice(spec: LaunchSpec, choice: SandboxChoice) -> LaunchSpec:
    """``spec`` with the user's widening (the agent's spec never carries one of its own)."""
    if choice == NO_CHOICE:
        return spec
    grants = [*spec.sandbox_grants, *(p for p in choice.extra_paths if p not in spec.sandbox_grants)]
    reads = [*spec.sandbox_reads, *(p for p in choice.reads if p not in spec.sandbox_reads)]
    return spec.model_copy(update={"sandbox_grants": grants, "sandbox_network": choice.network, "sandbox_reads": reads})
