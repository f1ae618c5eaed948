"""The user's widening of a server's sandbox, chosen in the consent: an extra folder it
may read and write, or no network at all; or its narrowing to "only these" destinations, the
ones its test reached (``sandbox_net``, strict). Never the agent's choice: only the consent's answer
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
from setup_agent.launch import LaunchSpec, NetPolicy

__all__ = ["NO_CHOICE", "SandboxChoice", "apply_sandbox_choice", "validated_sandbox_choice"]

_MAX_PATHS = 8


@dataclass(frozen=True)
class SandboxChoice:
    extra_paths: tuple[str, ...] = ()
    network: bool = True
    #: Files of the user's home that the command line names and the user ticked: read-only.
    reads: tuple[str, ...] = ()
    #: "Only these": the destinations its test reached, and no other (None: not chosen).
    only_these: tuple[str, ...] | None = None

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {"extra_paths": list(self.extra_paths), "network": self.network}
        if self.reads:
            out["reads"] = list(self.reads)
        if self.only_these is not None:
            out["only_these"] = True
        return out


NO_CHOICE = SandboxChoice()


def validated_sandbox_choice(
    widenable: bool,
    raw: Mapping[str, Any] | None,
    only_offered: Sequence[str] = (),
    home_files: Sequence[str] = (),
) -> SandboxChoice:
    """``raw``: ``{"extra_paths": [PATH, …], "network": bool, "only_these": bool, "reads": [FILE, …]}``
    from the consent's answer; "only these" is ``only_offered``, the destinations the consent
    listed; ``reads`` only from ``home_files`` (the files of the home the consent showed to tick)."""
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
    only = raw.get("only_these", False)
    if not isinstance(only, bool):
        raise InvalidInput("sandbox.only_these must be true or false.")
    if only and not only_offered:
        raise InvalidInput("'Only these' needs the destinations a test reached, and this consent lists none.")
    widening = SandboxChoice(tuple(chosen), network, tuple(dict.fromkeys(reads)))
    if widening != NO_CHOICE and not widenable:
        raise InvalidInput("This server does not run in mcp-setup's sandbox: there is nothing to widen.")
    return SandboxChoice(tuple(chosen), network, tuple(dict.fromkeys(reads)), tuple(only_offered) if only else None)


def apply_sandbox_choice(spec: LaunchSpec, choice: SandboxChoice) -> LaunchSpec:
    """``spec`` with the user's widening (the agent's spec never carries one of its own)."""
    if choice == NO_CHOICE:
        return spec
    grants = [*spec.sandbox_grants, *(p for p in choice.extra_paths if p not in spec.sandbox_grants)]
    update: dict[str, Any] = {"sandbox_grants": grants, "sandbox_network": choice.network}
    if choice.reads:
        update["sandbox_reads"] = [*spec.sandbox_reads, *(p for p in choice.reads if p not in spec.sandbox_reads)]
    if choice.only_these is not None:  # strict: what the test reached, and what the person granted
        earlier = NetPolicy.from_dict(spec.sandbox_net) if spec.sandbox_net else NetPolicy.default()
        strict = NetPolicy.strict(choice.only_these, earlier.granted).to_dict()
        update["sandbox_net"] = {**spec.sandbox_net, **strict}
    return spec.model_copy(update=update)
