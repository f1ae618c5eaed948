"""How an installed server is shown to a person (``mcp-setup list``/``show``, ``--json``): its
public fields (key names and secret flags, never values), its state, and what a state means
with the command that acts on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .audit import escape

if TYPE_CHECKING:
    from setup_agent.store import InstalledServer

__all__ = ["STATE_WORDS", "idle_words", "server_json", "state", "state_notes"]


def server_json(s: InstalledServer, left_out: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The public view of an installed server (key names and secret flags, never values);
    ``left_out``: the tools the user left out, not offered to agents."""
    return {
        "server_id": s.server_id,
        "qualified_name": s.qualified_name,
        "slug": s.slug,
        "title": s.title,
        "enabled": s.enabled,
        "version": s.version,
        "package_type": s.package_type,
        "source": s.source,
        "installed_at": s.installed_at.isoformat(),
        "installed_by": s.installed_by,
        "env_keys": [{"key": k.key, "secret": k.secret} for k in s.env_keys],
        "tools": [t.get("name") for t in s.tools if t.get("name") not in left_out],
        **({"left_out_by_user": sorted(left_out)} if left_out else {}),
        "status": state(s),
        "sampling": s.sampling,  # may it ask your AI to write text: no | text | tools
        **({"tools_change": {"state": c["state"], "summary": c["summary"]}} if (c := s.tools_change()) else {}),
    }


def state(s: InstalledServer) -> str:
    """``disabled``, ``needs_sign_in`` (its OAuth sign-in could not be renewed), ``tools_changed``
    (a changed tool list waits for the user) or ``enabled``."""
    if not s.enabled:
        return "disabled"
    if s.needs_sign_in:
        return "needs_sign_in"
    change = s.tools_change()
    return "tools_changed" if change is not None and change["state"] == "changed" else "enabled"


STATE_WORDS = {
    "enabled": "enabled",
    "disabled": "DISABLED",
    "tools_changed": "TOOLS CHANGED",
    "needs_sign_in": "SIGN-IN EXPIRED",
}


def state_notes(s: InstalledServer, name: str, left_out: frozenset[str] = frozenset()) -> list[str]:
    """What a disabled server, a changed tool list or left-out tools mean, and the command that acts on it."""
    notes = []
    if left_out:
        notes.append(
            f"you left out {len(left_out)} of its tools ({escape(', '.join(sorted(left_out)))}): agents do not "
            f"see them; `mcp-setup enable {name} --tool TOOL` turns one back on."
        )
    if not s.enabled:
        notes.append(f"disabled: its tools are not offered to agents; `mcp-setup enable {name}` turns it back on.")
    if s.needs_sign_in:
        notes.append(
            f"its sign-in expired and could not be renewed: sign in again with `mcp-setup remove {name}`, "
            "then add it again (`mcp-setup add`), which opens the sign-in page."
        )
    change = s.tools_change()
    if change is not None and change["state"] == "changed":
        notes.append(
            f"its tools changed since you approved them ({escape(change['summary'])}); agents get the "
            f"approved ones until you run `mcp-setup tools-review {name}`."
        )
    elif change is not None:
        notes.append(f"you rejected its changed tools ({escape(change['summary'])}); the approved ones stay.")
    return notes


def idle_words(keep_running: bool, idle_stop_seconds: float) -> str:
    """What happens to the server when nobody uses it, in a person's words."""
    if keep_running:
        return "it keeps running when idle (you chose so; `mcp-setup enable NAME --stop-when-idle` undoes it)"
    if idle_stop_seconds <= 0:
        return "it keeps running when idle (MCP_SETUP_IDLE_STOP_SECONDS is 0)"
    minutes = idle_stop_seconds / 60
    after = f"{minutes:.0f} minutes" if minutes >= 2 else f"{idle_stop_seconds:.0f} seconds"
    return f"it stops after {after} unused and starts again on its next call (`--keep-running` on `enable` keeps it)"
