"""Tool pinning: the tools the user approved are the tools the agent gets.

At install the tool list the test saw is *pinned* (stored with its hash, time and version).
At every connect the live list is compared with the pin (:func:`reconcile`):

* a tool whose pinned form and live form are equal is exposed (in its pinned form);
* a **cosmetic** change keeps the pinned form exposed. Cosmetic is narrow: the two forms are
  equal once every string *value* in them (descriptions, titles, schema texts, enum values)
  has its whitespace normalised — leading and trailing whitespace dropped and every run of
  whitespace made one space. Names, keys, types, numbers, booleans, the order of list items
  and every non-whitespace character must be identical; anything else is not cosmetic;
* any other change to a tool (description, title, input or output schema, annotations) holds
  that tool back: it is not listed nor callable until the user approves the new list;
* an added tool is held back the same way; a removed tool disappears.

The change waits for the user's answer out of band (``ToolReview`` in
:mod:`setup_agent.setup.tool_review` opens a consent of action ``tools_change``; the web modal and
``mcp-setup tools-review`` answer it). Nothing the agent can call approves it. These rules are
pure (the migrations use them too); the store's part is :mod:`setup_agent.store.tool_pins`.

Hashes are SHA-256 of canonical JSON (keys sorted, no insignificant whitespace, tools sorted
by name). A diff (:func:`diff_tools`) holds tool and field names only, never texts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_DIFF_NAMES",
    "RECORDED_LATER",
    "Reconciled",
    "canonical_json",
    "diff_tools",
    "is_cosmetic",
    "reconcile",
    "relabel",
    "summarize",
    "tools_hash",
]

#: At most this many names per part of a diff (the rest is counted).
MAX_DIFF_NAMES = 20
_NAME_CHARS = 64
_FIELDS = ("title", "description", "inputSchema", "outputSchema", "annotations")

Tool = Mapping[str, Any]


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tools_hash(tools: Sequence[Tool]) -> str:
    """SHA-256 of the canonical JSON of ``tools`` sorted by name."""
    ordered = sorted((dict(t) for t in tools), key=lambda t: str(t.get("name", "")))
    return hashlib.sha256(canonical_json(ordered).encode("utf-8", "surrogatepass")).hexdigest()


def _squash(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, Mapping):
        return {k: _squash(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_squash(v) for v in value]
    return value


def relabel(tools: Sequence[Tool], labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """``tools`` with each placeholder in ``labels`` swapped for another (both value-free).

    At install the redactor hides a secret as its ref (``secret://…``, still live); every
    connect after hides it as ``[secret:KEY]``. The pin takes the connect's form so that the
    two compare equal."""

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            for old, new in labels.items():
                value = value.replace(old, new)
            return value
        if isinstance(value, Mapping):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [swap(v) for v in value]
        return value

    return [swap(dict(t)) for t in tools]


#: Tool fields mcp-setup records only since the gateway passed tools through whole (before, they were dropped on the way in): a
#: pinned tool with none of them was pinned without looking at them. Against it, a live form
#: that adds only these is not a change to approve: the pinned form (without them) stays
#: exposed, so nothing unapproved passes, and an upgrade does not hold back every tool of a
#: TypeScript-SDK server (which sends ``execution`` on each).
RECORDED_LATER = ("execution", "icons", "_meta")


def _comparable(pinned: Tool, live: Tool) -> dict[str, Any]:
    if any(key in pinned for key in RECORDED_LATER):
        return dict(live)
    return {k: v for k, v in live.items() if k not in RECORDED_LATER}


def is_cosmetic(pinned: Tool, live: Tool) -> bool:
    """True when ``live`` differs from ``pinned`` in whitespace of string values only (or, for
    a tool pinned before they were recorded, in :data:`RECORDED_LATER` fields too)."""
    return canonical_json(_squash(dict(pinned))) == canonical_json(_squash(_comparable(pinned, live)))


def _by_name(tools: Sequence[Tool]) -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for tool in tools:
        name = tool.get("name")
        if isinstance(name, str):
            out.setdefault(name, tool)
    return out


def _short(names: list[str]) -> list[str]:
    return [n[:_NAME_CHARS] for n in sorted(names)[:MAX_DIFF_NAMES]]


def diff_tools(pinned: Sequence[Tool], live: Sequence[Tool]) -> dict[str, Any]:
    """``{added, removed, changed: [{name, fields}], cosmetic, counts}``: names only, never texts."""
    old, new = _by_name(pinned), _by_name(live)
    added = [n for n in new if n not in old]
    removed = [n for n in old if n not in new]
    changed: list[dict[str, Any]] = []
    cosmetic: list[str] = []
    for name in sorted(set(old) & set(new)):
        a, b = dict(old[name]), dict(new[name])
        if canonical_json(a) == canonical_json(b):
            continue
        if is_cosmetic(a, b):
            cosmetic.append(name)
            continue
        keys = sorted(set(a) | set(b))
        fields = [k for k in keys if k != "name" and canonical_json(a.get(k)) != canonical_json(b.get(k))]
        changed.append({"name": name[:_NAME_CHARS], "fields": [f[:_NAME_CHARS] for f in fields][: len(_FIELDS) + 4]})
    return {
        "added": _short(added),
        "removed": _short(removed),
        "changed": changed[:MAX_DIFF_NAMES],
        "cosmetic": _short(cosmetic),
        "counts": {"added": len(added), "removed": len(removed), "changed": len(changed), "cosmetic": len(cosmetic)},
    }


def summarize(diff: Mapping[str, Any]) -> str:
    """One short line: ``2 added (a, b); 1 changed (c: description)``; names only."""
    parts = []
    counts = diff.get("counts", {})
    for part in ("added", "removed"):
        if counts.get(part):
            parts.append(f"{counts[part]} {part} ({', '.join(diff[part][:5])})")
    if counts.get("changed"):
        shown = ", ".join(f"{c['name']}: {'/'.join(c['fields'])}" for c in diff["changed"][:5])
        parts.append(f"{counts['changed']} changed ({shown})")
    if counts.get("cosmetic"):
        parts.append(f"{counts['cosmetic']} whitespace only")
    return "; ".join(parts) or "no change"


@dataclass(frozen=True)
class Reconciled:
    """What a live list means against the pin."""

    exposed: list[dict[str, Any]]  # the pinned forms still offered, unchanged or cosmetic
    live_hash: str
    needs_approval: bool  # something is held back, or a tool disappeared
    diff: dict[str, Any]


def reconcile(pinned: Sequence[Tool], live: Sequence[Tool]) -> Reconciled:
    """The exposed list (pinned forms only) and whether the user must look at the change."""
    new = _by_name(live)
    exposed: list[dict[str, Any]] = []
    for tool in pinned:
        other = new.get(str(tool.get("name")))
        if other is None:
            continue  # removed: it disappears
        if canonical_json(dict(tool)) == canonical_json(dict(other)) or is_cosmetic(tool, other):
            exposed.append(dict(tool))
        # otherwise held back until approved
    diff = diff_tools(pinned, live)
    counts = diff["counts"]
    needs = bool(counts["added"] or counts["removed"] or counts["changed"])
    return Reconciled(exposed, tools_hash(live), needs, diff)
